package replay

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/testkit/wttest"
	"go.uber.org/goleak"
)

// quietTarget is a watch past every event of basic-json: answered with an
// empty watch that stays open (after-last).
const quietTarget = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=999999999"

func needScheduler(t *testing.T) {
	if !pace.Supported {
		t.Skip("streams park in the scheduler on Linux only")
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestParkedWatchersHoldNoGoroutines: 1,000 idle watches over HTTP/1.1
// wait in the scheduler without a goroutine each; the clients that leave
// are noticed without a reader (their streams end, their descriptors are
// closed); Close ends the others, without the terminating chunk.
func TestParkedWatchersHoldNoGoroutines(t *testing.T) {
	needScheduler(t)
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	path := corpusSession(t, "basic-json")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := Open(path, Options{Writes: WritesReject, Speed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// A first watch starts the scheduler's goroutine.
	first := rawGet(t, srv.URL, quietTarget)
	wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == 1 }, "the first watch to park")
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)

	const n = 1000
	ws := make([]*rawResponse, n)
	for i := range ws {
		r, err := rawGetErr(srv.URL, quietTarget)
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		defer r.conn.Close()
		if r.status != 200 || !r.chunked {
			t.Fatalf("watch %d: status %d, chunked %v; want 200, chunked", i, r.status, r.chunked)
		}
		ws[i] = r
	}
	wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == n+1 }, "the %d watches to park", n)
	// net/http's connection goroutines end once the streams took their
	// connections over: what is left is slack (the runtime's, the test's).
	const slack = 50
	wttest.WaitFor(t, time.Minute, func() bool { return runtime.NumGoroutine() <= g0+slack },
		"the goroutines to settle with %d parked watches (%d before them, slack %d)", n, g0, slack)
	if got := srv.handlers.active(); got != n+1 {
		t.Fatalf("%d requests active; want %d", got, n+1)
	}

	// Half the clients leave: the sweep notices, the streams end, the
	// server's descriptors are closed.
	for _, r := range ws[:n/2] {
		r.conn.Close()
	}
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() == n/2+1 },
		"the streams of the %d clients that left to end (within %v each)", n/2, 2*pace.SweepEvery)
	// The clients' descriptors are this process's too: those left open
	// are the other half's, on both sides.
	wttest.WaitFor(t, time.Minute, func() bool { return openFDs(t) <= fd0+2*(n-n/2)+slack },
		"the server to close the connections of the clients that left (%d descriptors before the watches)", fd0)

	// Close ends the parked rest, at once and without the terminating chunk.
	srv.Close()
	if got := srv.handlers.active(); got != 0 {
		t.Fatalf("%d requests active after Close", got)
	}
	for i, r := range append(ws[n/2:], first) {
		if _, err := r.nextChunk(); err != io.ErrUnexpectedEOF {
			t.Fatalf("watch %d after Close: %v; want the connection closed (io.ErrUnexpectedEOF)", i, err)
		}
	}
	for _, q := range srv.Requests() {
		if q.Done.IsZero() {
			t.Fatalf("request %s: not done", q.Target)
		}
	}
}

// TestParkedDeparture: a client that closes an idle watch is noticed
// without a reader: its stream ends and the server closes its descriptor
// within 2×pace.SweepEvery (polled here with a generous deadline).
func TestParkedDeparture(t *testing.T) {
	needScheduler(t)
	path := corpusSession(t, "basic-json")
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 1})
	fd0 := openFDs(t)
	w := rawGet(t, srv.URL, quietTarget)
	wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == 1 }, "the watch to park")
	if srv.handlers.active() != 1 {
		t.Fatalf("%d requests active; want 1", srv.handlers.active())
	}
	w.conn.Close()
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() == 0 },
		"the stream of the client that left to end (bound %v)", 2*pace.SweepEvery)
	if n := parkedOf(srv); n != 0 {
		t.Fatalf("%d streams still parked", n)
	}
	wttest.WaitFor(t, time.Minute, func() bool { return openFDs(t) <= fd0 },
		"the server to close its end of the connection (%d descriptors before)", fd0)
	rs := srv.Requests()
	if len(rs) != 1 || rs[0].Status != 200 || rs[0].Done.IsZero() {
		t.Fatalf("request log %+v; want the watch, 200, done", rs)
	}
}

// TestParkedTimeout: a parked idle watch with timeoutSeconds ends cleanly
// (terminating chunk) when it passes, as the apiserver does.
func TestParkedTimeout(t *testing.T) {
	needScheduler(t)
	path := corpusSession(t, "basic-json")
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 1})
	w := rawGet(t, srv.URL, quietTarget+"&timeoutSeconds=1")
	cs, err := w.chunks()
	if err != io.EOF || len(cs) != 0 {
		t.Fatalf("got %d chunks, end %v; want none and the terminating chunk", len(cs), err)
	}
	if _, err := w.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the terminating chunk: %v; want the connection closed", err)
	}
	if steppedOf(srv)+handedOf(srv) == 0 {
		t.Fatal("the watch never went through the scheduler")
	}
}

// TestParkedSlowClient: a client that never reads must not delay the
// others. Its writes fill its socket and go to a goroutine of their own
// (no write timeout here: it stays blocked until Close), while the
// scheduler keeps every other watcher's stream going, byte for byte.
func TestParkedSlowClient(t *testing.T) {
	needScheduler(t)
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	body := watchBody(t, f, id)
	want := sha256.Sum256(bytes.Repeat(body, 3))
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the server's Close
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 2000, Loop: true, WriteTimeout: -1})
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	stuckClient(t, srv, target)
	// The stuck client's stream has written what its socket takes and
	// waits, on a goroutine, for the client to read.
	wttest.WaitFor(t, time.Minute, func() bool { return handedOf(srv) > 0 }, "the stuck client's write to go to a goroutine")

	const clients = 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := rawGetErr(srv.URL, target)
			if err != nil {
				errs <- err
				return
			}
			defer r.conn.Close()
			var got []byte
			for len(got) < 3*len(body) {
				c, err := r.nextChunk()
				if err != nil {
					errs <- fmt.Errorf("client %d: after %d bytes: %v", i, len(got), err)
					return
				}
				got = append(got, c...)
			}
			if len(got) != 3*len(body) || sha256.Sum256(got) != want {
				errs <- fmt.Errorf("client %d: %d bytes, not the recorded body three times (%d bytes)", i, len(got), 3*len(body))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if steppedOf(srv) == 0 {
		t.Error("the scheduler wrote nothing itself")
	}
	t.Logf("scheduler: %d streams carried on itself, %d handed to goroutines", steppedOf(srv), handedOf(srv))
	srv.Close()
	if n := srv.handlers.active(); n != 0 {
		t.Fatalf("%d requests active after Close", n)
	}
}

// TestParkedTiming: on the scheduler's path (the real clock), a watch's
// bytes are the recorded ones with their recorded chunk boundaries, no
// chunk leaves before it is due (request arrival + recorded offset ÷
// speed) and the stream does not end before its recorded end: with the
// world (runFlow) and without it (run).
func TestParkedTiming(t *testing.T) {
	needScheduler(t)
	path, f, id, info := basicWatch(t)
	start := info.Response.Time
	chunks := sessionChunks(t, f, id)
	body := watchBody(t, f, id)
	// About 1.5 s of real time for the whole watch.
	speed := max(1, float64(info.End.Time-start)/float64(1500*time.Millisecond))
	scale := func(d int64) time.Duration { return time.Duration(float64(d) / speed) }
	for _, mode := range []Writes{WritesReject, WritesRecorded} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newTestServer(t, path, Options{Speed: speed, Writes: mode})
			w := rawGet(t, srv.URL, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205")
			type got struct {
				data []byte
				at   time.Time
			}
			var gots []got
			var err error
			for {
				var c []byte
				if c, err = w.nextChunk(); err != nil {
					break
				}
				gots = append(gots, got{c, time.Now()})
			}
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("after %d chunks: %v", len(gots), err)
			}
			wttest.WaitFor(t, time.Minute, func() bool { return len(srv.Requests()) == 1 }, "the watch to be logged")
			req := srv.Requests()[0]
			if len(gots) != len(chunks) {
				t.Fatalf("%d chunks; want the %d recorded", len(gots), len(chunks))
			}
			var all []byte
			for i, g := range gots {
				if int64(len(g.data)) != chunks[i].Size {
					t.Fatalf("chunk %d: %d bytes; want %d as recorded", i, len(g.data), chunks[i].Size)
				}
				if due := req.Arrival.Add(scale(chunks[i].Time - start)); g.at.Before(due) {
					t.Fatalf("chunk %d arrived %v before it was due", i, due.Sub(g.at))
				}
				all = append(all, g.data...)
			}
			if !bytes.Equal(all, body) {
				t.Fatalf("the body differs from the recorded one (%d bytes, want %d)", len(all), len(body))
			}
			if end := req.Arrival.Add(scale(info.End.Time - start)); req.Done.Before(end) {
				t.Fatalf("the stream ended %v before its recorded end", end.Sub(req.Done))
			}
			if steppedOf(srv) == 0 {
				t.Fatal("the scheduler wrote nothing itself")
			}
		})
	}
}

func parkedOf(s *Server) int    { n, _, _ := s.hub.Stats(); return n }
func steppedOf(s *Server) int64 { _, n, _ := s.hub.Stats(); return n }
func handedOf(s *Server) int64  { _, _, n := s.hub.Stats(); return n }

// TestParkedWorldWatches: watches of the world (the default writes mode)
// park in the scheduler like recorded ones, without a goroutine each;
// a client's write wakes them, each gets its event (one encoding shared
// by all), and they park again; timeoutSeconds still ends them cleanly.
func TestParkedWorldWatches(t *testing.T) {
	needScheduler(t)
	path := corpusSession(t, "basic-json")
	before := goleak.IgnoreCurrent()
	srv := newTestServer(t, path, Options{Writes: WritesAnswer, Speed: 0, Pace: PaceQuiet})
	const n = 200
	// A scope the recording never shows: only the test's writes are in it.
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&labelSelector=parked%3Dyes"
	first := rawGet(t, srv.URL, target)
	wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == 1 }, "the first world watch to park")
	runtime.GC()
	g0 := runtime.NumGoroutine()
	ws := []*rawResponse{first}
	for i := 1; i < n; i++ {
		ws = append(ws, rawGet(t, srv.URL, target))
	}
	timed := rawGet(t, srv.URL, target+"&timeoutSeconds=1")
	wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == n+1 }, "the %d world watches to park", n+1)
	const slack = 50
	wttest.WaitFor(t, time.Minute, func() bool { return runtime.NumGoroutine() <= g0+slack },
		"the goroutines to settle with %d parked world watches (%d before, slack %d)", n, g0, slack)
	if cs, err := timed.chunks(); err != io.EOF || len(cs) != 0 {
		t.Fatalf("watch with timeoutSeconds=1: %d chunks, end %v; want none and the terminating chunk", len(cs), err)
	}

	for _, step := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/namespaces/corpus-basic/configmaps",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"parked","labels":{"parked":"yes"}},"data":{"k":"v"}}`, `"type":"ADDED"`},
		{"DELETE", "/api/v1/namespaces/corpus-basic/configmaps/parked", "", `"type":"DELETED"`},
	} {
		req, err := http.NewRequest(step.method, srv.URL+step.path, strings.NewReader(step.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s", step.method, step.path, resp.Status)
		}
		var one []byte
		for i, w := range ws {
			c, err := w.nextChunk()
			if err != nil || !bytes.Contains(c, []byte(step.want)) || !bytes.Contains(c, []byte(`"name":"parked"`)) {
				t.Fatalf("%s: watch %d got %q, %v; want the %s event of the ConfigMap", step.method, i, c, err, step.want)
			}
			if one == nil {
				one = c
			} else if !bytes.Equal(c, one) {
				t.Fatalf("%s: watch %d got other bytes than watch 0:\n%s\n%s", step.method, i, c, one)
			}
		}
		wttest.WaitFor(t, time.Minute, func() bool { return parkedOf(srv) == n }, "the world watches to park again after the %s", step.method)
	}
	if steppedOf(srv) < 2*n {
		t.Fatalf("%d streams stepped on the scheduler; want the %d watches' events sent there", steppedOf(srv), 2*n)
	}
	// Close ends the parked world watches and the goroutine that wakes
	// them.
	srv.Close()
	if got := srv.handlers.active(); got != 0 {
		t.Fatalf("%d requests active after Close", got)
	}
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}
