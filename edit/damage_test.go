package edit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestDamageNumbering: slice and merge name a damaged block as every
// other reader of the session does (formats.File: its place among the
// data blocks), also behind a session dictionary's block — whose own
// number the file's headers count, and which a stream reader counted.
func TestDamageNumbering(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wt")
	w := formats.WriterOptions{BlockSize: 16 << 10, DictSize: 16 << 10}
	if _, err := wttest.RecordPcapBlocks(corpusPcaps(t)["multi-watch"], in, capture.Options{}, w); err != nil {
		t.Fatal(err)
	}
	f, err := formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks := f.Index().Blocks
	f.Close()
	// A block behind the first dictionary block: a gap between two data
	// blocks holds it.
	victim := -1
	for i := 1; i < len(blocks) && victim < 0; i++ {
		if blocks[i-1].Offset+blocks[i-1].Size < blocks[i].Offset {
			victim = i + 1
		}
	}
	if victim < 0 || victim >= len(blocks) {
		t.Fatalf("no block after a dictionary block among %d blocks", len(blocks))
	}
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	off := blocks[victim].Offset + blocks[victim].Size - 8
	b[off] ^= 0xff // its payload: checksum mismatch
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}

	f, err = formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.Verify()
	f.Close()
	if err != nil || len(v.Damage) != 1 || v.Damage[0].Block != victim {
		t.Fatalf("Verify: damage %v, %v; want block %d", v.Damage, err, victim)
	}
	blockOf := func(what string, damage []error) {
		t.Helper()
		var de *formats.DamageError
		if len(damage) != 1 || !errors.As(damage[0], &de) || de.Block != victim {
			t.Errorf("%s: damage %v; want block %d, as verify and events say", what, damage, victim)
		}
	}
	sres, err := Slice(context.Background(), in, SliceOptions{Output: formats.FileSinkOptions{Path: filepath.Join(dir, "slice.wt")}})
	if err != nil {
		t.Fatal(err)
	}
	blockOf("Slice", sres.Damage)
	mres, err := Merge(context.Background(), []string{in}, MergeOptions{Output: formats.FileSinkOptions{Path: filepath.Join(dir, "merge.wt")}})
	if err != nil {
		t.Fatal(err)
	}
	blockOf("Merge", mres.Damage)

	// Cut inside that block: no index, which opening rebuilds; the cut is
	// named by its place among the data blocks too.
	if err := os.WriteFile(in, b[:blocks[victim].Offset+10], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err = f.Verify()
	f.Close()
	if err != nil || len(v.Damage) != 1 || v.Damage[0].Block != victim {
		t.Fatalf("Verify of the cut file: damage %v, %v; want block %d", v.Damage, err, victim)
	}
	sres, err = Slice(context.Background(), in, SliceOptions{Output: formats.FileSinkOptions{Path: filepath.Join(dir, "slice2.wt")}})
	if err != nil {
		t.Fatal(err)
	}
	blockOf("Slice of the cut file", sres.Damage)
}
