package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCheck: an output that is an input — the same path, written another
// way, a symbolic link, a hard link — is refused; another file, a file
// that does not exist yet and standard output are not.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wt")
	other := filepath.Join(dir, "other.wt")
	for _, p := range []string{in, other} {
		if err := os.WriteFile(p, []byte("session"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.wt")
	if err := os.Symlink(in, sym); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.wt")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	for _, tc := range []struct {
		name    string
		out     string
		ins     []string
		refused bool
	}{
		{"same path", in, []string{in}, true},
		{"dot", filepath.Join(dir, ".", "in.wt"), []string{in}, true},
		{"dot dot", "../in.wt", []string{in}, true},
		{"relative input", in, []string{"./../in.wt"}, true},
		{"symlink", sym, []string{in}, true},
		{"symlink input", in, []string{sym}, true},
		{"hard link", hard, []string{in}, true},
		{"second input", in, []string{other, in}, true},
		{"another file", other, []string{in}, false},
		{"new file", filepath.Join(dir, "new.wt"), []string{in}, false},
		{"stdout", "-", []string{in}, false},
		{"stdin input", in, []string{"-"}, false},
		{"missing input", in, []string{filepath.Join(dir, "missing.wt")}, false},
		{"two new outputs", filepath.Join(dir, "new.wt"), []string{"../new.wt"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.out, tc.ins...)
			if got := errors.Is(err, ErrInput); got != tc.refused {
				t.Fatalf("Check(%q, %q) = %v; want refused %v", tc.out, tc.ins, err, tc.refused)
			}
			var ie *InputError
			if tc.refused && (!errors.As(err, &ie) || ie.Out != tc.out) {
				t.Errorf("Check(%q, %q) = %#v; want an *InputError naming the output", tc.out, tc.ins, err)
			}
		})
	}
}

// TestCommit: nothing reaches the path before Commit; Commit replaces what
// it held; Abort leaves it untouched and no temporary file behind.
func TestCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.wt")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("before Commit the path holds %q; want the old content", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Commit the path holds %q; want %q", b, "new")
	}
	if err := f.Commit(); err != nil {
		t.Errorf("second Commit = %v", err)
	}

	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("partial")
	g.Abort()
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Abort the path holds %q; want %q", b, "new")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in %s: %v; want only out.wt", dir, entries)
	}
}

// TestPublish: Publish puts the file at its path while it is written; what
// is written after it lands there too, and Abort then keeps it.
func TestPublish(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live.wt")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("block1")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before Publish: Stat = %v; want not there", err)
	}
	if err := f.Publish(); err != nil {
		t.Fatal(err)
	}
	f.WriteString("block2")
	if b, _ := os.ReadFile(path); string(b) != "block1block2" {
		t.Fatalf("after Publish the path holds %q", b)
	}
	f.Abort()
	if b, _ := os.ReadFile(path); string(b) != "block1block2" {
		t.Fatalf("Abort after Publish: the path holds %q; want what was written", b)
	}
}

// TestCreateError names the path asked for, not the temporary name.
func TestCreateError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "out.wt")
	_, err := Create(path)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		t.Fatalf("Create(%q) = %v; want a *PathError naming it", path, err)
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	if err := WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Stat = %v, %v; want mode 0600", fi, err)
	}
}

// TestRemovePending: the temporary files of outputs still being written
// are removed; published ones stay.
func TestRemovePending(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(filepath.Join(dir, "a.wt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(filepath.Join(dir, "b.wt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(); err != nil {
		t.Fatal(err)
	}
	RemovePending()
	es, _ := os.ReadDir(dir)
	if len(es) != 1 || es[0].Name() != "b.wt" {
		t.Errorf("after RemovePending %s holds %v; want only the published b.wt", dir, es)
	}
	a.Abort()
	b.Commit()
}
