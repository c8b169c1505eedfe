package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// normalize returns r as a reader gives it back: empty slices and maps nil.
func normalize(r Record) Record {
	switch r := r.(type) {
	case *Meta:
		c := *r
		if len(c.Labels) == 0 {
			c.Labels = nil
		}
		return &c
	case *Frame:
		c := *r
		c.Pre, c.Data, c.Redacted = nilIfEmpty(c.Pre), nilIfEmpty(c.Data), nil
		if len(r.Redacted) > 0 {
			c.Redacted = r.Redacted
		}
		return &c
	case *Body:
		c := *r
		c.Data = nilIfEmpty(c.Data)
		return &c
	case *End:
		c := *r
		c.Tail = nilIfEmpty(c.Tail)
		if len(c.Trailer) == 0 {
			c.Trailer = nil
		}
		if len(c.Redactions) == 0 {
			c.Redactions = nil
		}
		return &c
	case *Request:
		c := *r
		if len(c.Header) == 0 {
			c.Header = nil
		}
		return &c
	case *Response:
		c := *r
		if len(c.Header) == 0 {
			c.Header = nil
		}
		return &c
	}
	return r
}

// stringLen is the encoded length of a string field: its uvarint length
// and its bytes.
func stringLen(s string) int {
	n := len(s)
	k := 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		k++
	}
	return k + n
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func TestRoundTripRecords(t *testing.T) {
	for _, chain := range []struct {
		name string
		prev *int64 // the time chain before the record (FORMAT.md §5.1); nil: absolute times
	}{{"absolute", nil}, {"delta", ptr(int64(1795000000000000000 - 12345))}, {"delta-from-0", ptr(int64(0))}} {
		for _, r := range fullRecords() {
			t.Run(chain.name+"/"+r.Type().String(), func(t *testing.T) { testRoundTripRecord(t, r, chain.prev) })
		}
	}
}

func ptr[T any](v T) *T { return &v }

// testRoundTripRecord encodes and decodes r, its time absolute (prev nil)
// or in a time chain at *prev.
func testRoundTripRecord(t *testing.T, r Record, prev *int64) {
	// chain returns a fresh time chain at *prev (nil for absolute times).
	chain := func() *int64 {
		if prev == nil {
			return nil
		}
		return ptr(*prev)
	}
	encode := func(r Record) ([]byte, error) { return appendBodyChain(nil, r, chain()) }
	decode := func(t Type, b []byte) (Record, error) { return decodeRecord(t, b, false, chain()) }
	body, err := encode(r)
	if err != nil {
		t.Fatalf("appendBody(%#v): %v", r, err)
	}
	got, err := decode(r.Type(), body)
	if err != nil || !reflect.DeepEqual(got, normalize(r)) {
		t.Errorf("decodeRecord(%q) = %#v, %v; want %#v", body, got, err, r)
	}
	if tm, ok := recordTime(r); ok && prev != nil {
		// The chain moves on to the record's time, by either path.
		dt, st := chain(), chain()
		appendBodyChain(nil, r, dt)
		if err := chainTime(r.Type(), body, st); err != nil || *dt != tm || *st != tm {
			t.Errorf("time chain after %s = %d (encoding), %d, %v (chainTime); want %d", r.Type(), *dt, *st, err, tm)
		}
	}
	// Later versions append fields: a reader ignores them.
	got, err = decode(r.Type(), append(body, 1, 2, 3))
	if err != nil || !reflect.DeepEqual(got, normalize(r)) {
		t.Errorf("decodeRecord(%q + trailing fields) = %#v, %v; want %#v", body, got, err, r)
	}
	// Every cut body is an error, never a panic or a wrong record,
	// except an End cut just before its redactions (an End as
	// versions before 0.2 wrote it) or just before its last-chunk
	// extensions (before 0.3), or a Summary cut just before its
	// capture XXH64 (before 0.4).
	old, old2 := -1, -1
	if sm, ok := r.(*Summary); ok {
		c := *sm
		c.CaptureXXH64 = ""
		old = len(body) - stringLen(sm.CaptureXXH64)
		if got, err := decode(TypeSummary, body[:old]); err != nil || !reflect.DeepEqual(got, normalize(&c)) {
			t.Errorf("decodeRecord(%q) (a Summary of wtrace 0.3) = %#v, %v; want %#v", body[:old], got, err, &c)
		}
	}
	if e, ok := r.(*End); ok {
		c := *e
		c.LastExt = ""
		old2 = len(body) - stringLen(e.LastExt)
		if got, err := decode(TypeEnd, body[:old2]); err != nil || !reflect.DeepEqual(got, normalize(&c)) {
			t.Errorf("decodeRecord(%q) (an End of wtrace 0.2) = %#v, %v; want %#v", body[:old2], got, err, &c)
		}
		c.Redactions = nil
		b, _ := encode(&c)
		old = len(b) - 2
		if got, err := decode(TypeEnd, b[:old]); err != nil || !reflect.DeepEqual(got, normalize(&c)) {
			t.Errorf("decodeRecord(%q) (an End of wtrace 0.1) = %#v, %v; want %#v", b[:old], got, err, &c)
		}
	}
	for n := range len(body) {
		if n == old || n == old2 {
			continue
		}
		if got, err := decode(r.Type(), body[:n]); err == nil {
			t.Errorf("decodeRecord(%q) (cut at %d) = %#v, nil; want error", body[:n], n, got)
		}
	}
}

func TestRoundTripFile(t *testing.T) {
	recs := append(fullRecords(), session(40, 300, time.Millisecond)[1:]...)
	// The writer must not keep references to what it was given.
	data := encode(t, recs, WriterOptions{BlockSize: 2000}, false)
	want := make([]Record, len(recs))
	for i, r := range recs {
		want[i] = normalize(r)
	}

	t.Run("Reader", func(t *testing.T) {
		got, damage, err := readStream(t, data, ReaderOptions{})
		if err != nil || len(damage) > 0 {
			t.Fatalf("read: %v, damage %v", err, damage)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Reader records differ from written:\n%s", diffRecords(got, want))
		}
	})
	t.Run("OneByteReader", func(t *testing.T) {
		r, err := NewReader(oneByteReader{bytes.NewReader(data)}, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, damage, err := drain(t, r)
		if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("one byte at a time: %d records, %v, damage %v; want %d records", len(got), err, damage, len(want))
		}
	})
	t.Run("File", func(t *testing.T) {
		f, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !f.Clean() || len(f.Problems()) > 0 {
			t.Errorf("Clean() = %v, Problems() = %v; want true, none", f.Clean(), f.Problems())
		}
		got, damage, err := drain(t, f.Records())
		if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("Records(): %v, damage %v\n%s", err, damage, diffRecords(got, want))
		}
	})
	t.Run("ReadError", func(t *testing.T) {
		r, err := NewReader(io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(errors.New("disk on fire"))), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = drain(t, r)
		if err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("read error = %v; want disk on fire", err)
		}
		if _, err2 := r.Next(); err2 != err {
			t.Errorf("second Next after read error = %v; want sticky %v", err2, err)
		}
	})
}

func diffRecords(got, want []Record) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w Record
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			fmt.Fprintf(&b, "record %d:\n got  %#v\n want %#v\n", i, g, w)
			if b.Len() > 4000 {
				break
			}
		}
	}
	return b.String()
}

func TestWriterCopies(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := &Meta{Tool: "x", Labels: map[string]string{"a": "b"}}
	req := &Request{Exchange: 0, Header: []Header{{Name: "A", Value: "1"}}}
	frame := &Frame{Exchange: 0, Data: []byte(`{"type":"ADDED"}`)}
	for _, r := range []Record{meta, req, frame} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	meta.Labels["a"] = "changed"
	req.Header[0].Value = "changed"
	copy(frame.Data, "XXXXXXXXXXXXXXXX")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := OpenReaderAt(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idx := f.Index()
	if idx.Meta.Labels["a"] != "b" || idx.Exchanges[0].Request.Header[0].Value != "1" || idx.Exchanges[0].FrameTypes["ADDED"] != 1 {
		t.Errorf("index kept caller's memory: meta %v, request %v, frame types %v", idx.Meta, idx.Exchanges[0].Request, idx.Exchanges[0].FrameTypes)
	}
	recs, _, _ := drain(t, f.Records())
	if got := string(recs[2].(*Frame).Data); got != `{"type":"ADDED"}` {
		t.Errorf("frame data = %q; want what was written", got)
	}
}

func TestWriterErrors(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Conn{}); err == nil {
		t.Errorf("Write(Conn) first = nil; want error (Meta first)")
	}
	if err := w.Write(nil); err == nil {
		t.Errorf("Write(nil) = nil; want error")
	}
	if err := w.Write((*Frame)(nil)); err == nil {
		t.Errorf("Write((*Frame)(nil)) = nil; want error")
	}
	if err := w.Write(&Meta{}); err != nil {
		t.Fatalf("Write(Meta) = %v", err)
	}
	if err := w.Write(&Frame{Data: make([]byte, MaxRecordSize)}); err == nil {
		t.Errorf("Write(frame of MaxRecordSize data bytes) = nil; want error")
	}
	if err := w.Write(&Conn{ID: 1}); err != nil {
		t.Errorf("Write after a rejected record = %v; want the writer usable", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	if err := w.Write(&Conn{}); err == nil {
		t.Errorf("Write after Close = nil; want error")
	}
	if _, err := NewWriter(&buf, WriterOptions{Level: 99}); err == nil {
		t.Errorf("NewWriter(Level 99) = nil error; want error")
	}
	// A failing underlying writer is sticky.
	fw := &failWriter{after: 1}
	w, err = NewWriter(fw, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&Meta{})
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "offset 16") {
		t.Errorf("Flush to a failing writer = %v; want error naming offset 16", err)
	}
	if err := w.Write(&Conn{}); err == nil {
		t.Errorf("Write after write error = nil; want sticky error")
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after == 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

func TestLargeRecord(t *testing.T) {
	// The largest Frame that fits MaxRecordSize.
	data := make([]byte, MaxRecordSize-40)
	for i := range data {
		data[i] = byte(i * 7)
	}
	big := &Frame{Exchange: 1, Time: t0, Data: data}
	recs := []Record{&Meta{}, &Conn{ID: 1, Time: t0}, big, &Conn{ID: 2, Time: t0}}
	bin := encode(t, recs, WriterOptions{}, false)
	got, damage, err := readStream(t, bin, ReaderOptions{})
	if err != nil || len(damage) > 0 || len(got) != len(recs) || !bytes.Equal(got[2].(*Frame).Data, data) {
		t.Fatalf("read back %d records, %v, %v; want %d with the large frame intact", len(got), err, damage, len(recs))
	}
	blocks, _ := blockSpans(t, bin)
	if len(blocks) != 2 {
		t.Errorf("large record in %d blocks; want 2 (cut by size after the large record)", len(blocks))
	}
}

func TestWriteAllocs(t *testing.T) {
	w, err := NewWriter(io.Discard, WriterOptions{BlockSize: MaxBlockSize, BlockInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&Meta{})
	w.Write(&Response{Exchange: 1, Events: frame.JSON})
	fr := &Frame{Exchange: 1, Time: t0, Pre: []byte("\n"), Data: event("MODIFIED", 1, 1200)}
	for range 300 {
		w.Write(fr)
	}
	w.Flush() // keeps the buffers
	if n := testing.AllocsPerRun(200, func() { w.Write(fr) }); n != 0 {
		t.Errorf("Writer.Write(frame) allocates %v times; want 0", n)
	}
}

// TestWriterConcurrentBlocks: blocks compressed by several goroutines at
// once come out in block order, byte for byte what Inline writes, with
// the same index; a write error part way stops the rest.
func TestWriterConcurrentBlocks(t *testing.T) {
	recs := session(3000, 400, time.Millisecond)
	for _, bs := range []int{1, 700, 4096, 64 << 10} {
		opts := WriterOptions{BlockSize: bs}
		inline := opts
		inline.Inline = true
		got, want := encode(t, recs, opts, false), encode(t, recs, inline, false)
		if !bytes.Equal(got, want) {
			t.Errorf("BlockSize %d: background writer wrote %d bytes, Inline %d; want the same bytes", bs, len(got), len(want))
		}
	}
	for _, after := range []int{1, 2, 5, 17} {
		fw := &failWriter{after: after}
		w, err := NewWriter(fw, WriterOptions{BlockSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for _, r := range recs[:200] {
			if werr = w.Write(r); werr != nil {
				break
			}
		}
		if werr == nil {
			werr = w.Close()
		}
		if werr == nil || !strings.Contains(werr.Error(), "disk full") {
			t.Errorf("writer failing after %d writes: %v; want the disk full error", after, werr)
		}
		if fw.after != 0 {
			t.Errorf("writer failing after %d writes: %d writes left; want every write before the failure made", after, fw.after)
		}
		w.Close()
	}
}

// TestAppendRecordInPlace checks that a Frame encoded in place (its length
// guessed before its body is written) is framed exactly as through a
// scratch body, around every varint boundary of the length, where the
// guess is off and the body is moved.
func TestAppendRecordInPlace(t *testing.T) {
	for _, n := range []int{0, 1, 60, 70, 79, 80, 81, 100, 127, 128, 16_300, 16_330, 16_340, 16_383, 16_384, 2_097_100, 2_097_151, 2_097_152} {
		for _, red := range [][]int{nil, {3, 5}} {
			f := &Frame{Exchange: 7, Seq: 1 << 40, Time: 1795000000000000000, Offset: 1 << 33, Pre: []byte("\n"), Data: bytes.Repeat([]byte{'x'}, n), Redacted: red}
			body, err := appendBody(nil, f)
			if err != nil {
				t.Fatal(err)
			}
			want := binary.AppendUvarint([]byte{byte(TypeFrame)}, uint64(len(body)))
			want = append(want, body...)
			prefix := []byte("previous records")
			got, _, err := appendRecord(bytes.Clone(prefix), nil, f, nil)
			if err != nil {
				t.Fatalf("data %d: %v", n, err)
			}
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Fatalf("data %d, redacted %v: record of %d bytes differs from the scratch encoding (%d bytes)", n, red, len(got)-len(prefix), len(want))
			}
			recs, _, err := decodeRecords(got[len(prefix):], nil, nil, false, false)
			if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].(*Frame).Data, f.Data) {
				t.Fatalf("data %d: decoded %d records, %v", n, len(recs), err)
			}
			// The same in a time chain (a version 3 block), from no time.
			body, _ = appendBodyChain(nil, f, ptr(int64(0)))
			want = append(binary.AppendUvarint([]byte{byte(TypeFrame)}, uint64(len(body))), body...)
			if got, _, _ := appendRecord(nil, nil, f, ptr(int64(0))); !bytes.Equal(got, want) {
				t.Fatalf("data %d, redacted %v, time chain: record of %d bytes differs from the scratch encoding (%d bytes)", n, red, len(got), len(want))
			}
			if recs, _, err := decodeRecords(want, nil, nil, false, true); err != nil || len(recs) != 1 || recs[0].(*Frame).Time != f.Time {
				t.Fatalf("data %d, time chain: decoded %d records, %v", n, len(recs), err)
			}
		}
	}
}

// TestScannerCache: an exchange Scanner keeps its blocks in the File's
// cache, or in the one WithCache gives it (shared by the Scanners given
// it, the File's left alone), or in none; every way reads the same
// records.
func TestScannerCache(t *testing.T) {
	recs := session(400, 2000, time.Millisecond)
	data := encode(t, recs, WriterOptions{BlockSize: 64 << 10}, false)
	read := func(f *File, c *BlockCache, own bool) []Record {
		t.Helper()
		sc := f.ExchangeRecords(1)
		if !own {
			sc = sc.WithCache(c)
		}
		got, damage, err := drain(t, sc)
		if err != nil || len(damage) > 0 {
			t.Fatalf("ExchangeRecords(1): %v, %v", err, damage)
		}
		return got
	}
	f := open(t, data)
	if len(f.Index().Blocks) < 4 {
		t.Fatalf("%d blocks; want several", len(f.Index().Blocks))
	}
	want := read(f, nil, true)
	if f.CacheBytes() == 0 {
		t.Error("ExchangeRecords left the File's cache empty")
	}

	f = open(t, data)
	if got := read(f, nil, false); !sameRecords(got, want) {
		t.Errorf("WithCache(nil):\n%s", diffRecords(got, want))
	}
	if n := f.CacheBytes(); n != 0 {
		t.Errorf("WithCache(nil): the File's cache holds %d bytes; want 0", n)
	}

	f = open(t, data)
	c := NewBlockCache(1<<20, 0)
	if got := read(f, c, false); !sameRecords(got, want) {
		t.Errorf("WithCache(c):\n%s", diffRecords(got, want))
	}
	held := c.Bytes()
	if held == 0 || held > 1<<20 {
		t.Errorf("WithCache(c): c holds %d bytes; want some, at most its 1 MiB", held)
	}
	if n := f.CacheBytes(); n != 0 {
		t.Errorf("WithCache(c): the File's cache holds %d bytes; want 0", n)
	}
	// A second Scanner of c reads the same through it, and c keeps each
	// block once.
	if got := read(f, c, false); !sameRecords(got, want) || c.Bytes() != held {
		t.Errorf("second Scanner of c: same records %v, c holds %d bytes (was %d)", sameRecords(got, want), c.Bytes(), held)
	}
}
