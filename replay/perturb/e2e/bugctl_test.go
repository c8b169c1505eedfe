package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/bugctl"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
)

const bugNS = "bugctl"

// The perturbation that catches each planted bug (testkit/bugctl), at
// its point of the recording: the 2nd write is p2's child's create, the
// 3rd p3's, after which p3 is marked deleting, then deleted.
var bugCatchers = map[string]string{
	"StaleDelete":      "stale:resource=configmaps,changes=2,at=write:2",
	"Intermediate":     "skip:resource=configmaps,at=write:3,for=3s",
	"DuplicateCreate":  "error:at=write:1,when=after",
	"IgnoreRetryAfter": "throttle:share=1,count=1,on=writes",
}

// bugOthers are perturbations that catch none of the bugs.
var bugOthers = []string{"watch-close:at=write:2", "gone:at=write:2", "restart:at=write:2,for=1s", "client-restart:at=write:2"}

var bugNames = []string{"StaleDelete", "Intermediate", "DuplicateCreate", "IgnoreRetryAfter"}

func bugsOf(name string) bugctl.Bugs {
	return bugctl.Bugs{StaleDelete: name == "StaleDelete", Intermediate: name == "Intermediate",
		DuplicateCreate: name == "DuplicateCreate", IgnoreRetryAfter: name == "IgnoreRetryAfter"}
}

// TestPerturbPlantedBugs: a client-go controller (testkit/bugctl),
// recorded correct on a real apiserver, replayed with one planted bug at
// a time: each bug passes the unperturbed replay and is caught by the
// perturbation of its class — the diff report naming it; the correct
// controller passes every perturbation; each bug also runs under the
// other bugs' catchers, watch-close and gone, which must not flag it
// (20 cells, each 4-6 s: left out with -short, or
// WTRACE_PERTURB_MATRIX=short).
func TestPerturbPlantedBugs(t *testing.T) {
	full := !testing.Short() && os.Getenv("WTRACE_PERTURB_MATRIX") != "short"
	recorded := recordBugctl(t)
	var table []string
	check := func(bug string, spec string, wantCaught bool) {
		t.Run(bug+"/"+strings.NewReplacer(":", "_", ",", "_", "=", "-").Replace(spec), func(t *testing.T) {
			var specs []perturb.Spec
			if spec != "none" {
				sp, err := perturb.Parse(spec)
				if err != nil {
					t.Fatal(err)
				}
				specs = []perturb.Spec{sp}
			}
			run := runBugctl(t, recorded, bugsOf(bug), specs)
			rep, err := diff.Sessions(recorded, run, diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			verdict := "same"
			named := ""
			if !rep.Same {
				verdict = "differs"
				if rep.Preceding != nil {
					named = " — after " + rep.Preceding.Spec
				}
			}
			table = append(table, fmt.Sprintf("%-17s %-48s %s%s", bug, spec, verdict, named))
			if rep.Same == wantCaught {
				var b strings.Builder
				rep.WriteText(&b, diff.TextOptions{})
				t.Errorf("%s under %s: %s, want caught=%v\n%s", bug, spec, verdict, wantCaught, b.String())
			}
			if wantCaught && (rep.Preceding == nil || rep.Preceding.Spec != specs[0].String()) {
				t.Errorf("%s under %s: the report names %+v as the perturbation before the first difference", bug, spec, rep.Preceding)
			}
		})
	}
	all := append([]string{"none"}, bugOthers...)
	for _, b := range bugNames {
		all = append(all, bugCatchers[b])
	}
	for _, spec := range all {
		check("correct", spec, false)
	}
	for _, bug := range bugNames {
		check(bug, "none", false)
		for _, other := range bugNames {
			if other == bug || full {
				check(bug, bugCatchers[other], other == bug)
			}
		}
		if full {
			for _, spec := range bugOthers[:2] {
				check(bug, spec, false)
			}
		}
	}
	t.Logf("controller, perturbation → verdict\n%s", strings.Join(table, "\n"))
}

// recordBugctl records the correct controller through the recording
// proxy in front of a real apiserver while the scenario plays.
func recordBugctl(t *testing.T) string {
	t.Helper()
	c := k8stest.Start(t)
	path := filepath.Join(t.TempDir(), "bugctl.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: path}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := &rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := bugctl.Start(ctx, &rest.Config{Host: px.URL}, bugNS, bugctl.Bugs{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := bugctl.Play(ctx, cs, bugNS, t.Logf); err != nil {
		t.Fatal(err)
	}
	ctl.Stop()
	px.Stop()
	return path
}

// runBugctl replays recorded to the controller with bugs under specs (a
// client-restart restarts it), until the run settles; it returns the
// run's file.
func runBugctl(t *testing.T, recorded string, bugs bugctl.Bugs, specs []perturb.Spec) string {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var ctl *bugctl.Controller
	var url string
	start := func() {
		c, err := bugctl.Start(ctx, &rest.Config{Host: url}, bugNS, bugs, t.Logf)
		if err != nil {
			t.Error(err)
			return
		}
		ctl = c
	}
	srv := replaytest.NewServer(t, recorded, replay.Options{Pace: replay.PaceQuiet, Out: rec, Perturb: specs,
		ClientRestart: func(context.Context, perturb.Spec) error {
			mu.Lock()
			defer mu.Unlock()
			ctl.Stop()
			start()
			return nil
		}})
	mu.Lock()
	url = srv.URL
	start()
	mu.Unlock()
	if !srv.Settle(ctx.Done(), time.Second) {
		t.Fatal("the run did not settle within 2 minutes")
	}
	for _, a := range srv.Perturbations() {
		t.Logf("%s", a)
	}
	mu.Lock()
	if ctl != nil {
		ctl.Stop()
	}
	mu.Unlock()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return run
}
