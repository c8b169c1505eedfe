package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// wirePiece is what one side wrote (or read) in one call, with a capture
// time.
type wirePiece struct {
	dir  formats.Direction
	data []byte
	t    int64
}

// h2Base is the capture time of the first piece; pieces are 1µs apart.
const h2Base = int64(1_795_262_793_000_000_000)

// wireConn records the server's side of a connection: what it reads is
// client→server, what it writes server→client, in the order it happened
// (a capture taken at the server).
type wireConn struct {
	net.Conn
	mu     sync.Mutex
	pieces []wirePiece
}

func (c *wireConn) add(dir formats.Direction, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pieces = append(c.pieces, wirePiece{dir: dir, data: bytes.Clone(p), t: h2Base + int64(len(c.pieces))*1000})
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.add(formats.ClientToServer, p[:n])
	}
	return n, err
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.add(formats.ServerToClient, p)
	return c.Conn.Write(p)
}

func (c *wireConn) recorded() []wirePiece {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]wirePiece(nil), c.pieces...)
}

type wireListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*wireConn
}

func (l *wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wc := &wireConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, wc)
	l.mu.Unlock()
	return wc, nil
}

// The token the test clients send; it must never reach a record.
const h2Token = "corpus-admin-token-0123456789abcdef"

// bigHeader is a header value whose block needs CONTINUATION frames (its
// Huffman code is about 6 bits a character).
var bigHeader = func() string {
	b := pseudoRandom(30000, 3)
	for i := range b {
		b[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[b[i]%64]
	}
	return string(b)
}()

// h2Want is what one exchange of the test session must be recorded as.
type h2Want struct {
	method, target string
	reqBody        []byte
	status         int
	ctype          string
	events         [][]byte // watch events' Data, in order
	format         frame.Format
	body           []byte // an opaque body
	trailer        map[string]string
	end            formats.EndStatus
	note           string // a substring of the response End's note
}

// jsonEvent returns a watch event about a ConfigMap, padded to about pad
// bytes.
func jsonEvent(typ string, i, pad int) []byte {
	return fmt.Appendf(nil, `{"type":%q,"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"k":%q}}}`,
		typ, i, 1000+i, strings.Repeat(string(rune('a'+i%26)), pad))
}

// pbEvent returns a protobuf watch event (the frame payload) about a
// ConfigMap.
func pbEvent(typ string, i, pad int) []byte {
	var meta []byte
	meta = protowire.AppendTag(meta, 1, protowire.BytesType)
	meta = protowire.AppendString(meta, fmt.Sprintf("cm-%d", i))
	meta = protowire.AppendTag(meta, 3, protowire.BytesType)
	meta = protowire.AppendString(meta, "demo")
	meta = protowire.AppendTag(meta, 6, protowire.BytesType)
	meta = protowire.AppendString(meta, fmt.Sprint(2000+i))
	var cm []byte
	cm = protowire.AppendTag(cm, 1, protowire.BytesType)
	cm = protowire.AppendBytes(cm, meta)
	cm = protowire.AppendTag(cm, 4, protowire.BytesType) // binaryData-ish filler
	cm = protowire.AppendBytes(cm, bytes.Repeat([]byte{byte(i)}, pad))
	return frame.WatchEvent(frame.Protobuf, typ, "v1", "ConfigMap", cm)
}

func pseudoRandom(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// runH2Session runs a real Go HTTP/2 client against a real Go HTTP/2
// server, both with prior knowledge over loopback TCP, and returns what
// the server's connection carried and what each exchange must be recorded
// as, by method and request target.
func runH2Session(t testing.TB) ([]wirePiece, map[string]*h2Want) {
	want := map[string]*h2Want{}
	add := func(w *h2Want) { want[w.method+" "+w.target] = w }

	// A JSON watch: several events per DATA frame, a large event across
	// several DATA frames, and trailers.
	jsonWatch := &h2Want{method: "GET", target: "/api/v1/namespaces/demo/configmaps?watch=true", status: 200,
		ctype: "application/json", format: frame.JSON, trailer: map[string]string{"x-watch-end": "done"}}
	for i := range 9 {
		jsonWatch.events = append(jsonWatch.events, jsonEvent("ADDED", i, 50+i*20))
	}
	jsonWatch.events = append(jsonWatch.events, jsonEvent("MODIFIED", 9, 40000))
	jsonWatch.events = append(jsonWatch.events, jsonEvent("DELETED", 10, 10))
	add(jsonWatch)

	// A protobuf watch: events split across flushes.
	pbWatch := &h2Want{method: "GET", target: "/api/v1/namespaces/demo/configmaps?watch=true&pb=1", status: 200,
		ctype: "application/vnd.kubernetes.protobuf;stream=watch", format: frame.Protobuf}
	for i := range 7 {
		pbWatch.events = append(pbWatch.events, pbEvent("MODIFIED", i, 100+i*3000))
	}
	add(pbWatch)

	// An opaque protobuf body (a LIST).
	add(&h2Want{method: "GET", target: "/api/v1/namespaces/demo/configmaps", status: 200,
		ctype: "application/vnd.kubernetes.protobuf", body: pseudoRandom(50000, 1)})

	// A POST with a body larger than a frame, and a header block larger
	// than a frame (CONTINUATION).
	add(&h2Want{method: "POST", target: "/api/v1/namespaces/demo/configmaps", reqBody: pseudoRandom(40000, 2), status: 201,
		ctype: "application/json", body: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"posted"}}`)})

	// A watch the client cancels after two events (RST_STREAM CANCEL).
	cancelled := &h2Want{method: "GET", target: "/api/v1/namespaces/demo/events?watch=true", status: 200,
		ctype: "application/json", format: frame.JSON, end: formats.EndReset, note: "RST_STREAM CANCEL from the client",
		events: [][]byte{jsonEvent("ADDED", 20, 30), jsonEvent("ADDED", 21, 30)}}
	add(cancelled)

	// Two watches whose events alternate on the wire.
	peers := []string{"a", "b"}
	for _, p := range peers {
		w := &h2Want{method: "GET", target: "/api/v1/namespaces/" + p + "/pods?watch=true", status: 200,
			ctype: "application/json", format: frame.JSON}
		for i := range 4 {
			w.events = append(w.events, jsonEvent("ADDED", 30+i, 20+len(p)))
		}
		add(w)
	}
	turn := map[string]chan struct{}{"a": make(chan struct{}, 1), "b": make(chan struct{}, 1)}
	turn["a"] <- struct{}{}

	var handlers sync.WaitGroup
	h := func(rw http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		w := want[r.Method+" "+r.URL.RequestURI()]
		if w == nil {
			http.Error(rw, "no such test", 404)
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("%s: reading the request body: %v", w.target, err)
		}
		rw.Header().Set("Content-Type", w.ctype)
		for k := range w.trailer {
			rw.Header().Add("Trailer", k)
		}
		rw.WriteHeader(w.status)
		fl := rw.(http.Flusher)
		switch {
		case w == jsonWatch:
			for i, ev := range w.events {
				rw.Write(ev)
				rw.Write([]byte("\n"))
				if i%3 == 2 || len(ev) > 1000 {
					fl.Flush()
				}
			}
		case w == pbWatch:
			for i, ev := range w.events {
				var l [4]byte
				binary.BigEndian.PutUint32(l[:], uint32(len(ev)))
				rw.Write(l[:])
				// Split the event across two flushes.
				rw.Write(ev[:len(ev)/2])
				fl.Flush()
				rw.Write(ev[len(ev)/2:])
				if i%2 == 1 {
					fl.Flush()
				}
			}
		case w == cancelled:
			for _, ev := range w.events {
				rw.Write(ev)
				rw.Write([]byte("\n"))
			}
			fl.Flush()
			<-r.Context().Done()
			return
		case strings.HasSuffix(w.target, "/pods?watch=true"):
			me := strings.Split(w.target, "/")[4]
			other := "a"
			if me == "a" {
				other = "b"
			}
			for _, ev := range w.events {
				<-turn[me]
				rw.Write(ev)
				rw.Write([]byte("\n"))
				fl.Flush()
				turn[other] <- struct{}{}
			}
		default:
			rw.Write(w.body)
		}
		for k, v := range w.trailer {
			rw.Header().Set(k, v)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := &wireListener{Listener: ln}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:   http.HandlerFunc(h),
		Protocols: &protos,
		// 16 KiB frames, so bodies and header blocks span several frames;
		// larger HPACK tables both ways, so both encoders send a dynamic
		// table size update.
		HTTP2: &http.HTTP2Config{MaxReadFrameSize: 16384, MaxDecoderHeaderTableSize: 8192, MaxEncoderHeaderTableSize: 16384},
	}
	go srv.Serve(wl)
	tr := &http.Transport{
		Protocols: &protos,
		HTTP2:     &http.HTTP2Config{MaxReadFrameSize: 16384, MaxDecoderHeaderTableSize: 16384, MaxEncoderHeaderTableSize: 8192},
	}
	// One ClientConn, not the Transport's pool: the test is about streams
	// interleaved on one connection, and the pool may dial more when
	// requests start together (6 connections once under -race).
	cc, err := tr.NewClientConn(context.Background(), "http", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: cc}
	base := "http://" + ln.Addr().String()

	do := func(ctx context.Context, w *h2Want) (*http.Response, error) {
		var body io.Reader
		if w.reqBody != nil {
			body = bytes.NewReader(w.reqBody)
		}
		req, err := http.NewRequestWithContext(ctx, w.method, base+w.target, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+h2Token)
		if w.method == "POST" {
			req.Header.Set("X-Big", bigHeader)
		}
		return client.Do(req)
	}
	get := func(w *h2Want) {
		resp, err := do(context.Background(), w)
		if err != nil {
			t.Errorf("%s %s: %v", w.method, w.target, err)
			return
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Errorf("%s %s: %v", w.method, w.target, err)
		}
	}

	// One request first, so that the SETTINGS exchange is done before the streams.
	get(want["GET /api/v1/namespaces/demo/configmaps"])
	var wg sync.WaitGroup
	for _, target := range []string{jsonWatch.target, pbWatch.target, "/api/v1/namespaces/a/pods?watch=true", "/api/v1/namespaces/b/pods?watch=true"} {
		wg.Go(func() { get(want["GET "+target]) })
	}
	wg.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := do(ctx, cancelled)
		if err != nil {
			t.Errorf("%s: %v", cancelled.target, err)
			return
		}
		br := bufio.NewReader(resp.Body)
		for range cancelled.events {
			if _, err := br.ReadBytes('\n'); err != nil {
				t.Errorf("%s: %v", cancelled.target, err)
			}
		}
		cancel()
		resp.Body.Close()
	})
	wg.Wait()
	get(want["POST /api/v1/namespaces/demo/configmaps"])
	cc.Close()
	handlers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)

	wl.mu.Lock()
	defer wl.mu.Unlock()
	if len(wl.conns) != 1 {
		t.Fatalf("the client opened %d connections; want 1", len(wl.conns))
	}
	// Wait until the server has read the client's close.
	c := wl.conns[0]
	return c.recorded(), want
}

var h2Once struct {
	sync.Once
	pieces []wirePiece
	want   map[string]*h2Want
}

// h2Session returns the recorded test session (run once per test binary).
func h2Session(t testing.TB) ([]wirePiece, map[string]*h2Want) {
	h2Once.Do(func() { h2Once.pieces, h2Once.want = runH2Session(t) })
	if h2Once.pieces == nil {
		t.Fatal("no HTTP/2 session recorded")
	}
	return h2Once.pieces, h2Once.want
}

// feedH2 feeds pieces to a new h2Conn, each cut by split (nil: as
// recorded), then ends the connection like the Recorder does after both
// FINs.
func feedH2(pieces []wirePiece, split func(p []byte) [][]byte) []formats.Record {
	sink := &memSink{}
	s := newSession(sink, true)
	c := newH2Conn(s, 0)
	var end int64
	for _, p := range pieces {
		end = p.t
		if split == nil {
			c.data(p.dir, p.data, p.t)
			continue
		}
		for _, q := range split(p.data) {
			c.data(p.dir, q, p.t)
		}
	}
	c.fin(formats.ClientToServer, end)
	c.fin(formats.ServerToClient, end)
	c.finish(formats.EndComplete, end)
	return sink.recs
}

func splitBytes(p []byte) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i : i+1]
	}
	return out
}

func splitRandom(seed uint64) func(p []byte) [][]byte {
	r := rand.New(rand.NewPCG(seed, 2))
	return func(p []byte) [][]byte {
		var out [][]byte
		for len(p) > 0 {
			n := min(len(p), 1+r.IntN(3000))
			if r.IntN(4) == 0 {
				n = min(len(p), 1+r.IntN(9))
			}
			out = append(out, p[:n])
			p = p[n:]
		}
		return out
	}
}

// h2View is one exchange as its records tell it.
type h2View struct {
	req     *formats.Request
	reqBody []byte
	reqEnd  *formats.End
	resp    *formats.Response
	frames  []*formats.Frame
	body    []byte
	chunks  []*formats.Chunk
	end     *formats.End
}

// viewExchanges groups records by exchange, checking the order the
// session model promises: Request first, Response before the body, End
// last in its direction.
func viewExchanges(t testing.TB, recs []formats.Record) map[int64]*h2View {
	t.Helper()
	v := map[int64]*h2View{}
	get := func(x int64) *h2View {
		e := v[x]
		if e == nil {
			t.Fatalf("record for exchange %d before its Request", x)
		}
		return e
	}
	for _, r := range recs {
		switch r := r.(type) {
		case *formats.Request:
			if v[r.Exchange] != nil {
				t.Fatalf("two Requests for exchange %d", r.Exchange)
			}
			v[r.Exchange] = &h2View{req: r}
		case *formats.Body:
			e := get(r.Exchange)
			if r.Dir == formats.ClientToServer {
				if e.reqEnd != nil || r.Offset != int64(len(e.reqBody)) {
					t.Errorf("exchange %d: request Body at %d after %d bytes (end %v)", r.Exchange, r.Offset, len(e.reqBody), e.reqEnd)
				}
				e.reqBody = append(e.reqBody, r.Data...)
				continue
			}
			if e.resp == nil || e.end != nil || r.Offset != int64(len(e.body)) {
				t.Errorf("exchange %d: response Body at %d after %d bytes (response %v, end %v)", r.Exchange, r.Offset, len(e.body), e.resp, e.end)
			}
			e.body = append(e.body, r.Data...)
		case *formats.Response:
			e := get(r.Exchange)
			if e.resp != nil || e.end != nil {
				t.Errorf("exchange %d: Response after %v / %v", r.Exchange, e.resp, e.end)
			}
			e.resp = r
		case *formats.Frame:
			e := get(r.Exchange)
			if e.resp == nil || e.end != nil || r.Seq != int64(len(e.frames)) {
				t.Errorf("exchange %d: Frame %d out of order", r.Exchange, r.Seq)
			}
			e.frames = append(e.frames, r)
		case *formats.Chunk:
			e := get(r.Exchange)
			if e.resp == nil || e.end != nil {
				t.Errorf("exchange %d: Chunk out of order", r.Exchange)
			}
			e.chunks = append(e.chunks, r)
		case *formats.End:
			e := get(r.Exchange)
			if r.Dir == formats.ClientToServer {
				if e.reqEnd != nil {
					t.Errorf("exchange %d: two request Ends", r.Exchange)
				}
				e.reqEnd = r
				continue
			}
			if e.end != nil {
				t.Errorf("exchange %d: two response Ends", r.Exchange)
			}
			e.end = r
		}
	}
	return v
}

// refChunk is a DATA frame found by walking the server's bytes directly.
type refChunk struct {
	off, size, t int64
}

// referenceChunks walks the server→client frames of the recorded pieces
// and returns, per stream, each non-empty DATA frame's body offset, size
// and the time of the piece that carried its last byte.
func referenceChunks(t testing.TB, pieces []wirePiece) map[uint32][]refChunk {
	var b []byte
	var ends []int // end offset of each piece
	var times []int64
	for _, p := range pieces {
		if p.dir != formats.ServerToClient {
			continue
		}
		b = append(b, p.data...)
		ends = append(ends, len(b))
		times = append(times, p.t)
	}
	timeAt := func(off int) int64 {
		for i, e := range ends {
			if off < e {
				return times[i]
			}
		}
		t.Fatalf("offset %d beyond the stream", off)
		return 0
	}
	out := map[uint32][]refChunk{}
	offs := map[uint32]int64{}
	for i := 0; i+9 <= len(b); {
		n := int(b[i])<<16 | int(b[i+1])<<8 | int(b[i+2])
		typ, flags := b[i+3], b[i+4]
		id := binary.BigEndian.Uint32(b[i+5:]) & (1<<31 - 1)
		payload := b[i+9 : i+9+n]
		if typ == 0 {
			if flags&0x8 != 0 {
				payload = payload[1 : len(payload)-int(payload[0])]
			}
			if len(payload) > 0 {
				out[id] = append(out[id], refChunk{offs[id], int64(len(payload)), timeAt(i + 9 + n - 1)})
				offs[id] += int64(len(payload))
			}
		}
		i += 9 + n
	}
	return out
}

func headerMap(h []formats.Header) map[string]formats.Header {
	m := map[string]formats.Header{}
	for _, f := range h {
		m[f.Name] = f
	}
	return m
}

// TestH2RealSession records a real Go client/server HTTP/2 session fed as
// recorded, one byte at a time and in random pieces, and checks every
// exchange exactly.
func TestH2RealSession(t *testing.T) {
	pieces, want := h2Session(t)
	ref := feedH2(pieces, nil)
	modes := []struct {
		name  string
		split func(p []byte) [][]byte
	}{
		{"bytewise", splitBytes},
		{"random1", splitRandom(1)},
		{"random2", splitRandom(2)},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			got := feedH2(pieces, m.split)
			if !reflect.DeepEqual(got, ref) {
				for i := range min(len(got), len(ref)) {
					if !reflect.DeepEqual(got[i], ref[i]) {
						t.Fatalf("record %d = %+v; fed as recorded: %+v", i, got[i], ref[i])
					}
				}
				t.Fatalf("%d records; fed as recorded: %d", len(got), len(ref))
			}
		})
	}
	t.Run("exchanges", func(t *testing.T) { checkH2Session(t, ref, pieces, want) })
}

func checkH2Session(t *testing.T, recs []formats.Record, pieces []wirePiece, want map[string]*h2Want) {
	for _, r := range recs {
		if a, ok := r.(*formats.Anomaly); ok {
			t.Errorf("anomaly: %+v", a)
		}
		if s := fmt.Sprintf("%+v", r); strings.Contains(s, "corpus-admin-token") {
			t.Errorf("record holds the bearer token: %s", s)
		}
	}
	views := viewExchanges(t, recs)
	if len(views) != len(want) {
		t.Errorf("%d exchanges; want %d", len(views), len(want))
	}
	chunks := referenceChunks(t, pieces)
	seen := map[string]bool{}
	for x, v := range views {
		w := want[v.req.Method+" "+v.req.Target]
		if w == nil {
			t.Errorf("exchange %d: unexpected request %+v", x, v.req)
			continue
		}
		seen[w.method+" "+w.target] = true
		name := w.method + " " + w.target
		if v.req.Method != w.method || v.req.Proto != "HTTP/2.0" || v.req.Stream%2 != 1 || v.req.Missing || v.req.Conn != 0 {
			t.Errorf("%s: Request %+v", name, v.req)
		}
		h := headerMap(v.req.Header)
		if a := h["authorization"]; !a.Redacted || a.Value != "" || a.Len != len("Bearer "+h2Token) {
			t.Errorf("%s: authorization header recorded as %+v; want redacted, Len %d", name, a, len("Bearer "+h2Token))
		}
		if h[":scheme"].Value != "http" || h[":authority"].Value == "" {
			t.Errorf("%s: pseudo-headers %+v %+v; want :scheme and :authority kept", name, h[":scheme"], h[":authority"])
		}
		if _, ok := h[":method"]; ok {
			t.Errorf("%s: :method kept as a header", name)
		}
		if w.method == "POST" && h["x-big"].Value != bigHeader {
			t.Errorf("%s: x-big header of %d bytes; want %d", name, len(h["x-big"].Value), len(bigHeader))
		}
		if !bytes.Equal(v.reqBody, w.reqBody) {
			t.Errorf("%s: request body of %d bytes; want %d", name, len(v.reqBody), len(w.reqBody))
		}
		if v.reqEnd == nil || v.reqEnd.Status != formats.EndComplete || v.reqEnd.Size != int64(len(w.reqBody)) {
			t.Errorf("%s: request End %+v; want complete, size %d", name, v.reqEnd, len(w.reqBody))
		}
		if v.resp == nil {
			t.Errorf("%s: no Response", name)
			continue
		}
		if v.resp.Status != w.status || v.resp.Proto != "HTTP/2.0" || v.resp.Framing != formats.FramingH2 ||
			v.resp.Events != w.format || headerValue(v.resp.Header, "content-type") != w.ctype {
			t.Errorf("%s: Response %+v; want status %d, %s, events %d", name, v.resp, w.status, w.ctype, w.format)
		}
		if _, ok := headerMap(v.resp.Header)[":status"]; ok {
			t.Errorf("%s: :status kept as a header", name)
		}
		var events [][]byte
		var size int64
		for _, f := range v.frames {
			events = append(events, f.Data)
			size += int64(len(f.Pre) + len(f.Data))
		}
		if v.end != nil {
			size += int64(len(v.end.Tail))
		}
		if !reflect.DeepEqual(events, w.events) {
			t.Errorf("%s: %d events; want %d (first difference below)", name, len(events), len(w.events))
			for i := range min(len(events), len(w.events)) {
				if !bytes.Equal(events[i], w.events[i]) {
					t.Errorf("event %d = %q; want %q", i, clip(string(events[i])), clip(string(w.events[i])))
					break
				}
			}
		}
		if !bytes.Equal(v.body, w.body) {
			t.Errorf("%s: opaque body of %d bytes; want %d", name, len(v.body), len(w.body))
		}
		if v.end == nil {
			t.Errorf("%s: no response End", name)
			continue
		}
		if v.end.Status != w.end || !strings.Contains(v.end.Note, w.note) || (w.note == "" && v.end.Note != "") {
			t.Errorf("%s: End status %v note %q; want %v %q", name, v.end.Status, v.end.Note, w.end, w.note)
		}
		if w.format != frame.Unknown && v.end.Size != size {
			t.Errorf("%s: End.Size %d; frames and tail hold %d", name, v.end.Size, size)
		}
		if len(w.trailer) > 0 || len(v.end.Trailer) > 0 {
			got := map[string]string{}
			for _, f := range v.end.Trailer {
				got[f.Name] = f.Value
			}
			if !reflect.DeepEqual(got, w.trailer) {
				t.Errorf("%s: trailer %v; want %v", name, got, w.trailer)
			}
		}
		// Chunks: one per non-empty DATA frame, as the wire has them.
		var gotChunks []refChunk
		for _, c := range v.chunks {
			gotChunks = append(gotChunks, refChunk{c.Offset, c.Size, c.Time})
		}
		if wc := chunks[v.req.Stream]; !reflect.DeepEqual(gotChunks, wc) {
			t.Errorf("%s: chunks %v; want %v", name, gotChunks, wc)
		}
		if w.target == "/api/v1/namespaces/demo/configmaps?watch=true" && len(v.chunks) <= 5 {
			t.Errorf("%s: %d DATA frames; the test wants events across frames", name, len(v.chunks))
		}
		// Each event's time is the time of the DATA frame that carries
		// its last byte.
		for _, f := range v.frames {
			last := f.Offset + int64(len(f.Pre)+len(f.Data)) - 1
			for _, c := range v.chunks {
				if last >= c.Offset && last < c.Offset+c.Size && f.Time != c.Time {
					t.Errorf("%s: event %d time %d; its last byte came at %d", name, f.Seq, f.Time, c.Time)
				}
			}
		}
	}
	for target := range want {
		if !seen[target] {
			t.Errorf("%s: no exchange recorded", target)
		}
	}
	// The two alternating watches really did interleave.
	var order []string
	for _, r := range recs {
		if f, ok := r.(*formats.Frame); ok {
			if tg := views[f.Exchange].req.Target; strings.HasSuffix(tg, "/pods?watch=true") {
				order = append(order, strings.Split(tg, "/")[4])
			}
		}
	}
	if got := strings.Join(order, ""); got != "abababab" {
		t.Errorf("pod watch events in order %q; want abababab", got)
	}
}

// wireFrameTypes counts the frame types of one direction of the recorded
// pieces.
func wireFrameTypes(pieces []wirePiece, dir formats.Direction) map[string]int {
	var b []byte
	for _, p := range pieces {
		if p.dir == dir {
			b = append(b, p.data...)
		}
	}
	if dir == formats.ClientToServer {
		b = b[min(len(b), len(h2Preface)):]
	}
	out := map[string]int{}
	for i := 0; i+9 <= len(b); {
		n := int(b[i])<<16 | int(b[i+1])<<8 | int(b[i+2])
		out[fmt.Sprint(http2.FrameType(b[i+3]))]++
		i += 9 + n
	}
	return out
}

// TestH2SessionCoverage checks that the recorded session has what the
// tests above rely on.
func TestH2SessionCoverage(t *testing.T) {
	pieces, _ := h2Session(t)
	c, s := wireFrameTypes(pieces, formats.ClientToServer), wireFrameTypes(pieces, formats.ServerToClient)
	t.Logf("client→server frames %v; server→client frames %v", c, s)
	for _, typ := range []string{"CONTINUATION", "RST_STREAM", "DATA", "HEADERS", "SETTINGS"} {
		if c[typ] == 0 {
			t.Errorf("no %s frame from the client", typ)
		}
	}
	for _, typ := range []string{"DATA", "HEADERS", "SETTINGS"} {
		if s[typ] == 0 {
			t.Errorf("no %s frame from the server", typ)
		}
	}
}
