package formats

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// dictFile writes a session whose later blocks use a small session
// dictionary (codec 2).
func dictFile(t testing.TB, noClose bool) (data []byte, want []Record) {
	recs := session(40, 300, 100*time.Millisecond)
	data = encode(t, recs, WriterOptions{BlockSize: 1200, DictSize: 3000}, noClose)
	for _, r := range recs {
		want = append(want, normalize(r))
	}
	return data, want
}

// codecs counts the data blocks of data by codec.
func codecs(t testing.TB, data []byte) map[uint8]int {
	n := map[uint8]int{}
	for _, b := range rawBlocks(t, data) {
		if b.hdr.typ == blockData {
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

	inline := encode(t, session(40, 300, 100*time.Millisecond), WriterOptions{BlockSize: 1200, DictSize: 3000, Inline: true}, false)
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

// TestSessionDictDamage: a damaged block among those the dictionary is
// taken from makes the blocks that use it damage (named, never misread),
// by every path; the other blocks read, and Recover copies them.
func TestSessionDictDamage(t *testing.T) {
	data, want := dictFile(t, false)
	blocks, _ := blockSpans(t, data)
	raw := rawBlocks(t, data)
	firstDict := -1
	for i, b := range raw {
		if b.hdr.codec == codecZstdDict {
			firstDict = i
			break
		}
	}
	d := bytes.Clone(data)
	d[blocks[0].Offset+blockHeaderSize+3] ^= 0x10 // block 0's payload
	// What survives: the blocks before the first that uses the
	// dictionary, but block 0.
	wantRecs := without(want, blocks, 0, firstDict)
	check := func(what string, got []Record, damage []*DamageError, err error) {
		t.Helper()
		if err != nil || !sameRecords(got, wantRecs) {
			t.Errorf("%s: %d records, %v; want %d", what, len(got), err, len(wantRecs))
		}
		noDict := 0
		for _, dm := range damage {
			if errors.Is(dm, errNoDict) {
				noDict++
			}
		}
		if want := len(blocks) - firstDict; noDict != want {
			t.Errorf("%s: %d blocks damaged for want of the dictionary (%v); want %d", what, noDict, damage, want)
		}
	}
	got, damage, err := readStream(t, d, ReaderOptions{})
	check("Reader", got, damage, err)
	f := open(t, d)
	got, damage, err = drain(t, f.Records())
	check("File.Records", got, damage, err)

	checkRecover(t, d, wantRecs, true)

	// A codec 2 block naming a dictionary the file does not hold.
	d = bytes.Clone(data)
	off := blocks[firstDict].Offset
	h, err := parseHeader(d[off : off+dictHeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	h.dictCRC ^= 1
	h.put(d[off:])
	got, damage, err = readStream(t, d, ReaderOptions{})
	if err != nil || len(damage) != 1 || !errors.Is(damage[0], errNoDict) || len(got) != len(want)-blocks[firstDict].Records {
		t.Errorf("wrong dictionary CRC: %d records, %v, %v; want %d and one block damaged", len(got), err, damage, len(want)-blocks[firstDict].Records)
	}
}
