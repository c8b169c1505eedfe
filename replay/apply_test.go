package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/tape"
	"github.com/wtrace/wtrace/testkit/wttest"
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

// TestWorldInterleaves: a replay that answers writes is one world. A
// watcher (virtual time, speed 1) gets the environment's changes — every
// change of a capture whose clients are all environment — at their
// recorded times, each recorded event byte for byte while the world holds
// what the recording did; a client's write lands at once, its event sent
// between two recorded ones, its resourceVersion between theirs; and the
// environment's later change of the written object is applied to the
// client's version (rebased), not over it: the client's label stays.
func TestWorldInterleaves(t *testing.T) {
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	evs := sessionEvents(t, f, id)
	// The write goes to an object the recording modifies after event k.
	k, later, name := -1, -1, ""
	for i := 40; i < len(evs) && k < 0; i++ {
		if evs[i].meta.Type != "MODIFIED" {
			continue
		}
		for j := i + 1; j < len(evs); j++ {
			if evs[j].meta.Name == evs[i].meta.Name && evs[j].meta.Type == "MODIFIED" {
				k, later, name = i, j, evs[i].meta.Name
				break
			}
		}
	}
	if k < 0 {
		t.Fatal("no object modified twice")
	}
	arrival := time.Unix(1_800_000_000, 0)
	clock := NewFakeClock(arrival)
	srv := newTestServer(t, path, Options{Speed: 1, Clock: clock})
	start := srv.store.Environment().Start
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	_, list := get(t, srv.Client(), srv.URL+cms)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+cms+"?watch=true&resourceVersion="+jsonListRV(t, list), nil)
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
	preq, _ := http.NewRequest("PATCH", srv.URL+cms+"/"+name, strings.NewReader(body))
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
	// At once: no clock moves before it arrives.
	ev := nextEvent(t, ch, "the write's event")
	if ev.Type != "MODIFIED" || ev.Name != name || ev.ResourceVersion != wrv || !strings.Contains(ev.Kind, "by-a-client") {
		t.Fatalf("after the write: %s %s %s %.200s; want MODIFIED %s %s with the label", ev.Type, ev.Name, ev.ResourceVersion, ev.Kind, name, wrv)
	}
	got = append(got, frame.Meta{}) // the write's place
	evs = append(evs[:k+1], append([]recordedEvent{{}}, evs[k+1:]...)...)
	later++
	advanceTo(later)
	_, b := get(t, srv.Client(), srv.URL+cms+"/"+name)
	if !strings.Contains(string(b), "by-a-client") {
		t.Errorf("GET %s after the recording's later change = %.200s; want the client's label kept", name, b)
	}
	advanceTo(len(evs) - 1)
	prev := uint64(0)
	for i, e := range got {
		if i == k+1 {
			continue
		}
		if e.Type != evs[i].meta.Type || e.Name != evs[i].meta.Name {
			t.Fatalf("event %d = %s %s; want %s %s", i, e.Type, e.Name, evs[i].meta.Type, evs[i].meta.Name)
		}
		n, _ := tape.RVNumber(e.ResourceVersion)
		if i == k+2 {
			if w, _ := tape.RVNumber(wrv); w <= prev || w >= n {
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
	// The recording's later change of the object, rebased on the client's.
	if e := got[later]; e.Name != name || !strings.Contains(e.Kind, "by-a-client") {
		t.Errorf("the recording's later change of %s: %.300s; want the client's label kept", name, e.Kind)
	}
	if env := srv.Environment(); env.Applied != env.Changes || len(env.Dropped) != 0 {
		t.Errorf("environment: %s; want every change applied", env)
	}
}

// jsonListRV reads metadata.resourceVersion of a JSON list.
func jsonListRV(t *testing.T, b []byte) string {
	t.Helper()
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Metadata.ResourceVersion == "" {
		t.Fatalf("no resourceVersion in list %.200s: %v", b, err)
	}
	return l.Metadata.ResourceVersion
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

// TestWorldResume: a watch of the world resumed from any resourceVersion
// the replay served — a recorded one, or a client's write's — gets the
// rest of the history with the same numbers; one older than the world's
// start gets a 410 Expired event.
func TestWorldResume(t *testing.T) {
	path := corpusSession(t, "basic-json")
	srv := newTestServer(t, path, Options{Speed: 0})
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	_, list := get(t, srv.Client(), srv.URL+cms)
	start := jsonListRV(t, list)
	watch := func(rv, timeout string) []frame.Meta {
		_, b := get(t, srv.Client(), srv.URL+cms+"?watch=true&timeoutSeconds="+timeout+"&resourceVersion="+rv)
		var out []frame.Meta
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			m, err := frame.Peek(frame.JSON, l)
			if err != nil {
				t.Fatalf("watch from %s: %v: %.100q", rv, err, l)
			}
			out = append(out, m)
		}
		return out
	}
	// watchN reads a watch from rv until it has n events (or it ends):
	// what a history of n holds must not depend on how fast the server
	// writes it (a timeout of 1 s does under the race detector).
	watchN := func(rv string, n int) []frame.Meta {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+cms+"?watch=true&timeoutSeconds=60&resourceVersion="+rv, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []frame.Meta
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for len(out) < n && sc.Scan() {
			m, err := frame.Peek(frame.JSON, sc.Bytes())
			if err != nil {
				t.Fatalf("watch from %s: %v: %.100q", rv, err, sc.Bytes())
			}
			out = append(out, m)
		}
		return out
	}
	// Speed 0: the environment is applied once the client went quiet.
	wttest.WaitFor(t, time.Minute, func() bool {
		select {
		case <-srv.EnvironmentDone():
			return true
		default:
			return false
		}
	}, "the environment to be played")
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
	// The recorded events after the LIST's resourceVersion, and the
	// client's: the LIST may come before the environment's first change
	// or after it (Speed 0 applies it once the clients are quiet).
	want := 1
	{
		f := openSession(t, path)
		sc := f.ExchangeRecords(exchangeByTarget(t, f, "GET", "watch=true"))
		startN, _ := strconv.Atoi(start)
		for r, err := sc.Next(); err == nil; r, err = sc.Next() {
			if fr, ok := r.(*formats.Frame); ok {
				m, _ := frame.Peek(frame.JSON, fr.Data)
				if n, _ := strconv.Atoi(m.ResourceVersion); n > startN {
					want++
				}
			}
		}
	}
	all := watchN(start, want)
	if len(all) != want {
		t.Fatalf("watch from %s: %d events; want the %d recorded after it and the client's", start, len(all), want-1)
	}
	if last := all[want-1]; last.Name != "resume-me" || last.ResourceVersion != wrv {
		t.Fatalf("last event %s %s %s; want ADDED resume-me %s", last.Type, last.Name, last.ResourceVersion, wrv)
	}
	for _, k := range []int{0, 99, 198} {
		rest := watchN(all[k].ResourceVersion, len(all)-k-1)
		if len(rest) != len(all)-k-1 {
			t.Fatalf("watch from %s (event %d): %d events; want %d", all[k].ResourceVersion, k, len(rest), len(all)-k-1)
		}
		for i, e := range rest {
			if want := all[k+1+i]; e.ResourceVersion != want.ResourceVersion || e.Name != want.Name || e.Type != want.Type {
				t.Fatalf("watch from %s, event %d = %s %s %s; want %s %s %s", all[k].ResourceVersion, i, e.Type, e.Name, e.ResourceVersion, want.Type, want.Name, want.ResourceVersion)
			}
		}
	}
	if rest := watch(wrv, "1"); len(rest) != 0 {
		t.Fatalf("watch from the write's %s: %d events; want none", wrv, len(rest))
	}
	if old := watch("2", "1"); len(old) != 1 || old[0].Type != "ERROR" {
		t.Fatalf("watch from 2: %v; want one ERROR (410 Expired)", old)
	}
}
