package replay

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestWatchHandOff: an HTTP/1.1 watch takes its connection over and lets
// ServeHTTP return while it goes on (net/http's state for the connection
// is released); the stream still delivers every event, waits for the
// next one in a read of its connection, and ends when the client leaves
// — the request then reaches the log — or at Close.
func TestWatchHandOff(t *testing.T) {
	path := corpusSession(t, "basic-json")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := Open(path, Options{Writes: WritesReject, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var inServeHTTP atomic.Int64
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inServeHTTP.Add(1)
		defer inServeHTTP.Add(-1)
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	open := func() *rawResponse {
		r, err := rawGetErr(hs.URL, target)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < 200 {
			c, err := r.nextChunk()
			if err != nil {
				t.Fatalf("after %d events: %v", n, err)
			}
			n += bytes.Count(c, []byte(`{"type"`))
		}
		return r
	}
	leaving, staying := open(), open()
	defer staying.conn.Close()
	// Both streams are held open after their events, served without a
	// ServeHTTP call in progress.
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() == 2 && inServeHTTP.Load() == 0 },
		"two streams served after their ServeHTTP calls returned")
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests in the log while both streams are open; want 0", n)
	}
	// The client that leaves is noticed by the read its stream waits in.
	leaving.conn.Close()
	wttest.WaitFor(t, time.Minute, func() bool { return srv.handlers.active() == 1 },
		"the stream of the client that left to end")
	rs := srv.Requests()
	if len(rs) != 1 || rs[0].Status != http.StatusOK || rs[0].How != howRecorded {
		t.Fatalf("requests after one client left: %+v; want one recorded 200", rs)
	}
	// Close interrupts the other one's read, and cuts its stream.
	srv.Close()
	if n := srv.handlers.active(); n != 0 {
		t.Fatalf("%d streams still served after Close", n)
	}
	if _, err := staying.chunks(); err == io.EOF {
		t.Error("the held stream ended cleanly after Close; want it cut")
	}
}
