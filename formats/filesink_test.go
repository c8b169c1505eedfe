package formats

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// writeSession writes a small closed session to path, returning its bytes.
func writeSession(t *testing.T, path, tool string) []byte {
	t.Helper()
	fs, err := NewFileSink(FileSinkOptions{Path: path, Meta: Meta{Tool: tool}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Write(&Conn{ID: 1, Time: 1e9, Client: "127.0.0.1:1", Server: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(Ending{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFileSinkInputs: a FileSink whose file would be one of its inputs —
// by path, written another way, through a symbolic or hard link — is
// refused before anything is written, with ErrOutputIsInput, and the
// input is untouched. A rotated part is checked too.
func TestFileSinkInputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wt")
	want := writeSession(t, in, "input")
	sym := filepath.Join(dir, "sym.wt")
	if err := os.Symlink("in.wt", sym); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.wt")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, out, input string
	}{
		{"same path", in, in},
		{"dot", filepath.Join(dir, ".", "in.wt"), in},
		{"dot dot", filepath.Join(dir, "x", "..", "in.wt"), in},
		{"symlink", sym, in},
		{"hard link", hard, in},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "dot dot" {
				os.MkdirAll(filepath.Join(dir, "x"), 0o755)
			}
			_, err := NewFileSink(FileSinkOptions{Path: tc.out, Inputs: []string{tc.input}})
			var oe *OutputError
			if !errors.Is(err, ErrOutputIsInput) || !errors.As(err, &oe) || oe.Created {
				t.Fatalf("NewFileSink(%q, inputs %q) = %v; want an *OutputError wrapping ErrOutputIsInput", tc.out, tc.input, err)
			}
			if got, _ := os.ReadFile(in); !bytes.Equal(got, want) {
				t.Fatalf("the input changed")
			}
		})
	}
	t.Run("rotated part", func(t *testing.T) {
		base := filepath.Join(dir, "r.wt")
		part2 := PartName(base, 2)
		want := writeSession(t, part2, "input")
		fs, err := NewFileSink(FileSinkOptions{Path: base, Rotate: true, MaxSize: 1, Inputs: []string{part2}})
		if err != nil {
			t.Fatal(err)
		}
		fs.Write(&Conn{ID: 1, Time: 1e9})
		fs.Flush()
		err = fs.Write(&Conn{ID: 2, Time: 2e9}) // rotates
		if !errors.Is(err, ErrOutputIsInput) {
			t.Fatalf("rotating onto an input: %v; want ErrOutputIsInput", err)
		}
		fs.Close(Ending{})
		if got, _ := os.ReadFile(part2); !bytes.Equal(got, want) {
			t.Fatalf("the input part changed")
		}
	})
}

// TestFileSinkReplaces: the session file is written beside its path and
// renamed into place by Close; until then (and after Abort) the path keeps
// what it held. A Flush (a live recording) puts it in place at once.
func TestFileSinkReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.wt")
	old := writeSession(t, path, "old")

	fs, err := NewFileSink(FileSinkOptions{Path: path, Meta: Meta{Tool: "new"}})
	if err != nil {
		t.Fatal(err)
	}
	fs.Write(&Conn{ID: 7, Time: 1e9})
	if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
		t.Fatal("the path changed before Close")
	}
	if err := fs.Close(Ending{}); err != nil {
		t.Fatal(err)
	}
	if tool := toolOf(t, path); tool != "new" {
		t.Fatalf("after Close the path holds the session of %q; want the new one", tool)
	}
	left(t, dir, 1)

	fs, err = NewFileSink(FileSinkOptions{Path: path, Meta: Meta{Tool: "failed"}})
	if err != nil {
		t.Fatal(err)
	}
	fs.Write(&Conn{ID: 8, Time: 1e9})
	fs.Abort()
	if tool := toolOf(t, path); tool != "new" {
		t.Fatalf("after Abort the path holds the session of %q; want the one before", tool)
	}
	left(t, dir, 1)

	fs, err = NewFileSink(FileSinkOptions{Path: path, Meta: Meta{Tool: "live"}})
	if err != nil {
		t.Fatal(err)
	}
	fs.Write(&Conn{ID: 9, Time: 1e9})
	if err := fs.Flush(); err != nil {
		t.Fatal(err)
	}
	if tool := toolOf(t, path); tool != "live" {
		t.Fatalf("after Flush the path holds the session of %q; want the live one, in place", tool)
	}
	fs.Abort() // a live recording that failed keeps what it flushed
	if tool := toolOf(t, path); tool != "live" {
		t.Fatalf("after Flush and Abort the path holds the session of %q; want the live one", tool)
	}
	left(t, dir, 1)
}

func toolOf(t *testing.T, path string) string {
	t.Helper()
	f, err := Open(path, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Index().Meta == nil {
		return ""
	}
	return f.Index().Meta.Tool
}

// left fails unless dir holds n files (no temporary file is left behind).
func left(t *testing.T, dir string, n int) {
	t.Helper()
	es, _ := os.ReadDir(dir)
	if len(es) != n {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %v; want %d file(s)", dir, names, n)
	}
}
