package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// t0 is the capture time synthetic sessions start at.
const t0 = int64(1_800_000_000_000_000_000)

// synthExchange describes one exchange of a synthetic session.
type synthExchange struct {
	method, target string
	status         int
	header         []formats.Header
	framing        formats.BodyFraming
	encoding       string
	events         frame.Format
	bodies         [][]byte      // opaque body pieces, as stored (encoded)
	frames         [][]byte      // event data; Pre is "\n" for all but the first
	gap            time.Duration // between frames (and body pieces); default 100ms
	chunked        bool          // one Chunk record per piece / frame
	end            formats.EndStatus
	noEnd          bool // the file ends inside the response
	tail           []byte
}

// writeSession writes a session of the given exchanges, each on its own
// connection, one second apart, and returns its path.
func writeSession(t testing.TB, exs ...synthExchange) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.wt")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(r formats.Record) {
		t.Helper()
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	must(&formats.Meta{Tool: "wtrace test", Source: "synthetic"})
	for i, x := range exs {
		id := int64(i)
		at := t0 + id*int64(time.Second)
		gap := int64(x.gap)
		if gap == 0 {
			gap = int64(100 * time.Millisecond)
		}
		must(&formats.Conn{ID: uint64(i), Time: at, Client: "127.0.0.1:50000", Server: "127.0.0.1:8001", Proto: "http/1.1"})
		method := x.method
		if method == "" {
			method = "GET"
		}
		must(&formats.Request{Exchange: id, Conn: uint64(i), Time: at, Method: method, Target: x.target, Proto: "HTTP/1.1"})
		must(&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: at})
		status := x.status
		if status == 0 {
			status = 200
		}
		framing := x.framing
		if framing == 0 && (x.chunked || len(x.frames) > 0) {
			framing = formats.FramingChunked
		}
		resp := at + int64(time.Millisecond)
		must(&formats.Response{Exchange: id, Time: resp, Proto: "HTTP/1.1", Status: status, Header: x.header,
			Framing: framing, Encoding: x.encoding, Events: x.events})
		tm := resp
		var off int64
		for _, b := range x.bodies {
			tm += gap
			must(&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: tm, Offset: off, Data: b})
			if x.chunked {
				must(&formats.Chunk{Exchange: id, Time: tm, Offset: off, Size: int64(len(b))})
			}
			off += int64(len(b))
		}
		for j, d := range x.frames {
			tm += gap
			var pre []byte
			if j > 0 {
				pre = []byte("\n")
			}
			must(&formats.Frame{Exchange: id, Seq: int64(j), Time: tm, Offset: off, Pre: pre, Data: d})
			if x.chunked {
				must(&formats.Chunk{Exchange: id, Time: tm, Offset: off, Size: int64(len(pre) + len(d))})
			}
			off += int64(len(pre) + len(d))
		}
		if x.noEnd {
			continue
		}
		tm += gap
		if len(x.tail) > 0 && x.chunked {
			must(&formats.Chunk{Exchange: id, Time: tm, Offset: off, Size: int64(len(x.tail))})
		}
		must(&formats.End{Exchange: id, Dir: formats.ServerToClient, Time: tm, Status: x.end, Size: off + int64(len(x.tail)), Tail: x.tail})
	}
	must(&formats.Summary{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// jsonHeader is a recorded JSON response's header fields.
func jsonHeader(extra ...formats.Header) []formats.Header {
	return append([]formats.Header{
		{Name: "Audit-Id", Value: "0d4c7d5e-0000-4000-8000-000000000000"},
		{Name: "Cache-Control", Value: "no-cache, private"},
		{Name: "Content-Type", Value: "application/json"},
		{Name: "Date", Value: "Sat, 21 Nov 2026 12:00:00 GMT"},
	}, extra...)
}

// TestEndBookmarkAsRecorded: the initial-events-end bookmark a synthesized
// streaming list ends with is byte for byte the one kube-apiserver v1.33
// sent in the recorded streaming list (with its list blueprint
// annotation).
func TestEndBookmarkAsRecorded(t *testing.T) {
	path := corpusSession(t, "multi-watch")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "sendInitialEvents=true")
	for _, e := range sessionEvents(t, f, id) {
		if e.meta.Type != "BOOKMARK" || !e.meta.InitialEventsEnd {
			continue
		}
		b, err := codec.EndBookmark(f.Index().Exchanges[id].Response.Events, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, e.meta.ResourceVersion)
		if err != nil || !bytes.Equal(b, e.data) {
			t.Fatalf("EndBookmark = %s, %v; recorded %s", b, err, e.data)
		}
		return
	}
	t.Fatal("no initial-events-end bookmark in the recorded streaming list")
}
