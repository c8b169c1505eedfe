package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// watchReader reads a JSON watch stream's events into a channel.
func watchReader(t *testing.T, body io.Reader) <-chan []byte {
	ch := make(chan []byte, 1024)
	go func() {
		defer close(ch)
		dec := json.NewDecoder(body)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return
			}
			ch <- raw
		}
	}()
	return ch
}

// nextEvent waits (in real time) for the next event of a stream.
func nextEvent(t *testing.T, ch <-chan []byte, what string) frame.Meta {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		m, err := frame.Peek(frame.JSON, ev)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		m.Kind = string(ev) // the bytes, for the checks
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no event within 30s", what)
	}
	return frame.Meta{}
}

// TestApplyInterleaves: with WritesApply, a watcher of a recorded watch
// (virtual time, speed 1) gets the event a client's write causes at the
// moment of the write, between the recorded events, with a
// resourceVersion between theirs; later recorded events keep coming in
// order with resourceVersions that only grow, and a later recorded event
// for the written object is the world's truth. With WritesAnswer the
// watcher sees the recording alone.
func TestApplyInterleaves(t *testing.T) {
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	evs := sessionEvents(t, f, id)
	start := f.Index().Exchanges[id].Response.Time
	// The write goes to an object the recording modifies after event k.
	k, name := -1, ""
	for i := 40; i < len(evs) && k < 0; i++ {
		if evs[i].meta.Type != "MODIFIED" {
			continue
		}
		for j := i + 1; j < len(evs); j++ {
			if evs[j].meta.Name == evs[i].meta.Name && evs[j].meta.Type == "MODIFIED" {
				k, name = i, evs[i].meta.Name
				break
			}
		}
	}
	if k < 0 {
		t.Fatal("no object modified twice")
	}
	for _, mode := range []Writes{WritesApply, WritesAnswer} {
		t.Run(string(mode), func(t *testing.T) {
			arrival := time.Unix(1_800_000_000, 0)
			clock := NewFakeClock(arrival)
			srv := newTestServer(t, path, Options{Speed: 1, Clock: clock, Writes: mode})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			ch := watchReader(t, resp.Body)
			var got []frame.Meta
			advanceTo := func(i int) { // until event i was received
				for len(got) <= i {
					due := arrival.Add(time.Duration(evs[len(got)].time - start))
					if !clock.Now().Before(due) {
						got = append(got, nextEvent(t, ch, "recorded event"))
						continue
					}
					if err := clock.BlockUntil(ctx, 1); err != nil {
						t.Fatal(err)
					}
					next, _ := clock.Next()
					clock.AdvanceTo(next)
				}
			}
			advanceTo(k)

			// A client's write, between recorded events k and k+1.
			body := `{"metadata":{"labels":{"written":"by-a-client"}}}`
			preq, _ := http.NewRequest("PATCH", srv.URL+"/api/v1/namespaces/corpus-basic/configmaps/"+name, strings.NewReader(body))
			preq.Header.Set("Content-Type", "application/merge-patch+json")
			presp, err := srv.Client().Do(preq)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(presp.Body)
			presp.Body.Close()
			if presp.StatusCode != 200 {
				t.Fatalf("PATCH %s: %d %s", name, presp.StatusCode, answer)
			}
			wrv := rvOfJSON(t, answer)

			if mode == WritesApply {
				// At once: no clock moves before it arrives.
				ev := nextEvent(t, ch, "the write's event")
				if ev.Type != "MODIFIED" || ev.Name != name || ev.ResourceVersion != wrv || !strings.Contains(ev.Kind, "by-a-client") {
					t.Fatalf("after the write: %s %s %s %.200s; want MODIFIED %s %s with the label", ev.Type, ev.Name, ev.ResourceVersion, ev.Kind, name, wrv)
				}
			}
			advanceTo(len(evs) - 1)
			prev := uint64(0)
			for i, e := range got {
				if e.Type != evs[i].meta.Type || e.Name != evs[i].meta.Name {
					t.Fatalf("recorded event %d = %s %s; want %s %s", i, e.Type, e.Name, evs[i].meta.Type, evs[i].meta.Name)
				}
				n, _ := rvNumber(e.ResourceVersion)
				if i == k+1 && mode == WritesApply {
					w, _ := rvNumber(wrv)
					if w <= prev || w >= n {
						t.Fatalf("the write's resourceVersion %d is not between %d and %d", w, prev, n)
					}
				}
				if n <= prev {
					t.Fatalf("event %d: resourceVersion %d after %d", i, n, prev)
				}
				prev = n
				if i <= k && !bytes.Equal([]byte(e.Kind), evs[i].data) {
					t.Fatalf("event %d before the write is not the recorded bytes", i)
				}
			}
			// The later recorded version of the object is the world's.
			_, b := get(t, srv.Client(), srv.URL+"/api/v1/namespaces/corpus-basic/configmaps/"+name)
			if strings.Contains(string(b), "by-a-client") {
				t.Errorf("GET %s after a later recorded change = %.200s; want the recorded version", name, b)
			}
		})
	}
}

// rvOfJSON reads metadata.resourceVersion of a JSON object.
func rvOfJSON(t *testing.T, b []byte) string {
	t.Helper()
	var o struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Metadata.ResourceVersion == "" {
		t.Fatalf("no resourceVersion in %.200s: %v", b, err)
	}
	return o.Metadata.ResourceVersion
}
