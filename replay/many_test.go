package replay

import (
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// watchBody returns the recorded body of watch exchange id: every event
// with the bytes between them, and the tail.
func watchBody(t testing.TB, f *formats.File, id int64) []byte {
	t.Helper()
	var body []byte
	sc := f.ExchangeRecords(id)
	for {
		r, err := sc.Next()
		if err != nil {
			return body
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
}

// TestManyClients: 1,000 concurrent raw watch clients on one server, one of
// which never reads. Every other client gets the whole recorded stream,
// byte for byte, undelayed by the stuck one; Close cuts the stuck write,
// and once all are gone no goroutine is left.
func TestManyClients(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	body := watchBody(t, f, id)
	want := sha256.Sum256(body)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the server's Close

	// Loop keeps every stream going, so the client that does not read
	// fills its socket buffers and blocks the server's writes to it.
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 0, Loop: true})
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"

	stuckClient(t, srv, target) // the client that never reads

	const clients = 999
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	sem := make(chan struct{}, 128) // do not overflow the listen backlog
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			r, err := rawGetErr(srv.URL, target)
			<-sem
			if err != nil {
				errs <- fmt.Errorf("client %d: %v", i, err)
				return
			}
			defer r.conn.Close()
			var got []byte
			for len(got) < len(body) {
				c, err := r.nextChunk()
				if err != nil {
					errs <- fmt.Errorf("client %d: after %d bytes: %v", i, len(got), err)
					return
				}
				got = append(got, c...)
			}
			if len(got) != len(body) || sha256.Sum256(got) != want {
				i := 0
				for i < len(got) && i < len(body) && got[i] == body[i] {
					i++
				}
				errs <- fmt.Errorf("client %d: got %d bytes (sha %x), want %d (sha %x); first difference at %d",
					i, len(got), sha256.Sum256(got), len(body), want, i)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n < 5 {
			t.Error(err)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d clients failed", n, clients)
	}
	t.Logf("%d clients × %d bytes in %v", clients, len(body), time.Since(start))
	// The readers are gone; only the stuck client's handler is left,
	// blocked in a write. Close cuts it.
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() <= 1 },
		"the readers' handlers to return (all but the stuck one)")
	srv.Close()
	if n := srv.handlers.active(); n != 0 {
		t.Fatalf("%d handlers still running after Close", n)
	}
}

// TestWriteTimeout: a client that stops reading is dropped once a write
// has blocked for WriteTimeout.
func TestWriteTimeout(t *testing.T) {
	path := corpusSession(t, "basic-json")
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 0, Loop: true, WriteTimeout: 50 * time.Millisecond})
	addr := srv.URL[len("http://"):]
	stuck, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(stuck, "GET /api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205 HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() > 0 }, "the stuck client's request to arrive")
	// The write to the stuck client blocks; WriteTimeout (50 ms) drops it.
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() == 0 },
		"the stuck client to be dropped after the 50ms WriteTimeout")
}
