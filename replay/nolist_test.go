package replay

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// TestWatchWithoutItsList: a session that holds a watch but not the LIST
// before it (the capture began between them; a slice by exchange), replayed
// with the world (the default writes mode) to a client watching from the
// recorded resourceVersion. The session shows no earlier version of the
// objects the watch deletes or modifies first, yet they existed: every
// event goes out as recorded, byte for byte — a DELETED of an object the
// world never saw is not dropped, and a first MODIFIED is not made an
// ADDED. (Before: 4 DELETEDs dropped and a MODIFIED sent as ADDED, and a
// client counting the recorded bytes waited for ever.)
func TestWatchWithoutItsList(t *testing.T) {
	src := corpusSession(t, "basic-json")
	path := subSession(t, src, exchangeByTarget(t, openSession(t, src), "GET", "watch=true"))
	want := recordedFrames(t, path, "watch=true")

	srv := newTestServer(t, path, Options{Speed: 0})
	if !srv.world.Live() {
		t.Fatal("the default writes mode does not answer from the world")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sp := frame.NewSplitter(frame.JSON, frame.Options{})
	var buf []byte
	got := 0
	for got < len(want) {
		p := make([]byte, 64<<10)
		n, err := resp.Body.Read(p)
		buf = append(buf, p[:n]...)
		for len(buf) > 0 && got < len(want) {
			k, ev, ok, serr := sp.Next(buf)
			if serr != nil {
				t.Fatalf("event %d: %v", got, serr)
			}
			if ok {
				if !bytes.Equal(ev.Data, want[got]) {
					t.Fatalf("event %d:\n got %.300s\nwant %.300s", got, ev.Data, want[got])
				}
				got++
			}
			buf = buf[k:]
			if k == 0 && !ok {
				break
			}
		}
		if err != nil {
			t.Fatalf("after %d of %d events: %v", got, len(want), err)
		}
	}
	if env := srv.Environment(); len(env.Dropped) > 0 {
		t.Errorf("changes dropped: %s", env)
	}
}
