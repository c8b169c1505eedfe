package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
)

// startLater writes the packets of capture in captured at time from or
// later to a new capture: what tcpdump started then would have seen.
func startLater(t *testing.T, in string, from int64) string {
	t.Helper()
	src, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, err := pcapfile.NewReader(src, pcapfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "later.pcap")
	dst, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	w, err := pcapfile.NewWriter(dst, r.LinkType(), 262144)
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Time >= from {
			if err := w.WritePacket(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// midstreamExchange returns the session's exchanges whose request was not
// captured, with their events.
func midstreamExchanges(t *testing.T, f *formats.File) map[int64][]recordedEvent {
	t.Helper()
	out := map[int64][]recordedEvent{}
	for _, x := range f.Index().Exchanges {
		if x.Request.Missing && x.Response != nil && x.Response.Events != 0 {
			out[x.Request.Exchange] = sessionEvents(t, f, x.Request.Exchange)
		}
	}
	return out
}

// TestMidstream: watches whose requests were not captured are served to
// clients whose watch names the path their events show. The basic-json
// capture started 5 s into its watch (a derivative made here: the packets
// from then on), and the shared corpus's midstream capture (two watches
// through kubectl proxy, one captured from inside a chunk): a watch of
// the events' namespace and resource gets a captured watch's events byte
// for byte, resumes after any of its events' resourceVersions; another
// namespace or resource does not get it.
func TestMidstream(t *testing.T) {
	basic := filepath.Join(corpusDir, "basic-json", "capture.pcap")
	if _, err := os.Stat(basic); err != nil {
		t.Skipf("corpus capture %s not available: %v", basic, err)
	}
	whole := openSession(t, corpusSession(t, "basic-json"))
	w := exchangeByTarget(t, whole, "GET", "watch=true")
	later := filepath.Join(t.TempDir(), "later.wt")
	if err := recordPcap(startLater(t, basic, whole.Index().Exchanges[w].Response.Time+5e9), later); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, ns, resource, other string
	}{
		{"basic-json started 5s late", later, "corpus-basic", "configmaps", "/api/v1/namespaces/corpus-basic/secrets?watch=true"},
	}
	shared := filepath.Join("..", "..", "shared", "corpus", "midstream", "capture.pcap")
	if _, err := os.Stat(shared); err == nil {
		mid := filepath.Join(t.TempDir(), "midstream.wt")
		if err := recordPcap(shared, mid); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, ns, resource, other string }{
			"shared midstream", mid, "corpus-mid", "configmaps", "/api/v1/namespaces/other/configmaps?watch=true"})
	} else {
		t.Logf("shared corpus not found: %s only", cases[0].name)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := openSession(t, c.path)
			xs := midstreamExchanges(t, f)
			if len(xs) == 0 {
				t.Fatal("no exchange without its request")
			}
			srv := newTestServer(t, c.path, Options{Writes: WritesReject, Speed: 0})
			for id, evs := range xs {
				if got, _ := world.MidstreamTarget(f, &f.Index().Exchanges[id]); got != "/api/v1/namespaces/"+c.ns+"/"+c.resource+"?watch=true" {
					t.Errorf("exchange %d: target %q", id, got)
				}
				if len(evs) < 3 {
					t.Fatalf("exchange %d: %d events", id, len(evs))
				}
				// Resume after the first captured event: the rest, byte
				// for byte, then the end as recorded.
				from := evs[0].meta.ResourceVersion
				r := rawGet(t, srv.URL, fmt.Sprintf("/api/v1/namespaces/%s/%s?watch=true&resourceVersion=%s", c.ns, c.resource, from))
				if r.status != 200 {
					t.Fatalf("watch from %s: status %d", from, r.status)
				}
				body, err := r.body()
				if err != nil {
					t.Fatalf("watch from %s: %v", from, err)
				}
				checkEvents(t, body, evs[1:])
			}
			// A watch from "" gets the captured watches in order.
			var first int64 = -1
			for id := range xs {
				if first < 0 || id < first {
					first = id
				}
			}
			r := rawGet(t, srv.URL, fmt.Sprintf("/api/v1/namespaces/%s/%s?watch=1", c.ns, c.resource))
			body, err := r.body()
			if err != nil || r.status != 200 {
				t.Fatalf("watch from \"\": %d %v", r.status, err)
			}
			checkEvents(t, body, xs[first])
			r = rawGet(t, srv.URL, c.other+"&timeoutSeconds=1")
			b, _ := r.body()
			if r.status == 200 && bytes.Contains(b, []byte(`"type"`)) {
				t.Errorf("%s got events: %.200s", c.other, b)
			}
			t.Logf("%d exchanges without their request served", len(xs))
		})
	}
}

// checkEvents checks that a JSON watch body holds exactly evs' bytes.
func checkEvents(t *testing.T, body []byte, evs []recordedEvent) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	for i, e := range evs {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("event %d of %d: %v", i, len(evs), err)
		}
		if !bytes.Equal(raw, e.data) {
			t.Fatalf("event %d = %.100q…; want %.100q…", i, raw, e.data)
		}
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != io.EOF {
		t.Fatalf("after %d events: %v %.100q; want the end", len(evs), err, raw)
	}
}
