package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/crtest"
)

// crPerturbations are the perturbations a controller-runtime manager is
// replayed under (issue 33), each at two points of the recording: the
// operator's 2nd and 4th writes of a ConfigMap (its Lease renewals and
// Events are writes too, and come on a timer).
var crPerturbations = []string{
	"watch-close:at=write:2:configmaps",
	"watch-close:at=write:4:configmaps",
	"gone:at=write:2:configmaps",
	"gone:at=write:4:configmaps",
	"restart:at=write:2:configmaps,for=1s",
	"restart:at=write:4:configmaps,for=1s",
	"client-restart:at=write:2:configmaps",
	"client-restart:at=write:4:configmaps",
}

// TestPerturbControllerRuntime: the operator of testkit/crtest (a
// controller-runtime manager: cache, client, event recorder, leader
// election), recorded on a real apiserver, replayed under watch-close,
// gone, restart and client-restart (the manager restarted through
// Options.ClientRestart): each run settles and converges to the
// recorded end state (the diff's perturbed verdict is same).
func TestPerturbControllerRuntime(t *testing.T) {
	recorded := recordCRTest(t)
	var table []string
	for _, spec := range crPerturbations {
		t.Run(strings.NewReplacer(":", "_", ",", "_", "=", "-").Replace(spec), func(t *testing.T) {
			sp, err := perturb.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			run := runCRTest(t, recorded, sp)
			rep, err := diff.Sessions(recorded, run, diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			verdict := "same"
			if !rep.Same {
				verdict = "differs"
			}
			table = append(table, fmt.Sprintf("%-44s %-7s %s", spec, verdict, time.Since(start).Round(100*time.Millisecond)))
			if !rep.Same {
				var b strings.Builder
				rep.WriteText(&b, diff.TextOptions{})
				t.Errorf("the operator under %s does not converge to the recorded end state\n%s", spec, b.String())
			}
		})
	}
	t.Logf("perturbation → verdict, run time\n%s", strings.Join(table, "\n"))
}

// runCRTest replays recorded to the operator under sp (client-restart
// restarts it) until the run settles; it returns the run's file.
func runCRTest(t *testing.T, recorded string, sp perturb.Spec) string {
	t.Helper()
	runPath := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, runPath)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var op *crtest.Operator
	var url string
	srv := replaytest.NewServer(t, recorded, replay.Options{Pace: replay.PaceQuiet, Out: rec, Perturb: []perturb.Spec{sp},
		ClientRestart: func(context.Context, perturb.Spec) error {
			mu.Lock()
			defer mu.Unlock()
			if err := op.Stop(); err != nil {
				t.Logf("stopping the operator: %v", err)
			}
			next, err := crtest.Start(&rest.Config{Host: url}, crTestNS)
			if err != nil {
				return err
			}
			op = next
			select { // the restarted manager leads again (its Lease expires first)
			case <-op.Elected():
			case <-time.After(30 * time.Second):
				return fmt.Errorf("the restarted operator did not win its election within 30 s")
			}
			return nil
		}})
	mu.Lock()
	url = srv.URL
	first, err := crtest.Start(&rest.Config{Host: url}, crTestNS)
	if err != nil {
		mu.Unlock()
		t.Fatal(err)
	}
	op = first
	mu.Unlock()
	waitElected(t, first)
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatal("the run did not settle within 2 minutes")
	}
	for _, a := range srv.Perturbations() {
		t.Logf("%s", a)
	}
	mu.Lock()
	if err := op.Stop(); err != nil {
		t.Logf("stopping the operator: %v", err)
	}
	mu.Unlock()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return runPath
}
