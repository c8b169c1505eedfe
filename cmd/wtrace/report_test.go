package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

func TestReportParse(t *testing.T) {
	runParse(t, newReportCmd, []checkParse{
		{args: []string{"s.wt", "-o", "s.html", "--client", "user-agent=op", "--stall", "1m"}, want: map[string]any{"paths": []string{"s.wt"}, "out": "s.html", "clients": []string{"user-agent=op"}}},
		{args: []string{"a.wt", "b.wt"}, want: map[string]any{"paths": []string{"a.wt", "b.wt"}}},
		{args: []string{}, usage: "one session file, or two"},
		{args: []string{"a.wt", "b.wt", "c.wt"}, usage: "one session file, or two"},
	})
}

// TestReport: wtrace report writes the page of a session beside it, and
// of two sessions the diff; wtrace diff --html writes it only when they
// differ; bad flags and an output that is an input are usage errors.
func TestReport(t *testing.T) {
	a := wttest.RecordCorpus(t, "basic-json", false)
	g := wttest.RecordCorpus(t, "gone-410", false)
	dir := t.TempDir()
	cli := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := run(args, strings.NewReader(""), &o, &e)
		return code, o.String(), e.String()
	}
	isPage := func(path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte(`id="model"`)) {
			t.Errorf("%s is not a report page: %v", path, err)
		}
	}
	if code, _, e := cli("report", a); code != 0 || !strings.Contains(e, "wrote "+strings.TrimSuffix(a, ".wt")+".html") {
		t.Errorf("report %s: exit %d, %q", a, code, e)
	}
	isPage(strings.TrimSuffix(a, ".wt") + ".html")
	out := filepath.Join(dir, "d.html")
	if code, _, e := cli("report", a, g, "-o", out); code != 0 {
		t.Errorf("report a b: exit %d, %q", code, e)
	}
	isPage(out)
	if code, o, _ := cli("report", a, "-o", "-"); code != 0 || !strings.HasPrefix(o, "<!DOCTYPE html>") {
		t.Errorf("report -o -: exit %d, %.40q", code, o)
	}
	same := filepath.Join(dir, "same.html")
	if code, _, e := cli("diff", a, a, "--html", same); code != 0 {
		t.Errorf("diff a a --html: exit %d, %q", code, e)
	}
	if _, err := os.Stat(same); err == nil {
		t.Errorf("diff --html wrote a page for sessions that are the same")
	}
	differ := filepath.Join(dir, "differ.html")
	if code, _, e := cli("diff", a, g, "--html", differ); code != 1 || !strings.Contains(e, "wrote "+differ) {
		t.Errorf("diff a g --html: exit %d, %q; want 1 and the page", code, e)
	}
	isPage(differ)
	for _, args := range [][]string{{"report", a, "-o", a}, {"report", a, "--max-body-bytes", "lots"}, {"report", a, "--client", "nope"}, {"diff", a, g, "--html", g}} {
		if code, _, e := cli(args...); code != 2 {
			t.Errorf("%q: exit %d, %q; want 2", args, code, e)
		}
	}
}
