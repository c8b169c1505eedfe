package formats

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

const goldenFile = "testdata/golden-v1.wt"

// goldenRecords is what golden-v1.wt holds: every record type with every
// field, a small session, and an incompressible body (stored without
// compression).
func goldenRecords() []Record {
	recs := fullRecords()
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 3000)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	recs = append(recs, session(20, 200, 100*time.Millisecond)[1:]...)
	// Later than the block before by more than BlockInterval, larger than
	// BlockSize: a block of its own.
	return append(recs, &Body{Exchange: 5, Dir: ServerToClient, Time: t0 + int64(100*time.Second), Data: noise})
}

// goldenOptions wrote the golden file: the index records compressed block
// sizes, so the level is pinned to the one used then.
var goldenOptions = WriterOptions{BlockSize: 2500, Level: int(zstd.SpeedDefault)}

// goldenV2 is goldenRecords as format version 2 wrote them with a small
// session dictionary (goldenDictSize), so that most blocks use it (codec
// 2), and one dictionary block. Like golden-v1.wt it is a compatibility
// promise since version 3: never rewritten.
const goldenV2 = "testdata/golden-v2.wt"

const goldenDictSize = 2000

// goldenV3 is goldenRecords as format version 3 writes them, with the
// session dictionary of golden-v2.wt: data blocks of type 4, whose record
// times are differences. -update rewrites it, which only a change to
// version 3 before it ships may need.
const goldenV3 = "testdata/golden-v3.wt"

// TestGoldenV2 pins format version 2: the current reader reads the
// committed file exactly, by every path.
func TestGoldenV2(t *testing.T) {
	golden := readGolden(t, goldenV2)
	codecs := map[uint8]int{}
	copies := 0
	for _, b := range rawBlocks(t, golden) {
		codecs[b.hdr.codec]++
		if b.hdr.typ == blockDict {
			copies++
		}
		if b.hdr.typ == blockDelta {
			t.Errorf("block %d of %s is of type %d (version 3)", b.hdr.seq, goldenV2, b.hdr.typ)
		}
	}
	if codecs[codecNone] == 0 || codecs[codecZstd] == 0 || codecs[codecZstdDict] < 2 || copies != 1 {
		t.Errorf("golden file has blocks by codec %v and %d dictionary blocks; want codecs 0, 1 and several of 2, and one dictionary block", codecs, copies)
	}
}

// readGolden checks that the reader reads the golden file name as
// goldenRecords, by the Reader and by a File, and returns its bytes.
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	want := goldenRecords()
	for i, r := range want {
		want[i] = normalize(r)
	}
	golden, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	got, damage, err := readStream(t, golden, ReaderOptions{})
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("Reader on %s: %v, %v\n%s", name, err, damage, diffRecords(got, want))
	}
	f, err := Open(name, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Clean() {
		t.Errorf("%s: Clean() = false, Problems() = %v", name, f.Problems())
	}
	got, damage, err = drain(t, f.Records())
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("File.Records on %s: %v, %v\n%s", name, err, damage, diffRecords(got, want))
	}
	return golden
}

// TestGoldenV3 pins format version 3: the current reader reads the
// committed file exactly, by every path, and the current writer writes the
// same blocks (compared uncompressed).
func TestGoldenV3(t *testing.T) {
	opts := goldenOptions
	opts.DictSize = goldenDictSize
	if *update {
		if err := os.WriteFile(goldenV3, encode(t, goldenRecords(), opts, false), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden := readGolden(t, goldenV3)
	if v := binary.LittleEndian.Uint16(golden[8:]); v != 3 {
		t.Errorf("%s: version %d; want 3", goldenV3, v)
	}
	codecs := map[uint8]int{}
	goldenBlocks := rawBlocks(t, golden)
	copies := 0
	for _, b := range goldenBlocks {
		codecs[b.hdr.codec]++
		switch {
		case b.hdr.typ == blockData:
			t.Errorf("block %d is of type %d; version 3 writes data blocks of type %d", b.hdr.seq, blockData, blockDelta)
		case b.hdr.typ == blockDict:
			copies++
			if b.hdr.dictLen != goldenDictSize || !bytes.Equal(b.payload, firstRecords(goldenBlocks, goldenDictSize)) {
				t.Errorf("dictionary block %d: %d bytes; want the first %d bytes of records", b.hdr.seq, len(b.payload), goldenDictSize)
			}
		case b.hdr.codec == codecZstdDict && copies == 0:
			t.Errorf("codec 2 block %d before the first dictionary block", b.hdr.seq)
		}
	}
	if codecs[codecNone] == 0 || codecs[codecZstd] == 0 || codecs[codecZstdDict] < 2 || copies != 1 {
		t.Errorf("golden file has blocks by codec %v and %d dictionary blocks; want codecs 0, 1 and several of 2, and one dictionary block", codecs, copies)
	}
	curBlocks := rawBlocks(t, encode(t, goldenRecords(), opts, false))
	if len(curBlocks) != len(goldenBlocks) {
		t.Fatalf("writer writes %d blocks; golden file has %d", len(curBlocks), len(goldenBlocks))
	}
	for i := range curBlocks {
		g, c := goldenBlocks[i], curBlocks[i]
		g.hdr.clen, g.hdr.payloadCRC, c.hdr.clen, c.hdr.payloadCRC = 0, 0, 0, 0
		if g.hdr != c.hdr || !bytes.Equal(g.payload, c.payload) {
			t.Errorf("block %d: writer writes header %+v and %d payload bytes; golden %+v and %d bytes", i, c.hdr, len(c.payload), g.hdr, len(g.payload))
		}
	}
}

// firstRecords returns the first n bytes of the records of the data
// blocks of blocks.
func firstRecords(blocks []block, n int) []byte {
	var b []byte
	for _, blk := range blocks {
		if isData(blk.hdr.typ) {
			b = append(b, blk.payload...)
		}
	}
	return b[:min(n, len(b))]
}

// TestGolden pins format version 1: the current reader must read the
// committed file, written by an earlier writer, exactly. The file is a
// compatibility promise, like testdata/compat at the root: it is never
// rewritten (no -update), and a failure means the reader changed what an
// old file says.
func TestGolden(t *testing.T) {
	want := goldenRecords()
	golden, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range want {
		want[i] = normalize(r)
	}

	got, damage, err := readStream(t, golden, ReaderOptions{})
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("Reader on %s: %v, %v\n%s", goldenFile, err, damage, diffRecords(got, want))
	}
	f, err := Open(goldenFile, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Clean() {
		t.Errorf("%s: Clean() = false, Problems() = %v", goldenFile, f.Problems())
	}
	got, damage, err = drain(t, f.Records())
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("File.Records on %s: %v, %v\n%s", goldenFile, err, damage, diffRecords(got, want))
	}
	codecs := map[uint8]int{}
	goldenBlocks := rawBlocks(t, golden)
	for _, b := range goldenBlocks {
		codecs[b.hdr.codec]++
	}
	if codecs[codecNone] == 0 || codecs[codecZstd] == 0 || len(f.Index().Exchanges) < 3 {
		t.Errorf("golden file has blocks by codec %v and %d exchanges; want both codecs and several exchanges", codecs, len(f.Index().Exchanges))
	}

	// (The writer wrote these blocks until version 3; TestGoldenV3 pins
	// what it writes now.)
}

// rawBlocks returns every block of a file (the index block included) with
// its uncompressed payload.
func rawBlocks(t testing.TB, data []byte) []block {
	t.Helper()
	var out []block
	var dict prefixDict
	for off := int64(fileHeaderSize); off < int64(len(data))-footerSize; {
		n, err := headerLen(data[off:])
		if err != nil {
			t.Fatalf("block at %d: %v", off, err)
		}
		h, err := parseHeader(data[off : off+int64(n)])
		if err != nil {
			t.Fatalf("block at %d: %v", off, err)
		}
		payload, err := decompress(&h, data[off+int64(n):off+h.size()], nil, &dict)
		if err != nil {
			t.Fatalf("block at %d: %v", off, err)
		}
		if isData(h.typ) {
			dict.add(h.seq, h.codec, payload)
		}
		out = append(out, block{off: off, hdr: h, payload: bytes.Clone(payload)})
		off += h.size()
	}
	return out
}

// The golden files earlier writers wrote: golden-v1.wt as wtrace 0.1
// wrote it, before End records carried Redactions; golden-v1.wt and
// golden-v2.wt as wtrace 0.2 wrote them, before they carried LastExt, and
// as wtrace 0.3 wrote them, before Summary records carried the capture's
// XXH64. Every later reader must read them the same.
var goldenOlds = []struct {
	file string
	old  func(e *End, s *Summary) // what that writer did not write
}{
	{"testdata/golden-v1-0.1.wt", func(e *End, s *Summary) { e.Redactions, e.LastExt, s.CaptureXXH64 = nil, "", "" }},
	{"testdata/golden-v1-0.2.wt", func(e *End, s *Summary) { e.LastExt, s.CaptureXXH64 = "", "" }},
	{"testdata/golden-v2-0.2.wt", func(e *End, s *Summary) { e.LastExt, s.CaptureXXH64 = "", "" }},
	{"testdata/golden-v1-0.3.wt", func(e *End, s *Summary) { s.CaptureXXH64 = "" }},
	{"testdata/golden-v2-0.3.wt", func(e *End, s *Summary) { s.CaptureXXH64 = "" }},
}

// TestGoldenOld reads the files earlier writers wrote: the same records,
// without what later versions added.
func TestGoldenOld(t *testing.T) {
	for _, g := range goldenOlds {
		t.Run(g.file, func(t *testing.T) { testGoldenOld(t, g.file, g.old) })
	}
}

func testGoldenOld(t *testing.T, goldenOld string, old func(*End, *Summary)) {
	want := goldenRecords()
	for i, r := range want {
		switch x := r.(type) {
		case *End:
			c := *x
			old(&c, &Summary{})
			r = &c
		case *Summary:
			c := *x
			old(&End{}, &c)
			r = &c
		}
		want[i] = normalize(r)
	}
	data, err := os.ReadFile(goldenOld)
	if err != nil {
		t.Fatal(err)
	}
	got, damage, err := readStream(t, data, ReaderOptions{})
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("Reader on %s: %v, %v\n%s", goldenOld, err, damage, diffRecords(got, want))
	}
	f, err := Open(goldenOld, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Clean() {
		t.Errorf("%s: Clean() = false, Problems() = %v", goldenOld, f.Problems())
	}
	got, damage, err = drain(t, f.Records())
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("File.Records on %s: %v, %v\n%s", goldenOld, err, damage, diffRecords(got, want))
	}
}

// TestDeltaTimesFiltered reads the records of each exchange of a version
// 3 file on their own (File.ExchangeRecords skips the others of each
// block, reading only the times the records after them are differences
// from), in blocks that mix exchanges and hold times from math.MinInt64
// up: every record comes back with its time, as in the whole file.
func TestDeltaTimesFiltered(t *testing.T) {
	recs := goldenRecords()
	for _, bs := range []int{300, 2500, 1 << 20} {
		data := encode(t, recs, WriterOptions{BlockSize: bs, BlockInterval: -1}, false)
		f, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all, damage, err := drain(t, f.Records())
		if err != nil || len(damage) > 0 || len(all) != len(recs) {
			t.Fatalf("blocks of %d: %d records, %v, %v; want %d", bs, len(all), err, damage, len(recs))
		}
		for _, x := range f.Index().Exchanges {
			id := x.Request.Exchange
			if id < 0 {
				continue // NoExchange and the like: no exchange to select
			}
			var want []Record
			for _, r := range all {
				if ex, ok := exchangeOf(r); ok && ex == id {
					want = append(want, r)
				}
			}
			got, damage, err := drain(t, f.ExchangeRecords(id))
			if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
				t.Errorf("blocks of %d: ExchangeRecords(%d): %v, %v\n%s", bs, id, err, damage, diffRecords(got, want))
			}
		}
	}
}

// exchangeOf returns the exchange a record names.
func exchangeOf(r Record) (int64, bool) {
	switch r := r.(type) {
	case *Request:
		return r.Exchange, true
	case *Response:
		return r.Exchange, true
	case *Frame:
		return r.Exchange, true
	case *Body:
		return r.Exchange, true
	case *Chunk:
		return r.Exchange, true
	case *End:
		return r.Exchange, true
	case *Anomaly:
		return r.Exchange, true
	}
	return 0, false
}
