package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSliceCLI: wtrace slice of the basic-json session from 10s to 20s
// holds a LIST synthesized at the resourceVersion of the last event before
// 10s and the watch's events of the window, bytes as recorded; its Meta
// says where it came from; usage errors exit 2. replay --from 10s --to 20s
// serves a client the same LIST and the same events.
func TestSliceCLI(t *testing.T) {
	dir := t.TempDir()
	session := filepath.Join(dir, "s.wt")
	recordScenario(t, "basic-json", session)
	out := filepath.Join(dir, "slice.wt")
	stdout, stderr, code := wtrace(t, "slice", session, "-o", out, "--from", "10s", "--to", "20s")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "1 watches cut") || !strings.Contains(stderr, "1 LISTs synthesized") {
		t.Fatalf("slice: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	all, _, _ := wtrace(t, "events", session)
	evs := parseEvents(t, all)
	start, _ := time.Parse(time.RFC3339Nano, "2026-11-21T12:03:26.867311Z") // the capture's first packet
	from, to := start.Add(10*time.Second), start.Add(20*time.Second)
	var want []line
	lastRV := ""
	for _, e := range evs {
		at, _ := time.Parse(time.RFC3339Nano, e.Time)
		switch {
		case at.Before(from):
			lastRV = e.ResourceVersion
		case !at.After(to):
			want = append(want, e)
		}
	}
	got, _, _ := wtrace(t, "events", out)
	gotEvs := parseEvents(t, got)
	if len(gotEvs) != len(want) || len(want) == 0 {
		t.Fatalf("the slice holds %d events; want the %d of the window", len(gotEvs), len(want))
	}
	for i := range want {
		g, w := gotEvs[i], want[i]
		if g.SHA256 != w.SHA256 || g.Time != w.Time || g.Seq != i {
			t.Errorf("event %d: %+v; want %+v", i, g, w)
		}
	}
	if !strings.Contains(gotEvs[0].Request, "resourceVersion="+lastRV+"&") {
		t.Errorf("the watch of the slice is %q; want it from resourceVersion %s", gotEvs[0].Request, lastRV)
	}
	js, _, _ := wtrace(t, "inspect", "--json", out)
	for _, w := range []string{`"sliced-from": "s.wt"`, `"slice-from": "2026-11-21T12:03:36.867311Z"`, `"slice-to": "2026-11-21T12:03:46.867311Z"`} {
		if !strings.Contains(js, w) {
			t.Errorf("inspect --json lacks %s:\n%s", w, js)
		}
	}

	for _, args := range [][]string{
		{"slice", session},
		{"slice", session, "-o", session},
		{"slice", session, "-o", out, "--from", "ten"},
		{"slice", session, "-o", out, "--from", "20s", "--to", "10s"},
		{"replay", session, "--from", "soon"},
	} {
		if _, stderr, code := wtrace(t, args...); code != 2 || !strings.Contains(stderr, "Error:") {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, stderr)
		}
	}

	// replay --from/--to: the LIST at the cut, then the window's events.
	c := startChild(t, "replay", session, "--listen", "127.0.0.1:0", "--speed", "0", "--from", "10s", "--to", "20s")
	base := waitMatch(t, c.errw.lines, `^Listening on (http://127\.0\.0\.1:\d+)`, c.errw.String)[1]
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	resp, err := http.Get(base + cms)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	err = json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if err != nil || l.Metadata.ResourceVersion != lastRV {
		t.Fatalf("LIST of replay --from: resourceVersion %q (%v); want %s", l.Metadata.ResourceVersion, err, lastRV)
	}
	resp, err = http.Get(base + cms + "?watch=true&timeoutSeconds=5&resourceVersion=" + lastRV)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	n := 0
	for n < len(want) && sc.Scan() {
		var ev struct {
			Object struct {
				Metadata struct{ ResourceVersion string }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if rv := ev.Object.Metadata.ResourceVersion; rv != want[n].ResourceVersion {
			t.Fatalf("event %d of replay --from: resourceVersion %s; want %s", n, rv, want[n].ResourceVersion)
		}
		n++
	}
	// The watch stays open until timeoutSeconds: nothing after --to.
	var rest []string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			rest = append(rest, l)
		}
	}
	resp.Body.Close()
	if len(rest) > 0 {
		t.Errorf("replay --to sent %d events after the window: %.200q", len(rest), rest)
	}
	if n != len(want) {
		t.Fatalf("replay --from sent %d events; want %d", n, len(want))
	}
	c.signal(t, syscall.SIGINT)
	if code := c.wait(t); code != 0 {
		t.Fatalf("replay exit %d:\n%s", code, c.errw.String())
	}
}
