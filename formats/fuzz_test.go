package formats

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// FuzzReader feeds arbitrary bytes to every reading path: Reader,
// OpenReaderAt with Records and ExchangeRecords, and Recover. None may
// panic, loop, or allocate beyond the limits; what Recover writes must open
// clean.
func FuzzReader(f *testing.F) {
	f.Add(fileHeader())
	f.Add(encode(f, []Record{&Meta{Tool: "x"}, &Conn{ID: 1}}, WriterOptions{}, false))
	for _, golden := range []string{goldenFile, goldenV2} { // versions 1 and 2
		data, err := os.ReadFile(golden)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, stop := range []bool{false, true} {
			opts := ReaderOptions{StopOnDamage: stop}
			if r, err := NewReader(bytes.NewReader(data), opts); err == nil {
				drainLimited(t, r)
			}
			file, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), opts)
			if err != nil {
				continue
			}
			drainLimited(t, file.Records())
			for _, x := range file.Index().Exchanges {
				drainLimited(t, file.ExchangeRecords(x.Request.Exchange))
			}
		}
		var out bytes.Buffer
		if _, err := Recover(bytes.NewReader(data), int64(len(data)), &out); err == nil {
			f, err := OpenReaderAt(bytes.NewReader(out.Bytes()), int64(out.Len()), ReaderOptions{})
			if err != nil || !f.Clean() {
				t.Fatalf("Recover wrote a file that does not open clean: %v", err)
			}
		}
	})
}

// drainLimited reads s to its end: io.EOF, another error, or a sticky
// DamageError (StopOnDamage).
func drainLimited(t *testing.T, s recordSource) {
	var last error
	for i := range 1 << 20 {
		_, err := s.Next()
		if err == io.EOF || err != nil && err == last {
			return
		}
		if _, ok := err.(*DamageError); err != nil && !ok {
			return
		}
		last = err
		if i == 1<<20-1 {
			t.Fatalf("no end after %d calls", i)
		}
	}
}

// FuzzRecordDecode decodes an arbitrary record body of any type, and also
// as a block payload. A body that decodes must encode to something that
// decodes to the same record.
func FuzzRecordDecode(f *testing.F) {
	for _, r := range fullRecords() {
		f.Add(byte(r.Type()), body(r))
	}
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		for _, delta := range []bool{false, true} {
			decodeRecords(b, nil, nil, false, delta)
			decodeRecords(b, nil, recordFilter{0: true, 1: true}, true, delta)
		}
		// Absolute times, and in a time chain (version 3 blocks).
		for _, prev := range []*int64{nil, new(int64)} {
			chain := func() *int64 {
				if prev == nil {
					return nil
				}
				return new(int64)
			}
			r, err := decodeRecord(Type(typ), b, false, chain())
			if err != nil {
				continue
			}
			enc, err := appendBodyChain(nil, r, chain())
			if err != nil {
				t.Fatalf("appendBody(%#v) = %v", r, err)
			}
			r2, err := decodeRecord(Type(typ), enc, true, chain())
			if err != nil || !reflect.DeepEqual(r, r2) {
				t.Fatalf("decode(encode(%#v)) = %#v, %v", r, r2, err)
			}
		}
	})
}

// FuzzIndexDecode decodes an arbitrary index payload; what decodes and
// validates must encode back to the same index.
func FuzzIndexDecode(f *testing.F) {
	data := encode(f, session(10, 100, time.Second), WriterOptions{BlockSize: 500}, false)
	idx, _, err := readIndex(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		f.Fatal(err)
	}
	payload, err := appendIndex(nil, idx)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(payload)
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := decodeIndex(b)
		if err != nil || idx.validate(fileHeaderSize, 1<<62) != nil {
			return
		}
		enc, err := appendIndex(nil, idx)
		if err != nil {
			t.Fatalf("appendIndex: %v", err)
		}
		idx2, err := decodeIndex(enc)
		if err != nil || !reflect.DeepEqual(idx, idx2) {
			t.Fatalf("decode(encode(index)) differs: %v", err)
		}
	})
}

// update rewrites the fuzz seed corpora; testdata/golden-v1.wt is never
// rewritten (see TestGolden).
var update = flag.Bool("update", false, "rewrite the seed corpora under testdata/fuzz")

// TestWriteFuzzSeeds writes the seed corpora (with -update): small whole,
// cut, unclosed and damaged files; record bodies; an index payload.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the seed corpora")
	}
	small := encode(t, session(6, 120, 300*time.Millisecond), WriterOptions{BlockSize: 500}, false)
	blocks, indexOff := blockSpans(t, small)
	flipped := bytes.Clone(small)
	flipped[blocks[1].Offset+20] ^= 4
	dict, _ := dictFile(t, false)
	dblocks, dindexOff := blockSpans(t, dict)
	dflipped := bytes.Clone(dict)
	dflipped[dblocks[0].Offset+blockHeaderSize+2] ^= 8
	dl := layout(t, dict)
	copyOff, copyEnd := dl.all[dl.copies[0]].off, dl.all[dl.copies[0]].off+dl.all[dl.copies[0]].hdr.size()
	dcopy := bytes.Clone(dict)
	dcopy[copyEnd-3] ^= 2
	dboth := bytes.Clone(dict)
	dboth[dblocks[1].Offset+blockHeaderSize+2] ^= 8
	dboth[copyEnd-3] ^= 2
	dzeroed := bytes.Clone(dict)
	clear(dzeroed[fileHeaderSize:copyEnd])
	// Files of the earlier versions too (their data blocks are of type 1).
	v2, err := os.ReadFile(goldenV2)
	if err != nil {
		t.Fatal(err)
	}
	v2blocks, _ := blockSpans(t, v2)
	v2flipped := bytes.Clone(v2)
	v2flipped[v2blocks[3].Offset+blockHeaderSize+1] ^= 16
	v1, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	writeSeeds(t, "FuzzReader", map[string][]any{
		"v1-whole":      {v1},
		"v2-whole":      {v2},
		"v2-cut":        {v2[:v2blocks[4].Offset+60]},
		"v2-flipped":    {v2flipped},
		"whole":         {small},
		"unclosed":      {small[:indexOff]},
		"cut":           {small[:blocks[2].Offset+30]},
		"flipped":       {flipped},
		"dict-whole":    {dict},
		"dict-unclosed": {dict[:dindexOff]},
		"dict-cut":      {dict[:dblocks[len(dblocks)-2].Offset+40]},
		"dict-flipped":  {dflipped},
		"dict-copy":     {dcopy},
		"dict-both":     {dboth},
		"dict-zeroed":   {dzeroed},
		"dict-uncopied": {append(bytes.Clone(dict[:copyOff]), dict[copyEnd:]...)},
		"nometa":        {append(fileHeader(), craftBlock(blockData, 64, 0, 1, rec(TypeConnEnd, body(&ConnEnd{Conn: 2})))...)},
	})
	recs := map[string][]any{}
	for i, r := range fullRecords() {
		recs[fmt.Sprintf("%s-%d", r.Type(), i)] = []any{byte(r.Type()), body(r)}
	}
	writeSeeds(t, "FuzzRecordDecode", recs)
	raw := rawBlocks(t, small)
	writeSeeds(t, "FuzzIndexDecode", map[string][]any{"small": {raw[len(raw)-1].payload}})
	crafted := map[string][]any{}
	for i, b := range raw[:3] {
		crafted[fmt.Sprintf("block-%d", i)] = []any{b.hdr.typ, byte(codecZstd), uint32(b.hdr.records), uint32(b.hdr.ulen),
			small[b.off+int64(b.hdr.hdrLen) : b.off+b.hdr.size()], raw[len(raw)-1].payload}
	}
	for _, b := range rawBlocks(t, dict) {
		if b.hdr.codec == codecZstdDict && crafted["dict-block"] == nil {
			crafted["dict-block"] = []any{b.hdr.typ, byte(codecZstdDict), uint32(b.hdr.records), uint32(b.hdr.ulen),
				dict[b.off+int64(b.hdr.hdrLen) : b.off+b.hdr.size()], []byte(nil)}
		}
		if b.hdr.typ == blockDict && crafted["dict-copy"] == nil {
			// FuzzCraftedFile takes the dictionary's CRC from records.
			crafted["dict-copy"] = []any{b.hdr.typ, b.hdr.codec, b.hdr.dictCRC, uint32(b.hdr.ulen),
				dict[b.off+int64(b.hdr.hdrLen) : b.off+b.hdr.size()], []byte(nil)}
		}
	}
	writeSeeds(t, "FuzzCraftedFile", crafted)
}

// writeSeeds writes seeds (each the fuzz function's arguments: byte,
// uint32 or []byte) in the go fuzz corpus format.
func writeSeeds(t *testing.T, name string, seeds map[string][]any) {
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, args := range seeds {
		s := "go test fuzz v1\n"
		for _, a := range args {
			switch a := a.(type) {
			case byte:
				s += fmt.Sprintf("byte(%d)\n", a)
			case uint32:
				s += fmt.Sprintf("uint32(%d)\n", a)
			case []byte:
				s += "[]byte(" + strconv.Quote(string(a)) + ")\n"
			default:
				t.Fatalf("seed argument of type %T", a)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzCraftedFile builds a file whose checksums are right around arbitrary
// block fields and payloads, so that the fuzzer reaches the decompressor,
// the record decoder and the index decoder through every reading path.
// (The uncompressed length is kept under 1 MiB only to keep executions
// fast; TestHostileLengths covers the limits.)
func FuzzCraftedFile(f *testing.F) {
	payload := rec(TypeMeta, body(&Meta{Tool: "x"}))
	f.Add(byte(blockData), byte(codecNone), uint32(1), uint32(len(payload)), payload, []byte(nil))
	data := encode(f, session(4, 100, time.Second), WriterOptions{}, false)
	blks := rawBlocks(f, data)
	for _, b := range blks {
		f.Add(b.hdr.typ, byte(codecZstd), uint32(b.hdr.records), uint32(b.hdr.ulen), data[b.off+int64(b.hdr.hdrLen):b.off+b.hdr.size()], blks[len(blks)-1].payload)
	}
	f.Fuzz(func(t *testing.T, typ, codec byte, records, ulen uint32, payload, index []byte) {
		h := blockHeader{typ: typ, codec: codec, records: int(records), clen: len(payload), ulen: int(ulen % (1 << 20)), payloadCRC: crc(payload)}
		switch {
		case typ == blockDict:
			// A copy of a dictionary of CRC records; no block uses it.
			h.dictLen, h.dictCRC = h.ulen, records
		case codec == codecZstdDict:
			// A dictionary the file cannot hold (its only data block uses
			// it): the block is damage, named.
			h.dictLen, h.dictCRC = 1+int(ulen%MaxDictSize), records
		}
		b := make([]byte, h.headerSize())
		h.put(b)
		file := append(fileHeader(), b...)
		file = append(file, payload...)
		indexOff := int64(len(file))
		file = append(file, craftBlock(blockIndex, blockHeaderSize, 1, 0, index)...)
		file = appendFooter(file, indexOff, int64(len(file))-indexOff)
		if r, err := NewReader(bytes.NewReader(file), ReaderOptions{}); err == nil {
			drainLimited(t, r)
		}
		fl, err := OpenReaderAt(bytes.NewReader(file), int64(len(file)), ReaderOptions{})
		if err != nil {
			t.Fatalf("OpenReaderAt: %v", err)
		}
		drainLimited(t, fl.Records())
		for _, x := range fl.Index().Exchanges {
			drainLimited(t, fl.ExchangeRecords(x.Request.Exchange))
		}
		Recover(bytes.NewReader(file), int64(len(file)), io.Discard)
	})
}
