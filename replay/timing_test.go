package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// sessionChunks returns the chunk records of exchange id.
func sessionChunks(t testing.TB, f *formats.File, id int64) []formats.Chunk {
	t.Helper()
	sc := f.ExchangeRecords(id)
	var cs []formats.Chunk
	for {
		r, err := sc.Next()
		if err == io.EOF {
			return cs
		}
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := r.(*formats.Chunk); ok {
			cs = append(cs, *c)
		}
	}
}

// TestVirtualTime replays the basic-json watch on a fake clock and checks
// that the server waits for exactly the recorded write times (each chunk,
// or each event with EventChunks, then the end of the stream), scaled by the
// speed, and that every event arrives, byte for byte, once the clock
// reaches request arrival + (event time − response start) / speed.
func TestVirtualTime(t *testing.T) {
	path, f, id, info := basicWatch(t)
	start := info.Response.Time
	evs := sessionEvents(t, f, id)
	chunks := sessionChunks(t, f, id)
	if len(evs) == 0 || len(chunks) == 0 {
		t.Fatalf("exchange %d: %d events, %d chunks", id, len(evs), len(chunks))
	}

	for _, c := range []struct {
		speed       float64
		eventChunks bool
	}{{1, false}, {10, false}, {1, true}, {2.5, true}} {
		t.Run(fmt.Sprintf("speed=%g,eventChunks=%v", c.speed, c.eventChunks), func(t *testing.T) {
			scale := func(d int64) time.Duration {
				if c.speed == 1 {
					return time.Duration(d)
				}
				return time.Duration(float64(d) / c.speed)
			}
			arrival := time.Unix(1_800_000_000, 0)
			clock := NewFakeClock(arrival)
			srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: c.speed, Clock: clock, EventChunks: c.eventChunks})
			// The writes the server must wait for, in order.
			var waits []time.Time
			add := func(at time.Time) {
				if at.After(arrival) && (len(waits) == 0 || at.After(waits[len(waits)-1])) {
					waits = append(waits, at)
				}
			}
			if c.eventChunks {
				for _, e := range evs {
					add(arrival.Add(scale(e.time - start)))
				}
			} else {
				for _, ch := range chunks {
					add(arrival.Add(scale(ch.Time - start)))
				}
			}
			end := arrival.Add(scale(info.End.Time - start))
			add(end)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			dec := json.NewDecoder(resp.Body)
			next := 0 // next event to read
			readDue := func(now time.Time) {
				for next < len(evs) && !arrival.Add(scale(evs[next].time-start)).After(now) {
					var raw json.RawMessage
					if err := dec.Decode(&raw); err != nil {
						t.Fatalf("event %d (due %v): %v", next, scale(evs[next].time-start), err)
					}
					if !bytes.Equal(raw, evs[next].data) {
						t.Fatalf("event %d = %.80q…; want %.80q…", next, raw, evs[next].data)
					}
					next++
				}
			}
			readDue(arrival)
			for i, w := range waits {
				if err := clock.BlockUntil(ctx, 1); err != nil {
					t.Fatalf("wait %d: the server never waited for %v (%d events read)", i, w.Sub(arrival), next)
				}
				got, _ := clock.Next()
				if !got.Equal(w) {
					t.Fatalf("wait %d: the server waits until arrival+%v; want arrival+%v (%d events read)", i, got.Sub(arrival), w.Sub(arrival), next)
				}
				clock.AdvanceTo(got)
				readDue(got)
			}
			if next != len(evs) {
				t.Fatalf("read %d events, want %d", next, len(evs))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != io.EOF {
				t.Fatalf("after the last event: Decode = %v, %.40q; want io.EOF (clean end)", err, raw)
			}
		})
	}
}

// TestLoop: with Loop, a watch that reaches its recorded end starts over
// from its first event, one recorded duration later, and never ends by
// itself.
func TestLoop(t *testing.T) {
	e1 := []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"101"}}}`)
	e2 := []byte(`{"type":"DELETED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"102"}}}`)
	path := writeSession(t, synthExchange{target: "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=100", header: jsonHeader(),
		events: frame.JSON, frames: [][]byte{e1, e2}, chunked: true, tail: []byte("\n")})
	// Recorded, from the response: e1 at 100 ms, e2 at 200 ms, end (tail) at 300 ms.
	arrival := time.Unix(1_800_000_000, 0)
	clock := NewFakeClock(arrival)
	srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 2, Clock: clock, Loop: true})
	r := rawGet(t, srv.URL, "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=100")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := []struct {
		at   time.Duration
		data string
	}{
		{50 * time.Millisecond, string(e1)}, {100 * time.Millisecond, "\n" + string(e2)}, {150 * time.Millisecond, "\n"},
		{200 * time.Millisecond, string(e1)}, {250 * time.Millisecond, "\n" + string(e2)}, {300 * time.Millisecond, "\n"},
		{350 * time.Millisecond, string(e1)},
	}
	for i, w := range want {
		if err := clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		next, _ := clock.Next()
		if got := next.Sub(arrival); got != w.at {
			t.Fatalf("write %d: the server waits until arrival+%v; want arrival+%v", i, got, w.at)
		}
		clock.AdvanceTo(next)
		c, err := r.nextChunk()
		if err != nil || string(c) != w.data {
			t.Fatalf("write %d: chunk %q, %v; want %q", i, c, err, w.data)
		}
	}
}

// TestTimeoutScaled: the basic-json watch, which the apiserver ended at
// the client's timeoutSeconds=30, replayed at Speed 2 on a fake clock:
// with the recorded timeoutSeconds=30 it ends cleanly after 15 s of replay
// time with every event, as the recorded stream ended; with
// timeoutSeconds=12 after 6 s, with exactly the events recorded in its
// first 12 s.
func TestTimeoutScaled(t *testing.T) {
	path, f, id, info := basicWatch(t)
	start := info.Response.Time
	evs := sessionEvents(t, f, id)
	if d := time.Duration(info.End.Time - start); info.End.Status != formats.EndComplete || d < 30*time.Second || d > 31*time.Second {
		t.Fatalf("the recorded watch ended %v after %v; want complete after its timeoutSeconds=30", info.End.Status, d)
	}
	for _, c := range []struct {
		timeout time.Duration
		events  int
	}{{30 * time.Second, len(evs)}, {12 * time.Second, -1}} {
		t.Run(fmt.Sprint(c.timeout), func(t *testing.T) {
			want := c.events
			if want < 0 {
				want = 0
				for _, e := range evs {
					if time.Duration(e.time-start) <= c.timeout {
						want++
					}
				}
				if want == 0 || want == len(evs) {
					t.Fatalf("%d of %d events in the first %v: pick another timeout", want, len(evs), c.timeout)
				}
			}
			arrival := time.Unix(1_800_000_000, 0)
			clock := NewFakeClock(arrival)
			srv := newTestServer(t, path, Options{Writes: WritesReject, Speed: 2, Clock: clock})
			r := rawGet(t, srv.URL, fmt.Sprintf("/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=%d", int(c.timeout.Seconds())))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			ended, stop := context.WithCancel(ctx)
			defer stop()
			var body []byte
			go func() {
				cs, err := r.chunks()
				for _, c := range cs {
					body = append(body, c...)
				}
				done <- err
				stop()
			}()
			var last time.Time
			for {
				err := clock.BlockUntil(ended, 1)
				select {
				case err := <-done:
					if err != io.EOF {
						t.Fatalf("the stream ended with %v; want a clean end", err)
					}
					if got := last.Sub(arrival); got != c.timeout/2 {
						t.Errorf("the stream ended at arrival+%v of replay time; want timeoutSeconds/Speed = %v", got, c.timeout/2)
					}
					n := 0
					for dec := json.NewDecoder(bytes.NewReader(body)); ; n++ {
						var raw json.RawMessage
						if err := dec.Decode(&raw); err == io.EOF {
							break
						} else if err != nil {
							t.Fatalf("event %d: %v", n, err)
						}
						if !bytes.Equal(raw, evs[n].data) {
							t.Fatalf("event %d is not the recorded one", n)
						}
					}
					if n != want {
						t.Errorf("%d events; want the %d recorded in the first %v", n, want, c.timeout)
					}
					return
				default:
				}
				if err != nil {
					t.Fatalf("the server waits for nothing and the stream did not end: %v", err)
				}
				next, _ := clock.Next()
				last = next
				clock.AdvanceTo(next)
			}
		})
	}
}
