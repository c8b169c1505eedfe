package formats

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestFileCounterWriteback: writing a file, the counter starts the
// writeback of each writebackEvery bytes once written, and the file holds
// exactly what was written.
func TestFileCounterWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out.wt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &fileCounter{w: f, file: f}
	piece := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for i := range 9 {
		if _, err := c.Write(piece); err != nil {
			t.Fatal(err)
		}
		if want := int64(i+1) * int64(len(piece)) / writebackEvery * writebackEvery; c.writeback != want {
			t.Fatalf("after %d MiB: writeback started for %d bytes; want %d", i+1, c.writeback, want)
		}
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != c.n || c.n != 9<<20 {
		t.Fatalf("file holds %v bytes (%v), counted %d; want %d", fi.Size(), err, c.n, 9<<20)
	}
}
