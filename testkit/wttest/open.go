package wttest

import (
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// OpenSession opens the session file at path (formats.Open, default
// options), closed when the test ends; an error fails t.
func OpenSession(t testing.TB, path string) *formats.File {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatalf("formats.Open(%q): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
