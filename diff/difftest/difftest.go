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
// It is for tests only: it imports package testing.
package difftest

import (
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
)

// Same compares session b with session a (diff.Sessions) and fails t
// with the report, as `wtrace diff` prints it, if they differ (in the
// categories of the verdict: Report.Same); it fails t at once if they
// cannot be compared. It returns the report.
func Same(t testing.TB, a, b string, opts diff.Options) *diff.Report {
	t.Helper()
	rep, err := diff.Sessions(a, b, opts)
	if err != nil {
		t.Fatalf("difftest: %v", err)
	}
	if !rep.Same {
		var s strings.Builder
		rep.WriteText(&s, diff.TextOptions{})
		t.Errorf("difftest: the sessions differ:\n%s", s.String())
	}
	return rep
}
