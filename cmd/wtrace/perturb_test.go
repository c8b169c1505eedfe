package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/k8stest"
)

// kcmSession is a real recording of kube-controller-manager (see
// diff/testdata/kcm/README.md).
var kcmSession = filepath.Join("..", "..", "diff", "testdata", "kcm", "rs-1.wt")

// TestPerturbPlan: wtrace perturb plan prints the plan of package
// replay/perturb/plan (its golden file: the same specs, one a line), as
// JSON with --output json, bounded by --max and --kind; a session no
// client wrote in has no plan (exit 1, with a hint).
func TestPerturbPlan(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "..", "replay", "perturb", "plan", "testdata", "rs-1.plan"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.SplitN(string(golden), "\n", 2)[1] // without its comment line
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout func(string) bool
		stderr string
	}{
		{"default", []string{kcmSession}, 0, func(out string) bool { return out == want }, "Planned 40 of 383 points"},
		{"bounded", []string{kcmSession, "--max", "3", "--kind", "gone"}, 0, func(out string) bool {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			return len(lines) == 3 && strings.HasPrefix(lines[0], "gone:") && strings.HasPrefix(lines[2], "gone:")
		}, "Planned 3 of"},
		{"json", []string{kcmSession, "--max", "5", "--output", "json"}, 0, func(out string) bool {
			var p planJSON
			return json.Unmarshal([]byte(out), &p) == nil && len(p.Specs) == 5 && p.Writes == 61 && strings.HasPrefix(p.Client, "user-agent=")
		}, ""},
		{"no writes", []string{filepath.Join("..", "..", "testdata", "compat", "9936756", "basic-json.wt")}, 1,
			func(out string) bool { return out == "" }, "Try: "},
		{"no such client", []string{kcmSession, "--client", "^nobody/"}, 1, func(out string) bool { return out == "" }, "no write of a client"},
		{"usage", []string{kcmSession, "--max", "0"}, 2, func(out string) bool { return out == "" }, "--max 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := wtrace(t, append([]string{"perturb", "plan"}, tt.args...)...)
			if code != tt.code || !tt.stdout(out) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("wtrace perturb plan %q: exit %d, stdout\n%s\nstderr %q; want exit %d, stderr with %q", tt.args, code, out, stderr, tt.code, tt.stderr)
			}
		})
	}
}

// TestPerturbRun: wtrace perturb run prints a table, spec → verdict,
// time, first difference, and exits 1 when a run differs: a command
// that runs no controller never gets the run where the recording went.
// With the real kube-controller-manager (skipped without it), a planned
// spec's run is the same as the recording: exit 0.
func TestPerturbRun(t *testing.T) {
	t.Run("nothing runs", func(t *testing.T) {
		out, stderr, code := wtrace(t, "perturb", "run", kcmSession, "--exec", "true", "--spec", "gone:at=write:2",
			"--timeout", "2s", "--quiet-window", "200ms")
		if code != 1 || !strings.HasPrefix(out, "SPEC") || !strings.Contains(out, "gone:at=write:2  differs") ||
			!strings.Contains(out, "did not settle within 2s") || !strings.Contains(stderr, "0 of 1 runs ended as the recording did") {
			t.Errorf("perturb run: exit %d, stdout\n%s\nstderr %q; want exit 1 and the run that differs", code, out, stderr)
		}
	})
	t.Run("kcm", func(t *testing.T) {
		bin := k8stest.ControllerManagerBinary(t)
		exec := bin + ` --kubeconfig="$KUBECONFIG" --controllers=deployment,replicaset --leader-elect=false --use-service-account-credentials=false --secure-port=0`
		out, stderr, code := wtrace(t, "perturb", "run", kcmSession, "--exec", exec, "--plan", "--kind", "watch-close", "--max", "1", "--output", "json")
		var res []struct {
			Spec, Verdict string
			Same          bool
			Applied       []string
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res) != 1 || !res[0].Same || len(res[0].Applied) != 1 {
			t.Errorf("perturb run --plan --kind watch-close --max 1: exit %d, %v, stdout\n%s\nstderr %s; want one run, the same", code, err, out, stderr)
		}
	})
}
