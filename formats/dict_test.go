package formats

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// dictFile writes a session whose later blocks use a small session
// dictionary (codec 2).
func dictFile(t testing.TB, noClose bool) (data []byte, want []Record) {
	recs := session(40, 300, 100*time.Millisecond)
	data = encode(t, recs, WriterOptions{BlockSize: 1200, DictSize: 3000, DictCopyEvery: 5000}, noClose)
	for _, r := range recs {
		want = append(want, normalize(r))
	}
	return data, want
}

// codecs counts the data blocks of data by codec.
func codecs(t testing.TB, data []byte) map[uint8]int {
	n := map[uint8]int{}
	for _, b := range rawBlocks(t, data) {
		if isData(b.hdr.typ) {
			n[b.hdr.codec]++
		}
	}
	return n
}

// TestSessionDict: blocks after the first DictSize bytes of records are
// compressed with them as a dictionary (codec 2, a 56-byte header naming
// it) and read back the same by every path: Reader, File (whose Scanners
// take the dictionary from the first blocks when they read a later block
// first), Recover; the background writer writes Inline's bytes.
func TestSessionDict(t *testing.T) {
	data, want := dictFile(t, false)
	c := codecs(t, data)
	if c[codecZstdDict] < 5 || c[codecZstd] == 0 {
		t.Fatalf("data blocks by codec %v; want several of codec 2 after some of codec 1", c)
	}
	for _, b := range rawBlocks(t, data) {
		if b.hdr.codec == codecZstdDict && (b.hdr.hdrLen != dictHeaderSize || b.hdr.dictLen != 3000) {
			t.Errorf("codec 2 block %d: header of %d bytes naming a dictionary of %d; want %d and 3000", b.hdr.seq, b.hdr.hdrLen, b.hdr.dictLen, dictHeaderSize)
		}
	}
	got, damage, err := readStream(t, data, ReaderOptions{})
	if err != nil || len(damage) > 0 || !sameRecords(got, want) {
		t.Fatalf("Reader: %v, %v\n%s", err, damage, diffRecords(got, want))
	}
	f := open(t, data)
	if !f.Clean() {
		t.Errorf("Clean() = false: %v", f.Problems())
	}
	// The last exchange first: its blocks use the dictionary, which the
	// File has not read yet.
	xs := f.Index().Exchanges
	last := xs[len(xs)-1].Request.Exchange
	got, damage, err = drain(t, f.ExchangeRecords(last))
	if err != nil || len(damage) > 0 || len(got) == 0 {
		t.Errorf("ExchangeRecords(%d): %d records, %v, %v", last, len(got), err, damage)
	}
	got, damage, err = drain(t, f.Records())
	if err != nil || len(damage) > 0 || !sameRecords(got, want) {
		t.Errorf("File.Records: %v, %v\n%s", err, damage, diffRecords(got, want))
	}
	if bad, err := f.CheckBlocks(); err != nil || len(bad) > 0 {
		t.Errorf("CheckBlocks = %v, %v; want no damage", bad, err)
	}
	checkRecover(t, data, want, false)

	inline := encode(t, session(40, 300, 100*time.Millisecond), WriterOptions{BlockSize: 1200, DictSize: 3000, DictCopyEvery: 5000, Inline: true}, false)
	if !bytes.Equal(inline, data) {
		t.Errorf("Inline writer wrote %d bytes, background %d; want the same bytes", len(inline), len(data))
	}
	none := encode(t, session(40, 300, 100*time.Millisecond), WriterOptions{BlockSize: 1200, DictSize: -1}, false)
	if c := codecs(t, none); c[codecZstdDict] > 0 {
		t.Errorf("DictSize -1: data blocks by codec %v; want none of codec 2", c)
	}
}

// TestSessionDictCut: a killed writer's file, cut anywhere, reads up to its
// last complete block, dictionary blocks included, by every path.
func TestSessionDictCut(t *testing.T) {
	data, want := dictFile(t, true)
	blocks, _ := blockSpans(t, data)
	for n := fileHeaderSize; n <= len(data); n += 1 + n%17 {
		complete := 0
		for _, b := range blocks {
			if b.Offset+b.Size <= int64(n) {
				complete += b.Records
			}
		}
		got, _, err := readStream(t, data[:n], ReaderOptions{})
		if err != nil || !sameRecords(got, want[:complete]) {
			t.Fatalf("cut at %d: Reader: %d records, %v; want %d", n, len(got), err, complete)
		}
		f, err := OpenReaderAt(bytes.NewReader(data[:n]), int64(n), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err = drain(t, f.Records())
		if err != nil || !sameRecords(got, want[:complete]) {
			t.Fatalf("cut at %d: File.Records: %d records, %v; want %d", n, len(got), err, complete)
		}
	}
}

// dictLayout describes a dictFile: every block in file order (data,
// dictionary and index blocks), the data blocks the dictionary is taken
// from (before the first dictionary block), and the dictionary blocks.
type dictLayout struct {
	all    []block
	first  []int // positions in all of the dictionary's data blocks
	copies []int // positions in all of the dictionary blocks
	data   []int // positions in all of the data blocks, in order
}

func layout(t testing.TB, data []byte) dictLayout {
	var l dictLayout
	l.all = rawBlocks(t, data)
	for i, b := range l.all {
		switch b.hdr.typ {
		case blockDict:
			l.copies = append(l.copies, i)
		case blockData, blockDelta:
			if len(l.copies) == 0 {
				l.first = append(l.first, i)
			}
			l.data = append(l.data, i)
		}
	}
	if len(l.first) < 2 || len(l.copies) < 2 {
		t.Fatalf("dictionary from %d blocks, %d copies; want at least 2 of each", len(l.first), len(l.copies))
	}
	return l
}

// keep returns the records of want outside the data blocks lost (by
// position in all).
func (l dictLayout) keep(want []Record, lost func(i int) bool) []Record {
	var out []Record
	n := 0
	for _, i := range l.data {
		r := l.all[i].hdr.records
		if !lost(i) {
			out = append(out, want[n:n+r]...)
		}
		n += r
	}
	return out
}

// TestSessionDictDamage: the dictionary is in the first blocks and in
// dictionary blocks (one right after them, more later), so damage to any
// one of them — a flipped bit, a zeroed range, bytes cut out — costs only
// that block's records, by every path (Reader, File, Recover); damage to
// the first blocks and the first copy together costs a streaming Reader
// the codec 2 blocks before the next copy and File and Recover nothing
// more (they find the later copy). A codec 2 block never decodes with a
// wrong dictionary.
func TestSessionDictDamage(t *testing.T) {
	data, want := dictFile(t, false)
	l := layout(t, data)
	if l.all[l.copies[0]].off != l.all[l.first[len(l.first)-1]].off+l.all[l.first[len(l.first)-1]].hdr.size() {
		t.Errorf("first dictionary block at %d; want it right after the block that completes the dictionary", l.all[l.copies[0]].off)
	}
	span := func(i int) (int64, int64) { b := l.all[i]; return b.off, b.off + b.hdr.size() }
	// Each kind damages the blocks at positions targets (a contiguous run).
	kinds := map[string]func(d []byte, targets []int) []byte{
		"flip": func(d []byte, targets []int) []byte {
			for _, i := range targets {
				_, to := span(i)
				d[to-5] ^= 0x10 // the payload's end
			}
			return d
		},
		"zero": func(d []byte, targets []int) []byte {
			from, _ := span(targets[0])
			_, to := span(targets[len(targets)-1])
			clear(d[from:to])
			return d
		},
		"cut": func(d []byte, targets []int) []byte {
			from, _ := span(targets[0])
			_, to := span(targets[len(targets)-1])
			return append(d[:from+10], d[to-10:]...)
		},
	}
	secondCopy := l.all[l.copies[1]].off
	cases := []struct {
		name    string
		targets []int // positions in all; a contiguous run
		// streamLost: codec 2 blocks before the second copy are lost to a
		// streaming Reader too.
		streamLost bool
	}{}
	for _, i := range l.first {
		cases = append(cases, struct {
			name       string
			targets    []int
			streamLost bool
		}{fmt.Sprintf("block %d", i), []int{i}, false})
	}
	cases = append(cases,
		struct {
			name       string
			targets    []int
			streamLost bool
		}{"first copy", []int{l.copies[0]}, false},
		struct {
			name       string
			targets    []int
			streamLost bool
		}{"second copy", []int{l.copies[1]}, false},
		struct {
			name       string
			targets    []int
			streamLost bool
		}{"last first block and first copy", []int{l.first[len(l.first)-1], l.copies[0]}, true},
		struct {
			name       string
			targets    []int
			streamLost bool
		}{"every first block and first copy", append(slices.Clone(l.first), l.copies[0]), true},
	)
	// Every source but the copy Close wrote: flipped bits only (the
	// targets are not contiguous).
	if last := l.copies[len(l.copies)-1]; l.all[last+1].hdr.typ != blockIndex {
		t.Fatalf("last dictionary block is block %d, not the one before the index", last)
	}
	allButLast := append(slices.Clone(l.first), l.copies[:len(l.copies)-1]...)
	{
		t.Run("every source but the last copy/flip", func(t *testing.T) {
			d := kinds["flip"](bytes.Clone(data), allButLast)
			wantAll := l.keep(want, func(i int) bool { return slices.Contains(allButLast, i) })
			got, damage, err := drain(t, open(t, d).Records())
			if err != nil || !sameRecords(got, wantAll) {
				t.Errorf("File.Records: %d records, %v, %v; want %d", len(got), err, damage, len(wantAll))
			}
			checkRecover(t, d, wantAll, true)
		})
	}
	for _, c := range cases {
		for kind, fn := range kinds {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				d := fn(bytes.Clone(data), c.targets)
				hit := func(i int) bool { return slices.Contains(c.targets, i) }
				wantAll := l.keep(want, hit)
				wantStream := wantAll
				if c.streamLost {
					wantStream = l.keep(want, func(i int) bool {
						return hit(i) || l.all[i].hdr.codec == codecZstdDict && l.all[i].off < secondCopy
					})
				}
				got, damage, err := readStream(t, d, ReaderOptions{})
				if err != nil || !sameRecords(got, wantStream) || len(damage) == 0 {
					t.Errorf("Reader: %d records, %v, %v; want %d and damage", len(got), err, damage, len(wantStream))
				}
				if !c.streamLost {
					for _, dm := range damage {
						if errors.Is(dm, errNoDict) {
							t.Errorf("Reader: %v; want no block without its dictionary", dm)
						}
					}
				}
				f := open(t, d)
				got, damage, err = drain(t, f.Records())
				if err != nil || !sameRecords(got, wantAll) {
					t.Errorf("File.Records: %d records, %v, %v; want %d", len(got), err, damage, len(wantAll))
				}
				if len(got) != len(want) { // a data block was hit: it is named
					if len(damage)+len(f.Problems()) == 0 {
						t.Errorf("File: %d of %d records and no damage reported", len(got), len(want))
					}
				}
				for _, dm := range damage {
					if errors.Is(dm, errNoDict) {
						t.Errorf("File.Records: %v; want no block without its dictionary", dm)
					}
				}
				// The last exchange alone (random access, first reading a
				// codec 2 block).
				xs := f.Index().Exchanges
				last := xs[len(xs)-1].Request.Exchange
				_, damage, err = drain(t, f.ExchangeRecords(last))
				for _, dm := range damage {
					if err != nil || errors.Is(dm, errNoDict) {
						t.Errorf("ExchangeRecords(%d): %v, %v; want no block without its dictionary", last, err, dm)
					}
				}
				checkRecover(t, d, wantAll, true)
			})
		}
	}

	// A codec 2 block naming a dictionary the file does not hold.
	d := bytes.Clone(data)
	b := l.all[l.data[len(l.data)-3]]
	if b.hdr.codec != codecZstdDict {
		t.Fatalf("block at %d has codec %d; want 2", b.off, b.hdr.codec)
	}
	h := b.hdr
	h.dictCRC ^= 1
	h.put(d[b.off:])
	got, damage, err := readStream(t, d, ReaderOptions{})
	if err != nil || len(damage) != 1 || !errors.Is(damage[0], errNoDict) || len(got) != len(want)-h.records {
		t.Errorf("wrong dictionary CRC: %d records, %v, %v; want %d and one block damaged", len(got), err, damage, len(want)-h.records)
	}
	got, damage, err = drain(t, open(t, d).Records())
	if err != nil || len(damage) != 1 || !errors.Is(damage[0], errNoDict) || len(got) != len(want)-h.records {
		t.Errorf("File, wrong dictionary CRC: %d records, %v, %v; want %d and one block damaged", len(got), err, damage, len(want)-h.records)
	}
}
