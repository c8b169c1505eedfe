package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// t0 is the capture time sessions in tests start at.
const t0 = int64(1_795_000_000_123_456_789)

// fullRecords returns one record of every type with every field set, plus
// variants with extreme and empty values.
func fullRecords() []Record {
	hs := []Header{
		{Name: "Accept", Value: "application/json"},
		{Name: "Authorization", Redacted: true, Len: 812},
		{Name: "X-Ünïcode", Value: "ß\x00\xff"},
	}
	return []Record{
		&Meta{Tool: "wtrace v0.1.0", Recorded: 1_795_000_100_000_000_000, Host: "laptop", Source: "pcap",
			Description: "pcap capture.pcap", CaptureFile: "capture.pcap", CaptureSHA256: "ab12cd",
			Redaction: "default", Labels: map[string]string{"b": "2", "a": "1", "": "empty key"}},
		&Meta{},
		&Conn{ID: 7, Time: t0, Client: "127.0.0.1:53412", Server: "[::1]:6443", Proto: "http/1.1", Midstream: true},
		&Conn{ID: math.MaxUint64, Time: math.MinInt64},
		&TLS{Conn: 7, Time: t0 + 1, Version: 0x0304, Cipher: 0x1301, ALPN: "h2", SNI: "kubernetes", Decrypted: true, Note: "key from keylog"},
		&TLS{Version: 0xffff, Cipher: 0xffff},
		&Request{Exchange: 3, Conn: 7, Stream: 1<<32 - 1, Time: t0 + 2, Method: "GET",
			Target: "/api/v1/namespaces/demo/configmaps?watch=true", Proto: "HTTP/1.1", Header: hs, Missing: true},
		&Request{Exchange: math.MinInt64},
		&Response{Exchange: 3, Time: t0 + 3, Proto: "HTTP/1.1", Status: 200, Reason: "OK", Header: hs[:1],
			Framing: FramingChunked, Encoding: "gzip", Events: frame.JSON, Midstream: true},
		&Response{Exchange: 4, Status: -1, Framing: 255, Events: 255},
		&Frame{Exchange: 3, Seq: 41, Time: t0 + 4, Offset: 1 << 40, Pre: []byte("\n"),
			Data: []byte(`{"type":"ADDED","object":{"kind":"ConfigMap"}}`), Redacted: []int{5, 0, 1 << 40}},
		&Frame{Exchange: -1, Seq: -1, Offset: -1},
		&Body{Exchange: 3, Dir: ServerToClient, Time: t0 + 5, Offset: 77, Data: []byte{0, 1, 2, 0xff}},
		&Body{Dir: 200},
		&Chunk{Exchange: 3, Time: t0 + 6, Offset: 100, Size: 32768, Ext: "name=value"},
		&Chunk{},
		&End{Exchange: 3, Dir: ServerToClient, Time: t0 + 7, Status: EndGap, Size: 99999, Tail: []byte("{\"partial"), Redactions: []Redaction{{Reason: RedactSecretValue, Object: "Secret demo/db", Fields: "data.password", Count: 2, Bytes: 40}, {Reason: 255, Count: -1}},
			Trailer: []Header{{Name: "Grpc-Status", Value: "0"}}, Note: "capture lost 100 bytes", LastExt: `n=1;note="last"`},
		&End{Status: 255},
		&ConnEnd{Conn: 7, Time: t0 + 8, Reason: ConnRST, ClientBytes: 1234, ServerBytes: 1 << 50, LostBytes: 5},
		&ConnEnd{Reason: 255, ClientBytes: math.MinInt64},
		&Anomaly{Conn: 7, Exchange: 3, Dir: ServerToClient, Time: t0 + 9, Kind: AnomalyGap, Offset: 4096, Bytes: 1448, Message: "gap of 1448 bytes"},
		&Anomaly{Exchange: NoExchange, Kind: 255},
		&Summary{Time: t0 + 10, Packets: 416, Bytes: 279000, Conns: 1, Exchanges: 2, Events: 200, Anomalies: 1,
			CaptureSHA256: "ffee", Note: "done", CaptureXXH64: "3672aefa3346a6e3"},
		&Summary{Time: math.MaxInt64, Packets: math.MaxInt64},
	}
}

// event returns a realistic JSON watch event of about size bytes.
func event(typ string, i int, size int) []byte {
	head := fmt.Sprintf(`{"type":%q,"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","uid":"5f0c%08x-1c2d-4e5f-8a9b-0c1d2e3f%04x","resourceVersion":"%d","creationTimestamp":"2026-11-21T10:00:00Z","labels":{"app":"demo","tier":"backend"}},"data":{"payload":"`,
		typ, i%50, i*7919, i%9973, 100000+i)
	tail := `"}}}`
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	n := max(size-len(head)-len(tail), 0)
	body := make([]byte, n)
	for j := range body {
		body[j] = alphabet[rng.IntN(len(alphabet))]
	}
	return append(append([]byte(head), body...), tail...)
}

// protoEvent returns a protobuf metav1.WatchEvent with type typ.
func protoEvent(typ string, obj []byte) []byte {
	b := []byte{0x0a, byte(len(typ))}
	b = append(b, typ...)
	b = append(b, 0x12)
	b = binary.AppendUvarint(b, uint64(len(obj)+2))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(obj)))
	return append(b, obj...)
}

var eventTypes = []string{"ADDED", "MODIFIED", "MODIFIED", "DELETED", "BOOKMARK"}

// session returns a deterministic session: a JSON watch and an opaque LIST
// on connection 0, a protobuf watch on connection 1, anomalies, a Summary.
// Frame times advance by step.
func session(frames, size int, step time.Duration) []Record {
	recs := []Record{
		&Meta{Tool: "wtrace test", Recorded: 1_795_000_000_000_000_000, Host: "test", Source: "pcap",
			Description: "pcap test.pcap", CaptureFile: "test.pcap", Redaction: "default", Labels: map[string]string{"scenario": "test"}},
		&Conn{ID: 0, Time: t0, Client: "127.0.0.1:50000", Server: "127.0.0.1:8001", Proto: "http/1.1"},
		&Conn{ID: 1, Time: t0 + 1, Client: "127.0.0.1:50001", Server: "127.0.0.1:8001", Proto: "http/1.1"},
		&Request{Exchange: 0, Conn: 0, Time: t0 + 2, Method: "GET", Target: "/api/v1/namespaces/demo/configmaps", Proto: "HTTP/1.1",
			Header: []Header{{Name: "Accept", Value: "application/json"}, {Name: "Authorization", Redacted: true, Len: 900}}},
		&Response{Exchange: 0, Time: t0 + 3, Proto: "HTTP/1.1", Status: 200, Reason: "OK", Framing: FramingChunked,
			Header: []Header{{Name: "Content-Type", Value: "application/json"}}},
		&Chunk{Exchange: 0, Time: t0 + 3, Offset: 0, Size: 300},
		&Body{Exchange: 0, Dir: ServerToClient, Time: t0 + 3, Offset: 0, Data: event("LIST", 0, 300)},
		&End{Exchange: 0, Dir: ServerToClient, Time: t0 + 4, Status: EndComplete, Size: 300},
		&Request{Exchange: 1, Conn: 0, Time: t0 + 5, Method: "GET", Target: "/api/v1/namespaces/demo/configmaps?watch=true", Proto: "HTTP/1.1"},
		&Response{Exchange: 1, Time: t0 + 6, Proto: "HTTP/1.1", Status: 200, Reason: "OK", Framing: FramingChunked, Events: frame.JSON},
		&Request{Exchange: 2, Conn: 1, Time: t0 + 7, Method: "GET", Target: "/api/v1/configmaps?watch=1", Proto: "HTTP/1.1"},
		&Response{Exchange: 2, Time: t0 + 8, Proto: "HTTP/1.1", Status: 200, Framing: FramingChunked, Events: frame.Protobuf},
	}
	var off1, off2 int64
	for i := range frames {
		tm := t0 + 10 + int64(i)*int64(step)
		typ := eventTypes[i%len(eventTypes)]
		if i%2 == 0 {
			data := event(typ, i, size)
			recs = append(recs,
				&Chunk{Exchange: 1, Time: tm, Offset: off1, Size: int64(len(data) + 1)},
				&Frame{Exchange: 1, Seq: int64(i / 2), Time: tm, Offset: off1, Pre: []byte("\n"), Data: data})
			off1 += int64(len(data) + 1)
		} else {
			data := protoEvent(typ, event(typ, i, size))
			pre := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
			recs = append(recs, &Frame{Exchange: 2, Seq: int64(i / 2), Time: tm, Offset: off2, Pre: pre, Data: data})
			off2 += int64(len(data) + 4)
		}
		if i == frames/2 {
			recs = append(recs, &Anomaly{Conn: 1, Exchange: 2, Dir: ServerToClient, Time: tm, Kind: AnomalyGap, Offset: off2, Bytes: 10, Message: "gap"},
				&Anomaly{Conn: 0, Exchange: NoExchange, Time: tm, Kind: AnomalyUnknown, Message: "not http"})
		}
	}
	end := t0 + 20 + int64(frames)*int64(step)
	recs = append(recs,
		&End{Exchange: 1, Dir: ServerToClient, Time: end, Status: EndComplete, Size: off1, Tail: []byte("\n")},
		&End{Exchange: 2, Dir: ServerToClient, Time: end, Status: EndTruncated, Size: off2},
		&ConnEnd{Conn: 0, Time: end + 1, Reason: ConnFIN, ClientBytes: 500, ServerBytes: off1},
		&ConnEnd{Conn: 1, Time: end + 1, Reason: ConnCaptureEnd, ServerBytes: off2},
		&Summary{Time: end + 1, Packets: 100, Bytes: 1 << 20, Conns: 2, Exchanges: 3, Events: int64(frames), Anomalies: 2},
	)
	return recs
}

// encode writes recs to a new file, closing it unless noClose.
func encode(t testing.TB, recs []Record, opts WriterOptions, noClose bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatalf("Write(record %d %T): %v", i, r, err)
		}
	}
	if noClose {
		if err := w.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	} else if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.Bytes()
}

// recordSource is a Reader or a Scanner.
type recordSource interface{ Next() (Record, error) }

// drain reads src to io.EOF (or a non-damage error), returning the records
// and the damage seen.
func drain(t testing.TB, src recordSource) (recs []Record, damage []*DamageError, err error) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 1_000_000 {
			t.Fatalf("drain: no end after %d calls", i)
		}
		r, err := src.Next()
		var d *DamageError
		switch {
		case err == nil:
			recs = append(recs, r)
		case errors.As(err, &d):
			damage = append(damage, d)
			if len(damage) > 100000 {
				t.Fatalf("drain: too many damage errors")
			}
		case err == io.EOF:
			return recs, damage, nil
		default:
			return recs, damage, err
		}
	}
}

// readStream reads data with a Reader.
func readStream(t testing.TB, data []byte, opts ReaderOptions) ([]Record, []*DamageError, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), opts)
	if err != nil {
		return nil, nil, err
	}
	return drain(t, r)
}

// blockSpans returns the offsets and record counts of the data blocks of a
// well-formed file, and the offset of its index block (or len(data)).
func blockSpans(t testing.TB, data []byte) (blocks []BlockInfo, index int64) {
	t.Helper()
	br := newBlockReader(bytes.NewReader(data[fileHeaderSize:]), fileHeaderSize, true)
	for {
		blk, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("blockSpans: %v", err)
		}
		blocks = append(blocks, BlockInfo{Offset: blk.off, Size: blk.hdr.size(), Records: blk.hdr.records, First: blk.hdr.first, Last: blk.hdr.last})
	}
	if br.index >= 0 {
		return blocks, br.index
	}
	return blocks, int64(len(data))
}

// oneByteReader feeds one byte per Read.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}
