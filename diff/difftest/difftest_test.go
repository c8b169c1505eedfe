package difftest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// recorder is a testing.TB that keeps what a test would have reported.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
	r.fatal = true
	runtime.Goexit()
}

// run calls Same with a recorder, on a goroutine of its own (as a test's,
// which Fatalf ends).
func run(t *testing.T, a, b string, opts diff.Options) (*recorder, *diff.Report) {
	r := &recorder{TB: t}
	var rep *diff.Report
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep = Same(r, a, b, opts)
	}()
	<-done
	return r, rep
}

func TestSame(t *testing.T) {
	a := wttest.RecordCorpus(t, "basic-json", false)
	b := wttest.RecordCorpus(t, "basic-json", false)
	g := wttest.RecordCorpus(t, "gone-410", false)

	if r, rep := run(t, a, b, diff.Options{}); len(r.errors) != 0 || rep == nil || !rep.Same {
		t.Errorf("Same of two recordings of basic-json: %q", r.errors)
	}
	r, _ := run(t, a, g, diff.Options{})
	if len(r.errors) != 1 || r.fatal || !strings.Contains(r.errors[0], "the sessions differ") ||
		!strings.Contains(r.errors[0], "watch configmaps -n corpus-basic\n  stream missing in") {
		t.Errorf("Same of basic-json and gone-410 reported %q; want the report", r.errors)
	}
	// The page of the report, beside the run, and into $WTRACE_REPORT_DIR.
	if !strings.Contains(r.errors[0], "the report to look at: "+strings.TrimSuffix(g, ".wt")+".diff.html") {
		t.Errorf("Same of basic-json and gone-410 did not name the HTML report beside the run: %q", r.errors[0])
	}
	if page, err := os.ReadFile(strings.TrimSuffix(g, ".wt") + ".diff.html"); err != nil || !bytes.Contains(page, []byte("<!DOCTYPE html>")) {
		t.Errorf("the HTML report beside the run: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "reports")
	t.Setenv(ReportDirEnv, dir)
	r, _ = run(t, a, g, diff.Options{})
	if want := filepath.Join(dir, "TestSame.html"); len(r.errors) != 1 || !strings.Contains(r.errors[0], want) {
		t.Errorf("with %s set, Same reported %q; want the report in %s", ReportDirEnv, r.errors, want)
	} else if _, err := os.Stat(want); err != nil {
		t.Error(err)
	}
	if r, _ := run(t, a, g, diff.Options{Ignore: []string{"bad"}}); !r.fatal {
		t.Errorf("Same with a bad ignore path did not fail at once: %q", r.errors)
	}
}
