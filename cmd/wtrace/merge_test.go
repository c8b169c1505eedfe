package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeCLI: wtrace merge joins the two parts of a rotated proxy
// recording written by an earlier version (given in any order) into a
// session whose events are both parts' events, and refuses what it
// cannot do with a usage error.
func TestMergeCLI(t *testing.T) {
	dir := t.TempDir()
	var parts []string
	for i, n := range []string{"proxy-rotated-0001.wt", "proxy-rotated-0002.wt"} {
		b, err := os.ReadFile(filepath.Join(compatDir, "9936756", n))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, []string{"rot-0001.wt", "rot-0002.wt"}[i]) // their names when recorded
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	out := filepath.Join(dir, "all.wt")
	stdout, stderr, code := wtrace(t, "merge", parts[1], parts[0], "-o", out)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "Merged 1 recording") || !strings.Contains(stderr, "(2 parts)") {
		t.Fatalf("merge: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	e1, _, _ := wtrace(t, "events", parts[0])
	e2, _, _ := wtrace(t, "events", parts[1])
	all, _, code := wtrace(t, "events", out)
	if code != 0 || all != e1+e2 {
		t.Errorf("events of the merge (%d bytes) are not those of both parts (%d + %d bytes)", len(all), len(e1), len(e2))
	}
	for _, args := range [][]string{
		{"merge", parts[0]},
		{"merge", "-o", out},
		{"merge", parts[0], "-o", parts[0]},
	} {
		if _, stderr, code := wtrace(t, args...); code != 2 || !strings.Contains(stderr, "Error:") {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, stderr)
		}
	}
	if _, stderr, code := wtrace(t, "merge", filepath.Join(dir, "none.wt"), "-o", filepath.Join(dir, "x.wt")); code != 1 || !strings.Contains(stderr, "Try:") {
		t.Errorf("a missing input: exit %d, stderr %q", code, stderr)
	}
}
