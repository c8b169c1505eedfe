// Package replaytest starts replay servers for tests, the way
// net/http/httptest starts HTTP servers: one call, closed when the test
// ends. It is a package of its own so that package testing stays out of
// programs that only serve sessions (the wtrace binary among them).
package replaytest

import (
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/record"
)

// NewServer opens the session at path and starts serving it over HTTP on
// 127.0.0.1 (or opts.Listen), a free port; srv.URL is its address. The
// server is closed when the test ends (Close returns once every handler has
// exited). Any error fails the test.
//
//	srv := replaytest.NewServer(t, "testdata/incident-42.wt", replay.Options{Speed: 0})
//	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
func NewServer(t testing.TB, path string, opts replay.Options) *replay.Server {
	t.Helper()
	s, err := replay.Open(path, opts)
	if err != nil {
		t.Fatalf("replaytest.NewServer(%q): %v", path, err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("replaytest.NewServer(%q): %v", path, err)
	}
	t.Cleanup(s.Close)
	return s
}

// Record starts recording a replay's run into a session file at path (see
// package replay/record): give it as Options.Out. The file is closed when
// the test ends. To read it within the test, close the Recorder: it
// closes the server first (the order of the two Close calls does not
// matter).
//
//	rec := replaytest.Record(t, filepath.Join(t.TempDir(), "run.wt"))
//	srv := replaytest.NewServer(t, "testdata/incident-42.wt", replay.Options{Out: rec})
//	… the controller under test …
//	rec.Close()
func Record(t testing.TB, path string) *record.Recorder {
	t.Helper()
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: path}, Tool: "wtrace replaytest"})
	if err != nil {
		t.Fatalf("replaytest.Record(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if _, err := rec.Close(); err != nil {
			t.Errorf("replaytest.Record(%q): %v", path, err)
		}
	})
	return rec
}
