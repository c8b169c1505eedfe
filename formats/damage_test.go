package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// smallFile is a closed multi-block file, its records (as read back) and
// its blocks.
func smallFile(t testing.TB) (data []byte, want []Record, blocks []BlockInfo, indexOff int64) {
	recs := session(8, 120, 200*time.Millisecond)
	data = encode(t, recs, WriterOptions{BlockSize: 450}, false)
	for _, r := range recs {
		want = append(want, normalize(r))
	}
	blocks, indexOff = blockSpans(t, data)
	if len(blocks) < 5 {
		t.Fatalf("small file has %d blocks; want several", len(blocks))
	}
	return data, want, blocks, indexOff
}

// without returns the records of want outside block skip (-1: none), and
// only those of blocks before stop (-1: all).
func without(want []Record, blocks []BlockInfo, skip, stop int) []Record {
	var out []Record
	i := 0
	for bi, b := range blocks {
		if bi == stop {
			break
		}
		if bi != skip {
			out = append(out, want[i:i+b.Records]...)
		}
		i += b.Records
	}
	return out
}

func TestCutEveryOffset(t *testing.T) {
	data, want, blocks, indexOff := smallFile(t)
	for n := 0; n <= len(data); n++ {
		if raceEnabled && n%7 != 0 && n != len(data) {
			continue
		}
		cut := data[:n]
		complete, partial := 0, -1
		for i, b := range blocks {
			if b.Offset+b.Size <= int64(n) {
				complete += b.Records
			} else if b.Offset < int64(n) {
				partial = i
			}
		}
		wantRecs := want[:complete]
		var wantDamage *DamageError
		switch {
		case partial >= 0:
			wantDamage = &DamageError{Offset: blocks[partial].Offset, Block: partial, Err: io.ErrUnexpectedEOF}
		case int64(n) > indexOff && int64(n) < indexOff+blockHeaderSize:
			wantDamage = &DamageError{Offset: indexOff, Block: len(blocks), Err: io.ErrUnexpectedEOF}
		}
		check := func(what string, got []Record, damage []*DamageError, err error) {
			t.Helper()
			if err != nil || !sameRecords(got, wantRecs) {
				t.Errorf("cut at %d: %s: %d records, %v; want %d records", n, what, len(got), err, len(wantRecs))
			}
			if wantDamage == nil && len(damage) > 0 || wantDamage != nil && (len(damage) != 1 || !reflect.DeepEqual(damage[0], wantDamage)) {
				t.Errorf("cut at %d: %s: damage %v; want %v", n, what, damage, wantDamage)
			}
		}

		r, err := NewReader(bytes.NewReader(cut), ReaderOptions{})
		if n < fileHeaderSize {
			var d *DamageError
			if !errors.As(err, &d) || !errors.Is(err, io.ErrUnexpectedEOF) || d.Offset != 0 {
				t.Errorf("cut at %d: NewReader = %v; want DamageError at offset 0 wrapping io.ErrUnexpectedEOF", n, err)
			}
			if _, err := OpenReaderAt(bytes.NewReader(cut), int64(n), ReaderOptions{}); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut at %d: OpenReaderAt = %v; want io.ErrUnexpectedEOF", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: NewReader: %v", n, err)
		}
		got, damage, err := drain(t, r)
		check("Reader", got, damage, err)
		if wantDamage != nil && len(damage) == 1 && !strings.Contains(damage[0].Error(), "offset "+strconv.FormatInt(wantDamage.Offset, 10)) {
			t.Errorf("cut at %d: error %q does not name offset %d", n, damage[0], wantDamage.Offset)
		}

		f, err := OpenReaderAt(bytes.NewReader(cut), int64(n), ReaderOptions{})
		if err != nil {
			t.Fatalf("cut at %d: OpenReaderAt: %v", n, err)
		}
		if clean := n == len(data); f.Clean() != clean || clean != (len(f.Problems()) == 0) {
			t.Errorf("cut at %d: Clean() = %v, Problems() = %v", n, f.Clean(), f.Problems())
		}
		if n < len(data) && !errors.Is(f.Problems()[0], ErrNoIndex) {
			t.Errorf("cut at %d: Problems()[0] = %v; want ErrNoIndex", n, f.Problems()[0])
		}
		got, damage, err = drain(t, f.Records())
		check("File.Records", got, damage, err)

		if n%7 == 0 || n == len(data) || n == fileHeaderSize {
			checkRecover(t, cut, wantRecs, n < len(data))
		}
	}
}

// checkRecover recovers data and checks the result is a clean file holding
// want (then a Summary).
func checkRecover(t *testing.T, data []byte, want []Record, lossy bool) {
	t.Helper()
	var out bytes.Buffer
	problems, err := Recover(bytes.NewReader(data), int64(len(data)), &out)
	if err != nil {
		t.Fatalf("Recover(%d bytes) = %v", len(data), err)
	}
	if lossy != (len(problems) > 0) {
		t.Errorf("Recover(%d bytes) problems = %v; want some: %v", len(data), problems, lossy)
	}
	f := open(t, out.Bytes())
	if !f.Clean() || len(f.Problems()) > 0 {
		t.Errorf("recovered file: Clean() = %v, Problems() = %v; want clean", f.Clean(), f.Problems())
	}
	got, damage, err := drain(t, f.Records())
	if err != nil || len(damage) > 0 || len(got) == 0 {
		t.Fatalf("recovered file: %v, %v", err, damage)
	}
	var wantNoSummary []Record
	if len(want) == 0 || want[0].Type() != TypeMeta {
		wantNoSummary = append(wantNoSummary, got[0]) // Recover wrote one
	}
	for _, r := range want {
		if _, ok := r.(*Summary); !ok {
			wantNoSummary = append(wantNoSummary, r)
		}
	}
	s, ok := got[len(got)-1].(*Summary)
	if !ok || !sameRecords(got[:len(got)-1], wantNoSummary) {
		t.Errorf("recovered records differ:\n%s", diffRecords(got[:len(got)-1], wantNoSummary))
	}
	if ok && lossy && !strings.Contains(s.Note, "recovered") {
		t.Errorf("recovered Summary.Note = %q; want it to say recovered", s.Note)
	}
}

func TestBitFlips(t *testing.T) {
	data, want, blocks, indexOff := smallFile(t)
	d := bytes.Clone(data)
	for i := range d {
		if raceEnabled && i%7 != 0 {
			continue
		}
		inBlock := -1
		for bi, b := range blocks {
			if int64(i) >= b.Offset && int64(i) < b.Offset+b.Size {
				inBlock = bi
			}
		}
		wantRecs := without(want, blocks, inBlock, -1)
		var wantDamage *DamageError
		switch {
		case inBlock >= 0:
			wantDamage = &DamageError{Offset: blocks[inBlock].Offset, Block: inBlock, Skipped: blocks[inBlock].Size}
		case i < fileHeaderSize:
			// A damaged magic too: the blocks after it are sound.
			wantDamage = &DamageError{Offset: 0, Block: -1}
		case int64(i) >= indexOff && int64(i) < indexOff+blockHeaderSize:
			wantDamage = &DamageError{Offset: indexOff, Block: len(blocks)}
		}
		for bit := range 8 {
			d[i] ^= 1 << bit
			r, err := NewReader(bytes.NewReader(d), ReaderOptions{})
			if err != nil {
				t.Fatalf("flip %d.%d: NewReader: %v", i, bit, err)
			}
			got, damage, err := drain(t, r)
			if err != nil || !sameRecords(got, wantRecs) {
				t.Errorf("flip %d.%d: Reader: %d records, %v; want %d records", i, bit, len(got), err, len(wantRecs))
			}
			if wantDamage == nil && len(damage) > 0 || wantDamage != nil && (len(damage) != 1 || damage[0].Offset != wantDamage.Offset ||
				damage[0].Block != wantDamage.Block || wantDamage.Skipped > 0 && damage[0].Skipped != wantDamage.Skipped) {
				t.Errorf("flip %d.%d: Reader damage %v; want %+v", i, bit, damage, wantDamage)
			}

			f, err := OpenReaderAt(bytes.NewReader(d), int64(len(d)), ReaderOptions{})
			if err != nil {
				t.Fatalf("flip %d.%d: OpenReaderAt: %v", i, bit, err)
			}
			got, fdamage, err := drain(t, f.Records())
			if err != nil || !sameRecords(got, wantRecs) {
				t.Errorf("flip %d.%d: File.Records: %d records, %v; want %d records", i, bit, len(got), err, len(wantRecs))
			}
			if inBlock >= 0 && (len(fdamage) != 1 || fdamage[0].Offset != blocks[inBlock].Offset || !errors.Is(fdamage[0], errChecksum) && !errors.Is(fdamage[0], errCorrupt) && !errors.Is(fdamage[0], errMagic)) {
				t.Errorf("flip %d.%d: File.Records damage %v; want checksum mismatch at %d", i, bit, fdamage, blocks[inBlock].Offset)
			}
			// Open reads the index, not the data blocks.
			if wantClean := inBlock >= 0; f.Clean() != wantClean {
				t.Errorf("flip %d.%d: Clean() = %v; want %v", i, bit, f.Clean(), wantClean)
			}
			d[i] ^= 1 << bit
		}
	}
}

func TestStopOnDamage(t *testing.T) {
	data, want, blocks, _ := smallFile(t)
	for bi, b := range blocks {
		d := bytes.Clone(data)
		d[b.Offset+b.Size-1] ^= 0x10 // in the payload
		for _, src := range []string{"Reader", "File"} {
			var s recordSource
			if src == "Reader" {
				r, err := NewReader(bytes.NewReader(d), ReaderOptions{StopOnDamage: true})
				if err != nil {
					t.Fatal(err)
				}
				s = r
			} else {
				f, err := OpenReaderAt(bytes.NewReader(d), int64(len(d)), ReaderOptions{StopOnDamage: true})
				if err != nil {
					t.Fatal(err)
				}
				s = f.Records()
			}
			var got []Record
			var err error
			for {
				var r Record
				if r, err = s.Next(); err != nil {
					break
				}
				got = append(got, r)
			}
			var de *DamageError
			if !errors.As(err, &de) || de.Offset != b.Offset || de.Block != bi || !errors.Is(err, errChecksum) {
				t.Errorf("%s: block %d damaged: error %v; want checksum DamageError at %d", src, bi, err, b.Offset)
			}
			if _, err2 := s.Next(); err2 != err {
				t.Errorf("%s: Next after damage = %v; want sticky %v", src, err2, err)
			}
			if w := without(want, blocks, -1, bi); !sameRecords(got, w) {
				t.Errorf("%s: block %d damaged: %d records; want %d", src, bi, len(got), len(w))
			}
		}
	}
}

func TestKilledWriter(t *testing.T) {
	recs := session(30, 300, 300*time.Millisecond)
	closed := encode(t, recs, WriterOptions{BlockSize: 1500}, false)
	killed := encode(t, recs, WriterOptions{BlockSize: 1500}, true)
	_, indexOff := blockSpans(t, closed)
	if !bytes.Equal(killed, closed[:indexOff]) {
		t.Fatalf("unclosed file is not a prefix of the closed one")
	}
	got, damage, err := readStream(t, killed, ReaderOptions{})
	if err != nil || len(damage) > 0 || len(got) != len(recs) {
		t.Errorf("Reader on unclosed file: %d records, %v, %v; want %d", len(got), err, damage, len(recs))
	}
	f := open(t, killed)
	if f.Clean() || len(f.Problems()) != 1 || !errors.Is(f.Problems()[0], ErrNoIndex) {
		t.Errorf("unclosed file: Clean() = %v, Problems() = %v; want false, [ErrNoIndex]", f.Clean(), f.Problems())
	}
	if want := open(t, closed).Index(); !reflect.DeepEqual(f.Index(), want) {
		t.Errorf("rebuilt index differs from the closed file's")
	}
	t.Logf("problem: %v", f.Problems()[0])
}

func TestRecover(t *testing.T) {
	data, want, blocks, _ := smallFile(t)
	t.Run("clean", func(t *testing.T) { checkRecover(t, data, want, false) })
	t.Run("damaged", func(t *testing.T) {
		d := bytes.Clone(data[:blocks[len(blocks)-1].Offset+5]) // cut in the last block
		d[blocks[2].Offset+blocks[2].Size/2] ^= 1               // flip in block 2
		var out bytes.Buffer
		problems, err := Recover(bytes.NewReader(d), int64(len(d)), &out)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) != 3 || !errors.Is(problems[0], ErrNoIndex) || !errors.Is(problems[1], errChecksum) || !errors.Is(problems[2], io.ErrUnexpectedEOF) {
			t.Errorf("Recover problems = %v; want no index, checksum, cut", problems)
		}
		wantRecs := without(want, blocks, 2, len(blocks)-1)
		checkRecover(t, d, wantRecs, true)
	})
	t.Run("lost meta", func(t *testing.T) {
		d := bytes.Clone(data)
		d[blocks[0].Offset+blocks[0].Size-1] ^= 1
		wantRecs := without(want, blocks, 0, -1)
		var out bytes.Buffer
		if _, err := Recover(bytes.NewReader(d), int64(len(d)), &out); err != nil {
			t.Fatal(err)
		}
		got, _, _ := drain(t, open(t, out.Bytes()).Records())
		if !reflect.DeepEqual(got[0], want[0]) { // from the index
			t.Errorf("recovered Meta = %+v; want the index's %+v", got[0], want[0])
		}
		if !reflect.DeepEqual(got[1:len(got)-1], wantRecs[:len(wantRecs)-1]) {
			t.Errorf("recovered records differ:\n%s", diffRecords(got[1:], wantRecs))
		}
	})
	t.Run("not a session", func(t *testing.T) {
		junk := bytes.Repeat([]byte("not a session file "), 100)
		if _, err := Recover(bytes.NewReader(junk), int64(len(junk)), io.Discard); !errors.Is(err, ErrNotSession) {
			t.Errorf("Recover(junk) = %v; want ErrNotSession", err)
		}
	})
	t.Run("bad magic", func(t *testing.T) {
		d := bytes.Clone(data)
		d[0] = 'X'
		var out bytes.Buffer
		problems, err := Recover(bytes.NewReader(d), int64(len(d)), &out)
		if err != nil || len(problems) != 1 || !errors.Is(problems[0], errFileMagic) {
			t.Errorf("Recover(bad magic) = %v, %v; want the blocks and one problem", problems, err)
		}
		checkRecover(t, d, want, true)
	})
}

// craftBlock builds a block with a header of hdrLen bytes (extra bytes
// zero) around payload, stored uncompressed.
func craftBlock(typ uint8, hdrLen int, seq uint32, records int, payload []byte) []byte {
	h := blockHeader{typ: typ, codec: codecNone, seq: seq, clen: len(payload), ulen: len(payload), records: records, payloadCRC: crc(payload)}
	b := make([]byte, blockHeaderSize)
	h.put(b)
	if hdrLen != blockHeaderSize {
		b = append(b[:blockHeaderSize-4], make([]byte, hdrLen-blockHeaderSize+4)...)
		binary.LittleEndian.PutUint16(b[6:], uint16(hdrLen))
		binary.LittleEndian.PutUint32(b[hdrLen-4:], crc(b[:hdrLen-4]))
	}
	return append(b, payload...)
}

func rec(t Type, body []byte) []byte {
	return append(binary.AppendUvarint([]byte{byte(t)}, uint64(len(body))), body...)
}

func body(r Record) []byte { b, _ := appendBody(nil, r); return b }

func TestCompat(t *testing.T) {
	// What a later version may write: a longer block header, unknown
	// record types, fields after the known ones, unknown block types.
	conn := &Conn{ID: 3, Time: 7, Client: "a", Server: "b"}
	var p1 []byte
	p1 = append(p1, rec(TypeMeta, body(&Meta{Tool: "future"}))...)
	p1 = append(p1, rec(200, []byte("a record type from the future"))...)
	p1 = append(p1, rec(TypeConn, append(body(conn), "new field"...))...)
	p2 := rec(TypeConnEnd, body(&ConnEnd{Conn: 3}))
	file := fileHeader()
	file = append(file, craftBlock(blockData, 80, 0, 3, p1)...)
	file = append(file, craftBlock(9, blockHeaderSize, 1, 0, []byte("a block type from the future"))...)
	file = append(file, craftBlock(blockData, blockHeaderSize, 2, 1, p2)...)
	want := []Record{&Meta{Tool: "future"}, conn, &ConnEnd{Conn: 3}}
	got, damage, err := readStream(t, file, ReaderOptions{})
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("future file: %v, %v, %v; want %v", got, err, damage, want)
	}
	f := open(t, file)
	got, damage, err = drain(t, f.Records())
	if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("future file via File: %v, %v, %v; want %v", got, err, damage, want)
	}

	// A newer version (and version 0) is refused, not misread; every
	// version from 1 to Version is read.
	for v := uint16(0); v <= Version+1; v++ {
		vf := bytes.Clone(file)
		binary.LittleEndian.PutUint16(vf[8:], v)
		binary.LittleEndian.PutUint32(vf[12:], crc(vf[:12]))
		_, rerr := NewReader(bytes.NewReader(vf), ReaderOptions{})
		_, ferr := OpenReaderAt(bytes.NewReader(vf), int64(len(vf)), ReaderOptions{})
		known := v >= minVersion && v <= Version
		for _, err := range []error{rerr, ferr} {
			if known && err != nil || !known && !errors.Is(err, ErrVersion) {
				t.Errorf("reading version %d = %v; want %v", v, err, map[bool]string{true: "nil", false: "ErrVersion"}[known])
			}
		}
	}
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fn()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

func TestHostileLengths(t *testing.T) {
	hdr := func(mod func(h *blockHeader)) []byte {
		h := blockHeader{typ: blockData, codec: codecZstd, clen: 100, ulen: 100}
		mod(&h)
		b := make([]byte, blockHeaderSize)
		h.put(b)
		return append(fileHeader(), append(b, make([]byte, 100)...)...)
	}
	tests := []struct {
		name  string
		data  []byte
		cause error
	}{
		{"huge uncompressed", hdr(func(h *blockHeader) { h.ulen = 1<<32 - 1 }), errCorrupt},
		{"uncompressed over limit", hdr(func(h *blockHeader) { h.ulen = MaxBlockSize + 1 }), errCorrupt},
		{"huge compressed", hdr(func(h *blockHeader) { h.clen = 1<<32 - 1 }), errCorrupt},
		{"compressed at limit, file cut", hdr(func(h *blockHeader) { h.clen = MaxBlockSize }), io.ErrUnexpectedEOF},
		{"uncompressed size mismatch", hdr(func(h *blockHeader) { h.codec = codecNone; h.ulen = MaxBlockSize }), errCorrupt},
		{"unknown codec", hdr(func(h *blockHeader) { h.codec = 7; h.payloadCRC = crc(make([]byte, 100)) }), errCorrupt},
		{"huge record length", append(fileHeader(), craftBlock(blockData, blockHeaderSize, 0, 1,
			append([]byte{byte(TypeConn)}, binary.AppendUvarint(nil, 1<<62)...))...), errCorrupt},
		{"record length past the block", append(fileHeader(), craftBlock(blockData, blockHeaderSize, 0, 1,
			append([]byte{byte(TypeConn)}, 100, 1, 2))...), errCorrupt},
		{"huge header count", append(fileHeader(), craftBlock(blockData, blockHeaderSize, 0, 1,
			rec(TypeRequest, append(bytes.Repeat([]byte{0}, 11), 0xff, 0xff, 0xff, 0xff, 0x0f)))...), errCorrupt},
		{"record count", append(fileHeader(), craftBlock(blockData, blockHeaderSize, 0, 2, rec(TypeConnEnd, body(&ConnEnd{})))...), errBlockCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var damage []*DamageError
			var err error
			n := allocated(func() { _, damage, err = readStream(t, tt.data, ReaderOptions{}) })
			if err != nil || len(damage) != 1 || !errors.Is(damage[0], tt.cause) {
				t.Errorf("read = %v, %v; want one DamageError wrapping %v", err, damage, tt.cause)
			}
			if n > 1<<20 {
				t.Errorf("reading allocated %d bytes; want < 1 MiB", n)
			}
			n = allocated(func() {
				f, err := OpenReaderAt(bytes.NewReader(tt.data), int64(len(tt.data)), ReaderOptions{})
				if err != nil || len(f.Problems()) != 2 {
					t.Errorf("OpenReaderAt = %v, problems %v; want no index and one damage", err, f.Problems())
				}
			})
			if n > 1<<20 {
				t.Errorf("opening allocated %d bytes; want < 1 MiB", n)
			}
		})
	}

	t.Run("footer", func(t *testing.T) {
		data, _, _, _ := smallFile(t)
		for _, tt := range []struct{ off, n int64 }{{16, 1 << 40}, {1 << 40, 100}, {-5, 100}, {0, 0}} {
			d := bytes.Clone(data[:len(data)-footerSize])
			d = appendFooter(d, tt.off, tt.n)
			var f *File
			n := allocated(func() { f = open(t, d) })
			if f.Clean() || !errors.Is(f.Problems()[0], ErrNoIndex) || n > 1<<20 {
				t.Errorf("footer %+v: Clean() = %v, Problems() = %v, %d bytes allocated; want index rebuilt", tt, f.Clean(), f.Problems(), n)
			}
		}
	})
}

// sameRecords reports whether a and b hold the same records, comparing
// their encodings: cheaper than reflect.DeepEqual, and equivalent for
// records read back (TestRoundTripRecords checks that decoding an
// encoding gives back the record).
func sameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	var ea, eb []byte
	for i := range a {
		if a[i].Type() != b[i].Type() {
			return false
		}
		ea, _ = appendBody(ea[:0], a[i])
		eb, _ = appendBody(eb[:0], b[i])
		if !bytes.Equal(ea, eb) {
			return false
		}
	}
	return true
}

// TestScannerAll: the range form yields what Next does — records, then
// each damaged region, going on after it (or stopping with StopOnDamage).
func TestScannerAll(t *testing.T) {
	data, want, blocks, _ := smallFile(t)
	bi := len(blocks) / 2
	d := bytes.Clone(data)
	d[blocks[bi].Offset+blocks[bi].Size-1] ^= 0x10
	for _, stop := range []bool{false, true} {
		f, err := OpenReaderAt(bytes.NewReader(d), int64(len(d)), ReaderOptions{StopOnDamage: stop})
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		var damage int
		for r, err := range f.Records().All() {
			var de *DamageError
			switch {
			case errors.As(err, &de):
				damage++
			case err != nil:
				t.Fatalf("StopOnDamage %v: %v", stop, err)
			default:
				got = append(got, r)
			}
		}
		wantRecs := without(want, blocks, bi, -1) // all but the damaged block
		if stop {
			wantRecs = without(want, blocks, -1, bi) // the blocks before it
		}
		if damage != 1 || !sameRecords(got, wantRecs) {
			t.Errorf("StopOnDamage %v: %d records, %d damaged regions; want %d records, 1 region", stop, len(got), damage, len(wantRecs))
		}
	}
}

// TestDamages: a region is noted once, whatever reads meet it, and the
// list comes in file order.
func TestDamages(t *testing.T) {
	var ds Damages
	a := &DamageError{Block: 2, Offset: 9000, Err: io.ErrUnexpectedEOF}
	b := &DamageError{Block: 0, Offset: 100, Err: io.ErrUnexpectedEOF}
	for _, d := range []*DamageError{a, b, a, {Block: 2, Offset: 9000, Err: io.ErrUnexpectedEOF}} {
		ds.Add(d)
	}
	got := ds.Errors()
	if len(got) != 2 || got[0] != b || got[1] != a {
		t.Errorf("Damages.Errors() = %v; want [%v %v]", got, b, a)
	}
}

// TestOpenError: what keeps Open from opening a file is an *OpenError
// naming it, with the hint the commands print, and the cause underneath.
func TestOpenError(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.wt")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("x"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, msg, hint string
		is              error
	}{
		{junk, junk + " is not a wtrace session file", "make one with: wtrace record --pcap capture.pcap -o " + junk, ErrNotSession},
		{filepath.Join(dir, "none.wt"), "no such file", "check the path, or run: wtrace verify " + filepath.Join(dir, "none.wt"), fs.ErrNotExist},
	} {
		_, err := Open(c.path, ReaderOptions{})
		var oe *OpenError
		if !errors.As(err, &oe) {
			t.Errorf("Open(%q) = %v; want an OpenError", c.path, err)
			continue
		}
		if oe.Path != c.path || !strings.Contains(err.Error(), c.msg) || oe.Hint() != c.hint || !errors.Is(err, c.is) {
			t.Errorf("Open(%q) = %v (hint %q); want %q with hint %q, wrapping %v", c.path, err, oe.Hint(), c.msg, c.hint, c.is)
		}
	}
}
