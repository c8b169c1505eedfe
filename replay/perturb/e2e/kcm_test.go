package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/kcmtest"
)

var kcmControllers = kcmtest.DeploymentControllers

// kcmPerturbations are the perturbations TestPerturbKCM applies, each in
// a run of its own: every class, at several points of the recording (its
// writes, its watch events, times).
var kcmPerturbations = []string{
	"watch-close:at=write:3",
	"watch-close:at=write:25",
	"watch-close:resource=pods,at=event:30,mode=reset",
	"gone:at=write:10",
	"gone:resource=replicasets,at=write:30",
	"gone:resource=deployments.apps,at=event:40",
	"stale:changes=3,count=4",
	"stale:resource=replicasets,changes=5",
	"skip:at=write:15",
	"skip:resource=pods,at=write:35",
	"restart:at=write:6,for=1s",
	"restart:at=write:30",
	"throttle:share=0.2,seed=7",
	"throttle:share=0.3,seed=3,on=writes",
	"error:at=write:2,when=after",
	"error:at=write:5:pods,code=500",
	"error:at=write:20,code=504,when=after",
	"conflict:resource=deployments.apps",
	"conflict:at=write:4",
	"delay:for=200ms",
	"delay:for=100ms,on=events",
	"client-restart:at=write:5",
	"client-restart:at=write:30",
}

// TestPerturbKCM: kube-controller-manager (deployment, replicaset,
// garbagecollector, namespace controllers) recorded on a real apiserver,
// then replayed under each of kcmPerturbations: every run settles, and
// its end state is judged the same as the recording's (no false alarm).
// A client-restart stops kcm and starts a new one.
func TestPerturbKCM(t *testing.T) {
	k8stest.ControllerManagerBinary(t)
	recorded := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: kcmControllers})
	var table []string
	for _, text := range kcmPerturbations {
		sp, err := perturb.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.NewReplacer(":", "_", ",", "_", "=", "-").Replace(text), func(t *testing.T) {
			start := time.Now()
			run, applied := runKCMPerturbed(t, recorded.Path, sp)
			verdict, firstDiff := perturbVerdict(t, recorded.Path, run, applied)
			took := time.Since(start).Round(100 * time.Millisecond)
			table = append(table, fmt.Sprintf("%-50s %-7s %6s  %d applied%s", text, verdict, took, len(applied), firstDiff))
			if verdict != "same" {
				t.Errorf("%s: the run differs from the recording%s", text, firstDiff)
			}
		})
	}
	t.Logf("spec → verdict (kcm: %s)\n%s", strings.Join(kcmControllers, ","), strings.Join(table, "\n"))
}

// runKCMPerturbed replays path to kcm under sp (a client-restart
// restarts kcm), until the run settles; it returns the run's file and
// the perturbations applied.
func runKCMPerturbed(t *testing.T, path string, sp perturb.Spec) (string, []perturb.Applied) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, run)
	var mu sync.Mutex
	var kcm *k8stest.ControllerManager
	var url string
	opts := replay.Options{Pace: replay.PaceQuiet, Out: rec, Perturb: []perturb.Spec{sp},
		ClientRestart: func(ctx context.Context, _ perturb.Spec) error {
			mu.Lock()
			defer mu.Unlock()
			kcm.Stop()
			kcm = k8stest.StartControllerManager(t, k8stest.ControllerManagerOptions{URL: url, Controllers: kcmControllers})
			return nil
		}}
	srv := replaytest.NewServer(t, path, opts)
	mu.Lock()
	url = srv.URL
	kcm = k8stest.StartControllerManager(t, k8stest.ControllerManagerOptions{URL: url, Controllers: kcmControllers})
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatalf("the run under %s did not settle within 3 minutes (log: %s)", sp, kcm.Log)
	}
	applied := srv.Perturbations()
	for _, a := range applied {
		t.Logf("%s", a)
	}
	mu.Lock()
	kcm.Stop()
	mu.Unlock()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return run, applied
}

// perturbVerdict judges a perturbed run by its end state (diff's state
// category) and its findings: "same" or "differs", with the first
// difference and the perturbation that preceded it.
func perturbVerdict(t *testing.T, recorded, run string, applied []perturb.Applied) (string, string) {
	t.Helper()
	rep, err := diff.Sessions(recorded, run, diff.Options{Verdict: []diff.Category{diff.CategoryState}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range applied {
		if a.Finding != "" {
			return "differs", ": " + a.Finding + " (after " + a.Spec + ")"
		}
	}
	if rep.Same {
		return "same", ""
	}
	var b strings.Builder
	rep.WriteText(&b, diff.TextOptions{})
	t.Logf("%s", b.String())
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category == diff.CategoryState {
				return "differs", fmt.Sprintf(": %s %s %s", g.Subject, d.Kind, d.Detail)
			}
		}
	}
	return "differs", ""
}
