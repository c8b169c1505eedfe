package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/perturb/plan"
	"github.com/wtrace/wtrace/replay/perturb/runner"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// rs1 is a real recording of kube-controller-manager v1.33.13
// (--controllers=deployment,replicaset; diff/testdata/kcm/README.md).
var rs1 = filepath.Join("..", "..", "..", "diff", "testdata", "kcm", "rs-1.wt")

// kcmArgs are the flags k8stest.StartControllerManager gives kcm, the
// kubeconfig the runner's.
const kcmArgs = ` --kubeconfig="$KUBECONFIG" --controllers=deployment,replicaset --leader-elect=false --use-service-account-credentials=false --secure-port=0`

// planned returns the client and, of rs-1.wt's plan, the first spec of
// each of kinds.
func planned(t *testing.T, kinds ...perturb.Kind) ([]world.Client, []perturb.Spec) {
	t.Helper()
	p, err := plan.New(wttest.OpenSession(t, rs1), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clients, _, err := world.ParseClients([]string{p.Client})
	if err != nil {
		t.Fatal(err)
	}
	var specs []perturb.Spec
	for _, k := range kinds {
		i := slices.IndexFunc(p.Specs, func(sp perturb.Spec) bool { return sp.Kind == k })
		if i < 0 {
			t.Fatalf("no %s in the plan of %s: %v", k, rs1, p.Strings())
		}
		specs = append(specs, p.Specs[i])
	}
	return clients, specs
}

// TestRunKCM: the real kube-controller-manager, run by Exec (sh -c, its
// kubeconfig from $KUBECONFIG), under four of the plan's specs of
// rs-1.wt — a watch's 410, an apiserver restart, a write's lost answer,
// kcm itself restarted — ends each run as the recording did: no false
// alarm, every spec's point reached.
func TestRunKCM(t *testing.T) {
	bin := k8stest.ControllerManagerBinary(t)
	clients, specs := planned(t, perturb.Gone, perturb.Restart, perturb.Error, perturb.ClientRestart)
	dir := t.TempDir()
	var logs strings.Builder
	out := &syncWriter{b: &logs}
	start := runner.Exec(bin+kcmArgs, runner.ExecOptions{Stdout: out, Stderr: out})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, rs1, specs, start, runner.Options{Clients: clients, Dir: dir})
	if err != nil {
		t.Fatalf("runner.Run: %v", err)
	}
	if len(res) != len(specs) {
		t.Fatalf("runner.Run: %d results; want %d", len(res), len(specs))
	}
	var table []string
	for _, r := range res {
		table = append(table, r.Text+"  "+r.Verdict+"  "+r.Took.Round(100*time.Millisecond).String()+"  "+strings.Join(r.Applied, "; "))
		if !r.Same || !r.Settled {
			t.Errorf("%s: %s (settled %v): %s (after %s)", r.Text, r.Verdict, r.Settled, r.First, r.Preceding)
		}
		if len(r.Applied) == 0 {
			t.Errorf("%s: never applied; want its point reached", r.Text)
		}
		if _, err := os.Stat(r.Run); err != nil {
			t.Errorf("%s: the run's file: %v", r.Text, err)
		}
	}
	t.Logf("spec → verdict, took, applied\n%s", strings.Join(table, "\n"))
	if t.Failed() {
		t.Logf("kcm's output:\n%s", logs.String())
	}
}

// TestRunDiffers: a controller that does nothing never gets where the
// recording did (the replay's environment waits for its writes: the run
// never settles), and the result says so; without Options.Dir no run
// file is kept; Run leaves no goroutine behind.
func TestRunDiffers(t *testing.T) {
	clients, specs := planned(t, perturb.Gone)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started, stopped := 0, 0
	start := func(ctx context.Context, url, kubeconfig string) (func(), error) {
		if _, err := os.Stat(kubeconfig); err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Errorf("start(%q, %q): %v; want a loopback URL and a kubeconfig file", url, kubeconfig, err)
		}
		started++
		return func() { stopped++ }, nil
	}
	var done []int
	res, err := runner.Run(context.Background(), rs1, specs, start, runner.Options{Clients: clients, QuietWindow: 200 * time.Millisecond, Timeout: 3 * time.Second,
		Done: func(i int, r runner.Result) { done = append(done, i) }})
	if err != nil {
		t.Fatalf("runner.Run: %v", err)
	}
	if len(res) != 1 || res[0].Same || res[0].Verdict != "differs" || res[0].Settled || !strings.Contains(res[0].First, "did not settle") || res[0].Run != "" {
		t.Fatalf("runner.Run = %+v; want one run that differs, its first difference, no file", res)
	}
	if started != 1 || stopped != 1 || !slices.Equal(done, []int{0}) {
		t.Errorf("started %d, stopped %d, done %v; want 1, 1, [0]", started, stopped, done)
	}
	t.Logf("%s: %s: %s", res[0].Text, res[0].Verdict, res[0].First)
}

// syncWriter is a strings.Builder written by the command's two streams.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func sleepABit() { time.Sleep(10 * time.Millisecond) }
