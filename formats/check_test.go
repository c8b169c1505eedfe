package formats

import (
	"bytes"
	"errors"
	"testing"
)

// TestCheckBlocks: a clean index hides a damaged block from Open;
// CheckBlocks finds it, whatever byte of it is damaged.
func TestCheckBlocks(t *testing.T) {
	data, _, blocks, _ := smallFile(t)
	if d, err := open(t, data).CheckBlocks(); err != nil || len(d) != 0 {
		t.Fatalf("CheckBlocks(intact file) = %v, %v; want nothing", d, err)
	}
	for k, b := range blocks {
		for _, at := range []int64{0, 8, 20, blockHeaderSize - 1, blockHeaderSize, b.Size / 2, b.Size - 1} {
			d := bytes.Clone(data)
			d[b.Offset+at] ^= 0x20
			f := open(t, d)
			if !f.Clean() {
				t.Fatalf("block %d byte %d flipped: the index no longer reads", k, at)
			}
			damage, err := f.CheckBlocks()
			if err != nil || len(damage) != 1 || damage[0].Block != k || damage[0].Offset != b.Offset ||
				!errors.Is(damage[0], errChecksum) && !errors.Is(damage[0], errCorrupt) && !errors.Is(damage[0], errMagic) {
				t.Errorf("block %d byte %d flipped: CheckBlocks = %v, %v; want block %d damaged", k, at, damage, err, k)
			}
		}
	}
}
