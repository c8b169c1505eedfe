package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestOpaqueBodies: recorded bodies go out byte for byte, gzip'd as
// recorded only to clients that accept it, with Content-Length only when
// the body is sent exactly as recorded with a recorded length, and with the
// recorded chunk boundaries.
func TestOpaqueBodies(t *testing.T) {
	list := []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}` + "\n")
	gz := gzipped(t, bytes.Repeat(list, 50))
	path := writeSession(t,
		synthExchange{target: "/api/v1/namespaces/a/configmaps", header: jsonHeader(formats.Header{Name: "Content-Encoding", Value: "gzip"}, formats.Header{Name: "Transfer-Encoding", Value: "chunked"}),
			encoding: "gzip", bodies: [][]byte{gz[:10], gz[10:]}, chunked: true},
		synthExchange{target: "/api/v1/namespaces/b/configmaps", header: jsonHeader(formats.Header{Name: "Content-Length", Value: fmt.Sprint(len(list))}),
			framing: formats.FramingLength, bodies: [][]byte{list[:5], list[5:]}},
		synthExchange{target: "/api/v1/namespaces/c/configmaps", header: jsonHeader(formats.Header{Name: "Transfer-Encoding", Value: "chunked"}),
			bodies: [][]byte{list[:7], list[7:30], list[30:]}, chunked: true},
	)
	srv := newTestServer(t, path, Options{Writes: WritesReject})
	tests := []struct {
		name, target, acceptEncoding string
		wantBody                     []byte
		wantEncoding                 string
		wantLength                   string
		wantChunks                   []int // nil: not chunked
	}{
		{"gzip-accepted", "/api/v1/namespaces/a/configmaps", "gzip", gz, "gzip", "", []int{10, len(gz) - 10}},
		{"gzip-refused", "/api/v1/namespaces/a/configmaps", "gzip;q=0", bytes.Repeat(list, 50), "", "", nil},
		{"gzip-not-asked", "/api/v1/namespaces/a/configmaps", "", bytes.Repeat(list, 50), "", "", nil},
		{"content-length", "/api/v1/namespaces/b/configmaps", "gzip", list, "", fmt.Sprint(len(list)), nil},
		{"chunks", "/api/v1/namespaces/c/configmaps", "", list, "", "", []int{7, 23, len(list) - 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.acceptEncoding != "" {
				hdr = []string{"Accept-Encoding", tt.acceptEncoding}
			}
			r := rawGet(t, srv.URL, tt.target, hdr...)
			if r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			if got := r.header.Get("Content-Encoding"); got != tt.wantEncoding {
				t.Errorf("Content-Encoding = %q; want %q", got, tt.wantEncoding)
			}
			if got := r.header.Get("Content-Length"); got != tt.wantLength {
				t.Errorf("Content-Length = %q; want %q", got, tt.wantLength)
			}
			if got := r.header.Get("Audit-Id"); got == "" {
				t.Errorf("recorded header Audit-Id missing")
			}
			if got := r.header.Get("Date"); got == "Sat, 21 Nov 2026 12:00:00 GMT" {
				t.Errorf("Date is the recorded one")
			}
			var body []byte
			if tt.wantChunks != nil {
				cs, err := r.chunks()
				if err != io.EOF {
					t.Fatalf("chunks: %v", err)
				}
				var sizes []int
				for _, c := range cs {
					sizes = append(sizes, len(c))
					body = append(body, c...)
				}
				if !reflect.DeepEqual(sizes, tt.wantChunks) {
					t.Errorf("chunk sizes = %v; want %v", sizes, tt.wantChunks)
				}
			} else {
				var err error
				if body, err = r.body(); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, tt.wantBody) {
				t.Errorf("body = %d bytes %.60q; want %d bytes %.60q", len(body), body, len(tt.wantBody), tt.wantBody)
			}
		})
	}
}

// TestWatchChunks: recorded watch bodies go out with their recorded chunk
// boundaries (which need not line up with events), byte for byte.
func TestWatchChunks(t *testing.T) {
	for _, c := range []struct{ scenario, sub, target, accept string }{
		{"basic-json", "watch=true", "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", ""},
		{"protobuf", "allowWatchBookmarks=true", "/api/v1/namespaces/corpus-proto/configmaps?watch=true&resourceVersion=206&allowWatchBookmarks=true",
			"application/vnd.kubernetes.protobuf, application/json"},
		{"multi-watch", "sendInitialEvents=true", "/api/v1/namespaces/corpus-multi/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", ""},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			path := corpusSession(t, c.scenario)
			f := openSession(t, path)
			id := exchangeByTarget(t, f, "GET", c.sub)
			var body []byte
			sc := f.ExchangeRecords(id)
			for {
				r, err := sc.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				switch r := r.(type) {
				case *formats.Frame:
					body = append(append(body, r.Pre...), r.Data...)
				case *formats.End:
					if r.Dir == formats.ServerToClient {
						body = append(body, r.Tail...)
					}
				}
			}
			var want [][]byte
			for _, ch := range sessionChunks(t, f, id) {
				want = append(want, body[ch.Offset:ch.Offset+ch.Size])
			}
			srv := newTestServer(t, path, Options{Writes: WritesReject})
			var hdr []string
			if c.accept != "" {
				hdr = []string{"Accept", c.accept}
			}
			r := rawGet(t, srv.URL, c.target, hdr...)
			got, err := r.chunks()
			if err != io.EOF {
				t.Fatalf("stream ended with %v; want a clean end", err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d chunks; want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("chunk %d = %d bytes %.40q; want %d bytes %.40q", i, len(got[i]), got[i], len(want[i]), want[i])
				}
			}
			var wantCT string
			for _, h := range f.Index().Exchanges[id].Response.Header {
				if strings.EqualFold(h.Name, "Content-Type") {
					wantCT = h.Value
				}
			}
			if ct := r.header.Get("Content-Type"); ct != wantCT {
				t.Errorf("Content-Type = %q; want %q", ct, wantCT)
			}
		})
	}
}

// driveUntil advances a fake clock timer by timer while the server's next
// timer is before limit.
func driveUntil(t *testing.T, ctx context.Context, c *FakeClock, limit time.Time) time.Time {
	t.Helper()
	for {
		if err := c.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("the server armed no timer before %v", limit)
		}
		next, _ := c.Next()
		if !next.Before(limit) {
			return next
		}
		c.AdvanceTo(next)
	}
}

// TestStreamEnds: a stream ends the way it was recorded — clean, FIN
// without the last chunk, RST — at its recorded end time; with Hold, or
// when the capture ended inside it, it stays open until the client's
// timeoutSeconds (then ends cleanly).
func TestStreamEnds(t *testing.T) {
	ev := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"a","resourceVersion":"%d"}}}`, i, 100+i))
	}
	frames := [][]byte{ev(1), ev(2), ev(3)}
	w := func(ns string, end formats.EndStatus, noEnd bool) synthExchange {
		return synthExchange{target: "/api/v1/namespaces/" + ns + "/configmaps?watch=true&resourceVersion=100", header: jsonHeader(),
			events: frame.JSON, frames: frames, chunked: true, end: end, noEnd: noEnd, tail: []byte("\n")}
	}
	path := writeSession(t, w("clean", formats.EndComplete, false), w("fin", formats.EndClosed, false),
		w("rst", formats.EndReset, false), w("cut", 0, true))
	// Recorded times: response at +1ms, frames at +101, +201, +301ms, end at +401ms.
	const recordedEnd = 400 * time.Millisecond
	var want []byte
	for i, f := range frames {
		if i > 0 {
			want = append(want, '\n')
		}
		want = append(want, f...)
	}
	withTail := append(append([]byte(nil), want...), '\n')
	tests := []struct {
		name, ns string
		speed    float64
		hold     bool
		timeout  int // timeoutSeconds sent
		wantErr  error
		wantEnd  time.Duration // when the server ends the stream, after arrival
		wantBody []byte
	}{
		{"clean", "clean", 1, false, 0, io.EOF, recordedEnd, withTail},
		{"fin", "fin", 1, false, 0, io.ErrUnexpectedEOF, recordedEnd, withTail},
		{"rst", "rst", 1, false, 0, syscall.ECONNRESET, recordedEnd, withTail},
		{"capture-ended", "cut", 1, false, 30, io.EOF, 30 * time.Second, want},
		{"hold", "clean", 1, true, 60, io.EOF, 60 * time.Second, withTail},
		{"hold-fin", "fin", 1, true, 45, io.EOF, 45 * time.Second, withTail},
		// At speed 0.1 the events are due at 1 s, 2 s, 3 s; timeoutSeconds
		// counts recorded time: a 2 s client timeout ends the stream the
		// capture cut after 20 s of replay time.
		{"timeout-scaled", "cut", 0.1, false, 2, io.EOF, 20 * time.Second, want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrival := time.Unix(1_800_000_000, 0)
			clock := NewFakeClock(arrival)
			srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: tt.speed, Clock: clock, Hold: tt.hold})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			target := "/api/v1/namespaces/" + tt.ns + "/configmaps?watch=true&resourceVersion=100"
			if tt.timeout > 0 {
				target += fmt.Sprintf("&timeoutSeconds=%d", tt.timeout)
			}
			r := rawGet(t, srv.URL, target)
			end := arrival.Add(tt.wantEnd)
			next := driveUntil(t, ctx, clock, end)
			if !next.Equal(end) {
				t.Fatalf("the server waits until arrival+%v to end the stream; want arrival+%v", next.Sub(arrival), tt.wantEnd)
			}
			// Everything due before the end is written (the tail newline
			// is due at the end): read it, then end.
			due := len(tt.wantBody)
			if due > len(want) {
				due = len(want)
			}
			var got []byte
			for len(got) < due {
				c, err := r.nextChunk()
				if err != nil {
					t.Fatalf("after %d bytes: %v", len(got), err)
				}
				got = append(got, c...)
			}
			clock.AdvanceTo(next)
			rest, err := r.chunks()
			for _, c := range rest {
				got = append(got, c...)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("stream ended with %v; want %v", err, tt.wantErr)
			}
			if !bytes.Equal(got, tt.wantBody) {
				t.Fatalf("body = %q; want %q", got, tt.wantBody)
			}
		})
	}
}

// TestNotFound: a request nothing matches gets a Kubernetes Status (with
// WritesRecorded: otherwise the world answers a watch of pods).
func TestNotFound(t *testing.T) {
	srv := newTestServer(t, corpusSession(t, "basic-json"), Options{Writes: WritesRecorded})
	resp, body := get(t, srv.Client(), srv.URL+"/api/v1/namespaces/corpus-basic/pods?watch=true")
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource (wtrace replay: no recorded exchange matches GET /api/v1/namespaces/corpus-basic/pods)","reason":"NotFound","code":404}`
	if resp.StatusCode != 404 || string(body) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET pods = %d %q %s; want 404 application/json %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
	}
}

// TestCloseLifecycle: Close cancels open watches, returns only after every
// handler has returned, leaves no goroutine behind, and is idempotent; a
// Handler mounted elsewhere is cancelled too.
func TestCloseLifecycle(t *testing.T) {
	path := corpusSession(t, "basic-json")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := Open(path, Options{Writes: WritesReject, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v; want ErrStarted", err)
	}
	other := httptest.NewServer(srv.Handler())
	var rs []*rawResponse
	for _, u := range []string{srv.URL, srv.URL, other.URL} {
		r, err := rawGetErr(u, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205")
		if err != nil {
			t.Fatal(err)
		}
		defer r.conn.Close()
		rs = append(rs, r)
	}
	// Every stream is held open after its events: read them all.
	for i, r := range rs {
		n := 0
		for n < 200 {
			c, err := r.nextChunk()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			n += bytes.Count(c, []byte(`{"type"`))
		}
	}
	done := make(chan struct{})
	go func() {
		srv.Close()
		close(done)
	}()
	<-done
	srv.mu.Lock()
	closed := srv.closed
	srv.mu.Unlock()
	if !closed {
		t.Fatal("Close returned without closing")
	}
	for i, r := range rs[:2] {
		if _, err := r.chunks(); err == io.EOF {
			t.Errorf("stream %d ended cleanly after Close; want it cut", i)
		}
	}
	if _, err := rs[2].chunks(); err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Errorf("mounted handler's stream: %v", err)
	}
	srv.Close() // idempotent
	if _, err := rawGetErr(srv.URL, "/api"); err == nil {
		t.Error("the server still answers after Close")
	}
	resp, _ := get(t, other.Client(), other.URL+"/api")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("mounted handler after Close: %d; want 503", resp.StatusCode)
	}
	other.Close()
}
