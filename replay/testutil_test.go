package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/fromtape"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// corpusDir holds the repository's copies of the shared corpus captures.
const corpusDir = "../testdata/corpus"

var (
	sessionsMu  sync.Mutex
	sessions    = map[string]string{} // scenario → recorded .wt path
	sessionsDir string
)

// The names of the answers (Answer.How), as the log and Request.How give
// them.
const (
	howRecorded  = fromtape.HowRecorded
	howResumed   = fromtape.HowResumed
	howAfterLast = fromtape.HowAfterLast
	howExpired   = fromtape.HowExpired
	howWatchList = fromtape.HowWatchList
	howList      = fromtape.HowList
	howDiscovery = fromtape.HowDiscovery
	howError     = stream.HowError
	howNotFound  = stream.HowNotFound
	howRejected  = fromworld.HowRejected
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sessionsDir != "" {
		os.RemoveAll(sessionsDir)
	}
	os.Exit(code)
}

// corpusSession records testdata/corpus/<scenario>/capture.pcap into a
// temporary session file, once per test binary, and returns its path. It
// skips the test if the capture is absent.
func corpusSession(t testing.TB, scenario string) string {
	t.Helper()
	sessionsMu.Lock()
	defer sessionsMu.Unlock()
	if p, ok := sessions[scenario]; ok {
		return p
	}
	pcap := filepath.Join(corpusDir, scenario, "capture.pcap")
	if _, err := os.Stat(pcap); err != nil {
		t.Skipf("corpus capture %s not available: %v", pcap, err)
	}
	if sessionsDir == "" {
		d, err := os.MkdirTemp("", "wtrace-replay-test-")
		if err != nil {
			t.Fatal(err)
		}
		sessionsDir = d
	}
	out := filepath.Join(sessionsDir, scenario+".wt")
	if err := recordPcap(pcap, out); err != nil {
		t.Fatalf("recording %s: %v", pcap, err)
	}
	wttest.CheckNoSecrets(t, out)
	sessions[scenario] = out
	return out
}

// recordPcap records a capture into a session file the way `wtrace record`
// does, in the blocks of a live recording (wttest.LiveBlocks): a corpus
// capture then spans many blocks, so that reading an exchange across
// blocks, damage to one of them and the session dictionary are served as
// they would be from a long recording.
func recordPcap(pcap, out string) error {
	_, err := wttest.RecordPcapBlocks(pcap, out, capture.Options{}, wttest.LiveBlocks)
	return err
}

// newTestServer is replaytest.NewServer for the tests of this package
// (which replaytest imports).
func newTestServer(t testing.TB, path string, opts Options) *Server {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// openSession opens a session file for the duration of the test.
func openSession(t testing.TB, path string) *formats.File {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatalf("formats.Open(%q): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// recordedEvent is one watch event as the session holds it.
type recordedEvent struct {
	seq  int64
	time int64
	data []byte
	meta frame.Meta
}

// sessionEvents returns the events of exchange id.
func sessionEvents(t testing.TB, f *formats.File, id int64) []recordedEvent {
	t.Helper()
	x := f.Index().Exchanges[id]
	format := x.Response.Events
	sc := f.ExchangeRecords(id)
	var evs []recordedEvent
	for {
		r, err := sc.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("reading exchange %d: %v", id, err)
		}
		if fr, ok := r.(*formats.Frame); ok {
			m, err := frame.Peek(format, fr.Data)
			if err != nil {
				t.Fatalf("Peek(exchange %d event %d): %v", id, fr.Seq, err)
			}
			evs = append(evs, recordedEvent{seq: fr.Seq, time: fr.Time, data: fr.Data, meta: m})
		}
	}
}

// sessionBody returns the stored (not decoded) response body of an opaque
// exchange.
func sessionBody(t testing.TB, f *formats.File, id int64) []byte {
	t.Helper()
	sc := f.ExchangeRecords(id)
	var b []byte
	for {
		r, err := sc.Next()
		if err == io.EOF {
			return b
		}
		if err != nil {
			t.Fatalf("reading exchange %d: %v", id, err)
		}
		if body, ok := r.(*formats.Body); ok && body.Dir == formats.ServerToClient {
			b = append(b, body.Data...)
		}
	}
}

// exchangeByTarget finds the exchange whose request-target contains sub.
func exchangeByTarget(t testing.TB, f *formats.File, method, sub string) int64 {
	t.Helper()
	for _, x := range f.Index().Exchanges {
		if x.Request.Method == method && bytes.Contains([]byte(x.Request.Target), []byte(sub)) {
			return x.Request.Exchange
		}
	}
	t.Fatalf("no %s exchange with target containing %q", method, sub)
	return -1
}

// get performs a GET and returns the response with its whole body.
func get(t testing.TB, c *http.Client, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp, b
}

// recordedFrames returns the exact bytes of the events of the session's
// first watch whose target contains sub.
func recordedFrames(t testing.TB, path, sub string) [][]byte {
	_, out := recordedEvents(t, path, sub)
	return out
}

// recordedEvents is recordedFrames with the watch's event format.
func recordedEvents(t testing.TB, path, sub string) (frame.Format, [][]byte) {
	t.Helper()
	f := openSession(t, path)
	for _, x := range f.Index().Exchanges {
		if x.Response == nil || x.Response.Events == frame.Unknown || !strings.Contains(x.Request.Target, sub) {
			continue
		}
		var out [][]byte
		for rec, err := range f.ExchangeRecords(x.Request.Exchange).All() {
			if err != nil {
				t.Fatal(err)
			}
			if fr, ok := rec.(*formats.Frame); ok {
				out = append(out, append([]byte(nil), fr.Data...))
			}
		}
		return x.Response.Events, out
	}
	t.Fatalf("no watch with %q in %s", sub, path)
	return frame.Unknown, nil
}

// subSession writes a session holding only the given exchanges of src (with
// src's Meta and the Conn records of their connections) and returns its
// path.
func subSession(t testing.TB, src string, ids ...int64) string {
	t.Helper()
	f := openSession(t, src)
	out := filepath.Join(t.TempDir(), "sub.wt")
	file, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := f.Index().Meta
	if meta == nil {
		meta = &formats.Meta{Tool: "wtrace test"}
	}
	if err := w.Write(meta); err != nil {
		t.Fatal(err)
	}
	conns := map[uint64]bool{}
	for _, id := range ids {
		c := f.Index().Exchanges[id].Request.Conn
		if !conns[c] {
			conns[c] = true
			cr := f.Index().Conns[c].Conn
			if err := w.Write(&cr); err != nil {
				t.Fatal(err)
			}
		}
	}
	sc := f.ExchangeRecords(ids...)
	for {
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(&formats.Summary{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// requestFor is an incoming request for the router's tests (any method
// and target, as a server may receive them).
func requestFor(method, target, accept string) *http.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		u = &url.URL{Path: target}
	}
	r := (&http.Request{Method: method, URL: u, RequestURI: target, Host: "127.0.0.1", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody}).WithContext(context.Background())
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	return r
}

// stuckClient opens a watch of target on srv whose client never reads,
// with a small receive buffer, so that the server's writes to it block
// once its socket buffers are full. It is closed at the end of the test.
func stuckClient(t testing.TB, srv *Server, target string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr)
	return c
}

// basicWatch returns the recorded session of basic-json, opened for the
// test, and the id and index entry of its watch.
func basicWatch(t testing.TB) (path string, f *formats.File, id int64, info formats.ExchangeInfo) {
	t.Helper()
	path = corpusSession(t, "basic-json")
	f = openSession(t, path)
	id = exchangeByTarget(t, f, "GET", "watch=true")
	return path, f, id, f.Index().Exchanges[id]
}
