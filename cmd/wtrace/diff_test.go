package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffCLI: basic-json recorded twice is the same (exit 0);
// basic-json and gone-410 differ (exit 1) and the report names how;
// errors exit 2.
func TestDiffCLI(t *testing.T) {
	dir := t.TempDir()
	rec := func(scenario, name string) string {
		out := filepath.Join(dir, name)
		recordScenario(t, scenario, out)
		return out
	}
	a, a2, g := rec("basic-json", "a.wt"), rec("basic-json", "a2.wt"), rec("gone-410", "g.wt")

	stdout, stderr, code := wtrace(t, "diff", a, a2)
	if code != 0 || !strings.Contains(stdout, "are the same") || !strings.Contains(stdout, "events     200 compared, no difference") || stderr != "" {
		t.Errorf("diff of two recordings of basic-json: exit %d\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("colours on a pipe")
	}

	stdout, _, code = wtrace(t, "diff", a, g)
	for _, want := range []string{"differ", "streams    0 compared: 1 missing, 4 extra", "watch configmaps -n corpus-basic\n  stream missing in " + g + ": 200 events"} {
		if code != 1 || !strings.Contains(stdout, want) {
			t.Errorf("diff basic-json gone-410: exit %d, no %q:\n%s", code, want, stdout)
		}
	}

	stdout, _, code = wtrace(t, "diff", a, g, "--json")
	var rep struct {
		A, B    string
		Same    bool
		Summary map[string]map[string]int
		Groups  []struct {
			Subject     string
			Differences []map[string]any
		}
		Omitted *int
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 {
		t.Fatalf("diff --json: exit %d, %v:\n%s", code, err, stdout)
	}
	if rep.A != a || rep.B != g || rep.Same || rep.Summary["streams"]["missing"] != 1 || rep.Summary["exchanges"]["extra"] != 2 ||
		len(rep.Groups) != 6 || rep.Omitted == nil || rep.Groups[0].Differences[0]["kind"] != "missing" {
		t.Errorf("diff --json: %+v", rep)
	}

	if _, _, code := wtrace(t, "diff", a, g, "--only", "write", "--collapse-repeats"); code != 0 {
		t.Errorf("diff --only write of sessions without writes: exit %d; want 0", code)
	}
	if stdout, _, code := wtrace(t, "diff", a, g, "--max", "2"); code != 1 || !strings.Contains(stdout, "(6 more differences counted above are not listed)") {
		t.Errorf("diff --max 2: exit %d\n%s", code, stdout)
	}

	for _, args := range [][]string{
		{"diff", a, g, "--ignore", "metadata.name"},
		{"diff", a, filepath.Join(dir, "nope.wt")},
		{"diff", a, filepath.Join(corpus("basic-json"), "capture.pcap")},
		{"diff", a, g, "--only", "everything"},
		{"diff", a},
		{"diff", a, g, "--time-tolerance", "soon"},
	} {
		_, stderr, code := wtrace(t, args...)
		if code != 2 || !strings.Contains(stderr, "Error: ") {
			t.Errorf("wtrace %q: exit %d, stderr %q; want exit 2 with an error", args, code, stderr)
		}
	}
	if _, stderr, _ := wtrace(t, "diff", a, g, "--ignore", "metadata.name"); !strings.Contains(stderr, "Try: ") {
		t.Errorf("a bad --ignore gives no hint: %s", stderr)
	}
	if stdout, _, code := wtrace(t, "diff", "--help"); code != 0 || !strings.Contains(stdout, "Examples:") {
		t.Errorf("diff --help: exit %d\n%s", code, stdout)
	}
}

// TestDiffCLIKCM: on the real recordings of kube-controller-manager
// (diff/testdata/kcm), two runs of one scenario are the same both ways
// (exit 0), the replicaset controller off differs (exit 1), --strict
// counts the events' timing too, and --json carries the pairing.
func TestDiffCLIKCM(t *testing.T) {
	kcm := func(name string) string { return filepath.Join("..", "..", "diff", "testdata", "kcm", name) }
	for _, args := range [][]string{
		{kcm("rs-1.wt"), kcm("rs-2.wt")}, {kcm("rs-2.wt"), kcm("rs-1.wt")},
		{kcm("gc-1.wt"), kcm("gc-2.wt")}, {kcm("gc-2.wt"), kcm("gc-1.wt")},
		{kcm("rs-1.wt"), kcm("rs-2.wt"), "--collapse-repeats"},
	} {
		if stdout, stderr, code := wtrace(t, append([]string{"diff"}, args...)...); code != 0 || !strings.Contains(stdout, "are the same") {
			t.Errorf("wtrace diff %q: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	stdout, _, code := wtrace(t, "diff", kcm("rs-1.wt"), kcm("deployment-only.wt"))
	for _, want := range []string{"end state  12 compared: 20 missing, 7 changed", "pods kcm-scenario/web-796cf5c97c-#1\n  end state missing in"} {
		if code != 1 || !strings.Contains(stdout, want) {
			t.Errorf("diff with the replicaset controller off: exit %d, no %q:\n%s", code, want, stdout)
		}
	}
	if stdout, _, code := wtrace(t, "diff", kcm("rs-1.wt"), kcm("rs-2.wt"), "--strict"); code != 1 || !strings.Contains(stdout, "beyond the time tolerance") {
		t.Errorf("diff --strict: exit %d\n%s", code, stdout)
	}
	if _, _, code := wtrace(t, "diff", kcm("rs-1.wt"), kcm("deployment-only.wt"), "--ignore-resource", "pods", "--ignore-resource", "events",
		"--ignore-resource", "replicasets.apps", "--ignore-resource", "deployments.apps"); code != 0 {
		t.Errorf("diff --ignore-resource of every resource written: exit %d; want 0", code)
	}
	stdout, _, code = wtrace(t, "diff", kcm("rs-1.wt"), kcm("rs-2.wt"), "--json")
	var rep struct {
		Same    bool
		Pairing []struct {
			Object struct{ Name string }
			A, B   string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.Same || len(rep.Pairing) != 10 ||
		rep.Pairing[0].Object.Name != "web-796cf5c97c-#1" || rep.Pairing[0].A == rep.Pairing[0].B {
		t.Errorf("diff --json: exit %d, %v: %+v", code, err, rep)
	}
	for _, args := range [][]string{
		{"diff", kcm("rs-1.wt"), kcm("rs-2.wt"), "--verdict", "everything"},
		{"diff", kcm("rs-1.wt"), kcm("rs-2.wt"), "--verdict", "write", "--strict"},
	} {
		if _, stderr, code := wtrace(t, args...); code != 2 || !strings.Contains(stderr, "Try: ") {
			t.Errorf("wtrace %q: exit %d, stderr %q; want exit 2 with a hint", args, code, stderr)
		}
	}
}
