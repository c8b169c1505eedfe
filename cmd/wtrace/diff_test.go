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
