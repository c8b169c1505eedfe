package formats

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// repeat returns data with its bytes [a, b) written a second time right
// after b: a byte range copied twice, as a bad copy or a buggy
// concatenation leaves it.
func repeat(data []byte, a, b int) []byte {
	out := append(bytes.Clone(data[:b]), data[a:b]...)
	return append(out, data[b:]...)
}

// TestRepeatedRange repeats every byte range of a small file (on a grid of
// offsets) and checks what the readers and Recover make of it: every
// record once, in order — the records of one block lost only when the
// range lies inside that block (its only header is before the range, its
// payload now holds the range twice) — and each repeated block reported.
func TestRepeatedRange(t *testing.T) {
	data, want, blocks, indexOff := smallFile(t)
	step := 41
	if raceEnabled {
		step = 97
	}
	cases := 0
	for a := fileHeaderSize; a < len(data); a += step {
		for b := a + 1; b <= len(data); b += step {
			cases++
			d := repeat(data, a, b)
			lost := -1
			for k, blk := range blocks {
				if blk.Offset < int64(a) && int64(b) < blk.Offset+blk.Size {
					lost = k
				}
			}
			wantRecs := without(want, blocks, lost, -1)
			name := fmt.Sprintf("bytes [%d,%d) repeated", a, b)

			got, damage, err := readStream(t, d, ReaderOptions{})
			if err != nil || !sameRecords(got, wantRecs) {
				t.Fatalf("%s: Reader: %d records, %v (damage %v); want %d records\n%s", name, len(got), err, damage, len(wantRecs), diffRecords(got, wantRecs))
			}
			f, err := OpenReaderAt(bytes.NewReader(d), int64(len(d)), ReaderOptions{})
			if err != nil {
				t.Fatalf("%s: OpenReaderAt: %v", name, err)
			}
			got, _, err = drain(t, f.Records())
			if err != nil || !sameRecords(got, wantRecs) {
				t.Fatalf("%s: File.Records: %d records, %v; want %d records", name, len(got), err, len(wantRecs))
			}
			// A block repeated whole before the index block is reported.
			for k, blk := range blocks {
				if int64(a) <= blk.Offset && blk.Offset+blk.Size <= int64(b) && int64(b) <= indexOff {
					if !slices.ContainsFunc(damage, func(e *DamageError) bool { return e.Block == k && errors.Is(e, errRepeated) }) {
						t.Fatalf("%s: block %d repeated, not reported: %v", name, k, damage)
					}
				}
			}
			if cases%5 == 0 || lost >= 0 {
				checkRecover(t, d, wantRecs, true)
			}
		}
	}
	t.Logf("%d ranges", cases)
}

// TestBlockOrder removes whole blocks (no damage left behind) and swaps
// two: the readers say which blocks are missing and which came out of
// order, at the offset of the block that revealed it, and read the rest.
func TestBlockOrder(t *testing.T) {
	data, want, blocks, _ := smallFile(t)
	end := func(k int) int64 { return blocks[k].Offset + blocks[k].Size }

	t.Run("missing", func(t *testing.T) {
		d := append(bytes.Clone(data[:blocks[2].Offset]), data[end(3):]...)
		wantRecs := append(without(want, blocks, -1, 2), without(want, blocks, -1, -1)[len(without(want, blocks, -1, 4)):]...)
		got, damage, err := readStream(t, d, ReaderOptions{})
		if err != nil || !sameRecords(got, wantRecs) {
			t.Errorf("Reader: %d records, %v; want %d", len(got), err, len(wantRecs))
		}
		if len(damage) != 1 || damage[0].Block != 2 || damage[0].Offset != blocks[2].Offset || !errors.Is(damage[0], errMissing) {
			t.Errorf("Reader damage = %v; want blocks 2 to 3 missing at offset %d", damage, blocks[2].Offset)
		} else {
			t.Logf("damage: %v", damage[0])
		}
		f := open(t, d)
		got, fdamage, err := drain(t, f.Records())
		if err != nil || !sameRecords(got, wantRecs) || len(fdamage) != 1 || !errors.Is(fdamage[0], errMissing) {
			t.Errorf("File.Records: %d records, %v, %v; want %d and the missing blocks", len(got), err, fdamage, len(wantRecs))
		}
		var out bytes.Buffer
		problems, err := Recover(bytes.NewReader(d), int64(len(d)), &out)
		if err != nil || !slices.ContainsFunc(problems, func(e error) bool { return errors.Is(e, errMissing) }) {
			t.Errorf("Recover = %v, %v; want the missing blocks among the problems", problems, err)
		}
		checkRecover(t, d, wantRecs, true)
	})

	t.Run("missing at the end", func(t *testing.T) {
		last := len(blocks) - 1
		d := append(bytes.Clone(data[:blocks[last].Offset]), data[end(last):]...) // the index block follows
		_, damage, err := readStream(t, d, ReaderOptions{})
		if err != nil || len(damage) != 1 || damage[0].Block != last || !errors.Is(damage[0], errMissing) {
			t.Errorf("Reader: %v, damage %v; want block %d missing", err, damage, last)
		}
	})

	t.Run("swapped", func(t *testing.T) {
		d := bytes.Clone(data[:blocks[2].Offset])
		d = append(d, data[blocks[3].Offset:end(3)]...)
		d = append(d, data[blocks[2].Offset:end(2)]...)
		d = append(d, data[end(3):]...)
		got, damage, err := readStream(t, d, ReaderOptions{})
		if err != nil || len(got) != len(want) {
			t.Errorf("Reader: %d records, %v; want all %d", len(got), err, len(want))
		}
		// Block 3 first: block 2 is missing; then block 2 after block 3.
		if len(damage) != 2 || !errors.Is(damage[0], errMissing) || damage[0].Block != 2 ||
			!errors.Is(damage[1], errOrder) || damage[1].Block != 2 {
			t.Errorf("Reader damage = %v; want block 2 missing, then block 2 out of order", damage)
		}
		r, err := NewReader(bytes.NewReader(d), ReaderOptions{StopOnDamage: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; err == nil; n++ {
			_, err = r.Next()
		}
		if !errors.Is(err, errMissing) || n-1 != len(without(want, blocks, -1, 2)) {
			t.Errorf("Reader with StopOnDamage: %v after %d records; want blocks missing after %d", err, n-1, len(without(want, blocks, -1, 2)))
		}
	})
}

// TestFileMagic flips every bit of the file magic, and replaces the whole
// file header: the blocks are sound, so the file is read whole, with the
// damage at offset 0 reported, and Recover writes a clean copy.
func TestFileMagic(t *testing.T) {
	data, want, _, _ := smallFile(t)
	check := func(name string, d []byte) {
		t.Helper()
		got, damage, err := readStream(t, d, ReaderOptions{})
		if err != nil || !sameRecords(got, want) || len(damage) != 1 || damage[0].Offset != 0 || damage[0].Block != -1 {
			t.Errorf("%s: Reader: %d records, %v, damage %v; want %d records and the header damaged", name, len(got), err, damage, len(want))
		}
		f, err := OpenReaderAt(bytes.NewReader(d), int64(len(d)), ReaderOptions{})
		if err != nil {
			t.Fatalf("%s: OpenReaderAt: %v", name, err)
		}
		if f.Clean() || len(f.Problems()) != 1 {
			t.Errorf("%s: Clean() = %v, Problems() = %v; want the header's damage", name, f.Clean(), f.Problems())
		}
		if got, _, err := drain(t, f.Records()); err != nil || !sameRecords(got, want) {
			t.Errorf("%s: File.Records: %d records, %v; want %d", name, len(got), err, len(want))
		}
		checkRecover(t, d, want, true)
	}
	for i := range len(fileMagic) {
		for bit := range 8 {
			d := bytes.Clone(data)
			d[i] ^= 1 << bit
			check(fmt.Sprintf("flip %d.%d", i, bit), d)
		}
	}
	zero := bytes.Clone(data)
	clear(zero[:fileHeaderSize])
	check("header zeroed", zero)
	one := bytes.Clone(data)
	one[0] ^= 0xff
	one[9] ^= 1 // the version too: the header's crc cannot vouch for it
	check("magic and version damaged", one)

	// Not a session: no sound block after the header.
	junk := bytes.Clone(data)
	junk[0] ^= 1
	junk[10] ^= 1 // the header's crc cannot vouch for the magic
	clear(junk[fileHeaderSize : fileHeaderSize+8])
	if _, err := NewReader(bytes.NewReader(junk), ReaderOptions{}); !errors.Is(err, ErrNotSession) {
		t.Errorf("NewReader(damaged magic, no block) = %v; want ErrNotSession", err)
	}
	if _, err := OpenReaderAt(bytes.NewReader(junk), int64(len(junk)), ReaderOptions{}); !errors.Is(err, ErrNotSession) {
		t.Errorf("OpenReaderAt(damaged magic, no block) = %v; want ErrNotSession", err)
	}
}
