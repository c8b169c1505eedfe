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

// TestResumeServedRV: after a client's write took the number of the next
// recorded event, every recorded event after it goes out shifted, and a
// watch resumed from any resourceVersion the replay served — a shifted
// one, or the write's own — gets the rest of the history with the same
// numbers.
func TestResumeServedRV(t *testing.T) {
	path := corpusSession(t, "basic-json")
	srv := newTestServer(t, path, Options{Speed: 0})
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	req, _ := http.NewRequest("POST", srv.URL+cms, strings.NewReader(`{"metadata":{"name":"resume-me"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, answer)
	}
	wrv := rvOfJSON(t, answer)
	watch := func(rv string, timeout ...string) []frame.Meta {
		ts := "30" // recorded watches end as recorded; the world's stay open until then
		if len(timeout) > 0 {
			ts = timeout[0]
		}
		_, b := get(t, srv.Client(), srv.URL+cms+"?watch=true&timeoutSeconds="+ts+"&resourceVersion="+rv)
		var out []frame.Meta
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			m, err := frame.Peek(frame.JSON, l)
			if err != nil {
				t.Fatalf("watch from %s: %v: %.100q", rv, err, l)
			}
			out = append(out, m)
		}
		return out
	}
	all := watch("205")
	if len(all) != 200 {
		t.Fatalf("watch from 205: %d events; want 200", len(all))
	}
	w, _ := rvNumber(wrv)
	first, _ := rvNumber(all[0].ResourceVersion)
	if first <= w {
		t.Fatalf("first recorded event after the write: resourceVersion %d, not above the write's %d", first, w)
	}
	for _, k := range []int{0, 99, 198} {
		rest := watch(all[k].ResourceVersion)
		if len(rest) != len(all)-k-1 {
			t.Fatalf("watch from %s (event %d): %d events; want %d", all[k].ResourceVersion, k, len(rest), len(all)-k-1)
		}
		for i, e := range rest {
			if want := all[k+1+i]; e.ResourceVersion != want.ResourceVersion || e.Name != want.Name || e.Type != want.Type {
				t.Fatalf("watch from %s, event %d = %s %s %s; want %s %s %s", all[k].ResourceVersion, i, e.Type, e.Name, e.ResourceVersion, want.Type, want.Name, want.ResourceVersion)
			}
		}
	}
	// From the write's own resourceVersion: the recorded history after it.
	rest := watch(wrv, "2")
	if len(rest) != len(all) || rest[0].ResourceVersion != all[0].ResourceVersion {
		t.Fatalf("watch from the write's %s: %d events from %v; want the %d recorded from %s", wrv, len(rest), rest[0].ResourceVersion, len(all), all[0].ResourceVersion)
	}
}
