package export

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// script turns fuzz bytes into session records: an opcode byte picks the
// record type, the bytes after it its fields (small IDs, so that records
// name each other; offsets, sizes and times as varints, any value). The
// records are what a damaged or hostile session may hold once its blocks
// check out: nothing guarantees they are consistent.
func script(data []byte) []formats.Record {
	recs := []formats.Record{&formats.Meta{Tool: "fuzz"}}
	rd := bytes.NewReader(data)
	num := func() int64 {
		v, err := binary.ReadVarint(rd)
		if err != nil {
			return 0
		}
		return v
	}
	small := func() byte {
		b, _ := rd.ReadByte()
		return b % 4
	}
	bytesOf := func() []byte {
		n := int(small()) * 7
		b := make([]byte, n)
		io.ReadFull(rd, b)
		return b
	}
	protos := []string{"http/1.1", "h2", "tls", "h2c"}
	for rd.Len() > 0 {
		op, _ := rd.ReadByte()
		switch op % 10 {
		case 0:
			c := small()
			recs = append(recs, &formats.Conn{ID: uint64(c), Time: num(), Client: fmt.Sprintf("10.0.0.%d:4%d", c, c), Server: "10.0.0.9:80", Proto: protos[small()], Midstream: small() == 0})
		case 1:
			x := int64(small())
			recs = append(recs, &formats.Request{Exchange: x, Conn: uint64(small()), Stream: uint32(small()), Time: num(), Method: "GET", Target: "/api/v1/pods?watch=1",
				Proto: "HTTP/1.1", Header: []formats.Header{{Name: "Transfer-Encoding", Value: "chunked"}, {Name: "Authorization", Redacted: true, Len: 9}}, Missing: small() == 0})
		case 2:
			recs = append(recs, &formats.Response{Exchange: int64(small()), Time: num(), Proto: "HTTP/1.1", Status: int(num()), Framing: formats.BodyFraming(small() + 1),
				Encoding: []string{"", "gzip", "deflate", "br"}[small()], Events: frame.Format(small()), Midstream: small() == 0,
				Header: []formats.Header{{Name: "Content-Length", Value: "12"}, {Name: "Content-Type", Value: "application/json"}}})
		case 3:
			recs = append(recs, &formats.Frame{Exchange: int64(small()), Seq: num(), Time: num(), Offset: num(), Pre: bytesOf(), Data: bytesOf()})
		case 4:
			recs = append(recs, &formats.Body{Exchange: int64(small()), Dir: formats.Direction(small() % 2), Time: num(), Offset: num(), Data: bytesOf()})
		case 5:
			recs = append(recs, &formats.Chunk{Exchange: int64(small()), Time: num(), Offset: num(), Size: num(), Ext: string(bytesOf())})
		case 6:
			recs = append(recs, &formats.End{Exchange: int64(small()), Dir: formats.Direction(small() % 2), Time: num(), Status: formats.EndStatus(small()), Size: num(), Tail: bytesOf(),
				Note: "RST_STREAM CANCEL from the server", Trailer: []formats.Header{{Name: "X", Value: string(bytesOf())}}})
		case 7:
			recs = append(recs, &formats.ConnEnd{Conn: uint64(small()), Time: num(), Reason: formats.ConnEndReason(small())})
		case 8:
			recs = append(recs, &formats.Anomaly{Conn: uint64(small()), Exchange: int64(small()) - 1, Time: num(), Kind: formats.AnomalyGap, Offset: num(), Bytes: num()})
		case 9:
			recs = append(recs, &formats.TLS{Conn: uint64(small()), Time: num(), Version: 0x0304, ALPN: []string{"h2", "http/1.1", "", "x"}[small()], Decrypted: small() != 0})
		}
	}
	return append(recs, &formats.Summary{})
}

// sessionOf writes records into a session file in memory.
func sessionOf(t testing.TB, recs []formats.Record) *formats.File {
	var b bytes.Buffer
	w, err := formats.NewWriter(&b, formats.WriterOptions{Inline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Skipf("the writer refuses the record: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := formats.OpenReaderAt(bytes.NewReader(b.Bytes()), int64(b.Len()), formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fuzzSeeds are scripts of ordinary sessions: an HTTP/1.1 chunked watch,
// an HTTP/2 stream reset, a body with a gap.
var fuzzSeeds = [][]byte{
	{0, 0, 2, 2, 1, 0, 0, 0, 4, 1, 1, 2, 2, 0, 6, 1, 2, 1, 1, 1, 1, 3, 0, 2, 0, 20, 1, 2, 5, 0, 22, 0, 24, 0, 6, 0, 1, 30, 0, 24, 0, 0, 7, 0, 40, 0},
	{0, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1, 2, 1, 1, 4, 2, 1, 2, 200, 3, 1, 1, 1, 1, 3, 1, 2, 5, 0, 3, 1, 4, 0, 30, 0, 6, 1, 1, 9, 3, 0, 0, 0},
	{0, 2, 2, 0, 1, 2, 2, 0, 2, 2, 2, 3, 200, 2, 0, 0, 1, 4, 2, 1, 5, 0, 2, 4, 2, 1, 9, 40, 2, 6, 2, 1, 11, 1, 60, 0, 0},
}

// FuzzExport: every exporter reads any records a session may hold without
// panicking or looping.
func FuzzExport(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := sessionOf(t, script(data))
		JSONL(io.Discard, file, JSONLOptions{Data: true})
		HAR(io.Discard, file, HAROptions{})
		Pcap(io.Discard, file, PcapOptions{MaxSegment: 100})
		_ = NewSession(file)
	})
}

// TestWriteFuzzSeeds writes the seed corpus (with -update).
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/FuzzExport")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzExport")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
