// Package difftest fails a Go test when two sessions differ, with the
// report a person reads — the regression check of a controller's test:
//
//	// replay testdata/recorded.wt to the controller under test and record
//	// what it did into run (a session file), then:
//	difftest.Same(t, "testdata/recorded.wt", run, diff.Options{})
//
// With the zero Options, sessions that hold writes are the same when the
// end state of every object written and each object's successful writes
// are (diff.Options.Verdict): the controller's behaviour, whatever the
// timing of what it read.
//
// When they differ, Same also writes the report as one HTML page (package
// report: both runs on one timeline, every difference marked and listed)
// for a failing CI job to upload: into the directory $WTRACE_REPORT_DIR
// names, as TEST.html (the test's name, '/' as '_'), or else beside the
// run, as B.diff.html; the failure names the file.
//
// It is for tests only: it imports package testing.
package difftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/report"
)

// ReportDirEnv names the environment variable of the directory where Same
// writes the HTML report of sessions that differ.
const ReportDirEnv = "WTRACE_REPORT_DIR"

// Same compares session b with session a (diff.Sessions) and fails t
// with the report, as `wtrace diff` prints it, if they differ (in the
// categories of the verdict: Report.Same), after writing the HTML page of
// the report (see the package doc); it fails t at once if they cannot be
// compared. It returns the report.
func Same(t testing.TB, a, b string, opts diff.Options) *diff.Report {
	t.Helper()
	rep, err := diff.Sessions(a, b, opts)
	if err != nil {
		t.Fatalf("difftest: %v", err)
	}
	if !rep.Same {
		var s strings.Builder
		rep.WriteText(&s, diff.TextOptions{})
		if path, err := writeReport(t, rep, b); err != nil {
			s.WriteString("\n(the HTML report could not be written: " + err.Error() + ")\n")
		} else {
			s.WriteString("\nthe report to look at: " + path + "\n")
		}
		t.Errorf("difftest: the sessions differ:\n%s", s.String())
	}
	return rep
}

// writeReport writes the page of rep where Same says, and returns its
// path.
func writeReport(t testing.TB, rep *diff.Report, b string) (string, error) {
	path := strings.TrimSuffix(b, ".wt") + ".diff.html"
	if dir := os.Getenv(ReportDirEnv); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		name := strings.NewReplacer("/", "_", "\\", "_", ":", "_", " ", "_").Replace(t.Name())
		path = filepath.Join(dir, name+".html")
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := report.DiffFiles(f, rep, report.Options{Title: t.Name() + ": " + filepath.Base(rep.A) + " ↔ " + filepath.Base(rep.B)}); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
