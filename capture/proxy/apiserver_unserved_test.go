package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
)

// unservedWatches are watches of resources kube-apiserver v1.33 does not
// serve (mutatingadmissionpolicies is alpha, off by default; widgets
// exist nowhere; the legacy watch segment), each asked in JSON, protobuf
// and CBOR.
var unservedWatches = []string{
	"/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies?watch=true",
	"/api/v1/namespaces/default/widgets?watch=true&resourceVersion=0",
	"/api/v1/watch/widgets",
}

var unservedAccepts = []string{
	"application/json",
	"application/vnd.kubernetes.protobuf",
	"application/cbor",
}

// answer is what a server sent to one request.
type answer struct {
	status int
	ct     string
	body   []byte
}

func (a answer) String() string {
	return fmt.Sprintf("%d %q, %d bytes %q", a.status, a.ct, len(a.body), a.body[:min(len(a.body), 48)])
}

func get(t *testing.T, c *http.Client, url, accept string) answer {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer not-a-real-token-a1b2c3d4")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
}

// TestRealAPIServerUnservedWatch: a watch request that the real
// kube-apiserver answers with an error (404 and a Status: the resource is
// not served) is recorded as the one opaque body it is — never split as
// a watch stream (issue 34: the 116-byte protobuf Status was read as a
// frame of 1,798,861,568 bytes, its magic taken for a length, and 3
// bytes kept) — over HTTP/1.1 and HTTP/2, in JSON, protobuf and CBOR
// (which this apiserver answers in JSON); and the replay serves the bytes
// the apiserver sent.
func TestRealAPIServerUnservedWatch(t *testing.T) {
	kc, api := startCluster(t)
	// The apiserver's own answers, asked directly: what the recording
	// and the replay must hold.
	want := map[string]answer{}
	for _, path := range unservedWatches {
		for _, accept := range unservedAccepts {
			resp, b := api.c.Do("GET", path, http.Header{"Accept": {accept}}, nil)
			a := answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
			if a.status != http.StatusNotFound {
				t.Fatalf("the apiserver answers GET %s (Accept %s) with %v; want 404", path, accept, a)
			}
			want[path+" "+accept] = a
		}
	}
	if a := want[unservedWatches[0]+" application/vnd.kubernetes.protobuf"]; len(a.body) != 116 || !bytes.HasPrefix(a.body, []byte(frame.ProtobufMagic)) {
		t.Errorf("the apiserver's protobuf 404: %v; want the 116-byte Status of issue 34", a)
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "h2"}[h2], func(t *testing.T) {
			r := startRecording(t, kc, h2, 100*time.Millisecond)
			c := &http.Client{Transport: &http.Transport{}}
			if h2 {
				c = r.clientH2()
			}
			for _, path := range unservedWatches {
				for _, accept := range unservedAccepts {
					if got, w := get(t, c, r.proxy.URL+path, accept), want[path+" "+accept]; got.status != w.status || !bytes.Equal(got.body, w.body) {
						t.Fatalf("GET %s (Accept %s) through the proxy: %v; the apiserver sent %v", path, accept, got, w)
					}
				}
			}
			c.CloseIdleConnections()
			deadline := time.Now().Add(time.Minute)
			for r.tee.Stats().Exchanges < int64(len(want)) {
				if time.Now().After(deadline) {
					t.Fatalf("the tee saw %d exchanges; want %d", r.tee.Stats().Exchanges, len(want))
				}
				time.Sleep(10 * time.Millisecond)
			}
			r.stop(t)
			checkUnservedSession(t, r.path, want, h2)
			checkUnservedReplay(t, r.path, want)
		})
	}
}

// checkUnservedSession checks that each exchange holds the apiserver's
// answer as one opaque body, its bytes whole, with no anomaly.
func checkUnservedSession(t *testing.T, path string, want map[string]answer, h2 bool) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	accept := map[int64]string{}
	bodies := map[int64][]byte{}
	for rec, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		switch rec := rec.(type) {
		case *formats.Request:
			for _, h := range rec.Header {
				if strings.EqualFold(h.Name, "Accept") {
					accept[rec.Exchange] = h.Value
				}
			}
		case *formats.Body:
			if rec.Dir == formats.ServerToClient {
				bodies[rec.Exchange] = append(bodies[rec.Exchange], rec.Data...)
			}
		case *formats.Frame:
			t.Errorf("exchange %d: a watch frame of %d bytes; the apiserver's answer is no stream", rec.Exchange, len(rec.Data))
		case *formats.Anomaly:
			t.Errorf("exchange %d: anomaly %s: %s", rec.Exchange, rec.Kind, rec.Message)
		}
	}
	seen := 0
	for _, x := range f.Index().Exchanges {
		w, ok := want[x.Request.Target+" "+accept[x.Request.Exchange]]
		if !ok {
			continue
		}
		seen++
		what := fmt.Sprintf("exchange %d (%s, Accept %s)", x.Request.Exchange, x.Request.Target, accept[x.Request.Exchange])
		if x.Response == nil || x.Response.Status != w.status || x.Response.Events != frame.Unknown {
			t.Errorf("%s: response %+v; want status %d, no events", what, x.Response, w.status)
			continue
		}
		if h2 && x.Response.Proto != "HTTP/2.0" {
			t.Errorf("%s: proto %q; want HTTP/2.0", what, x.Response.Proto)
		}
		if !bytes.Equal(bodies[x.Request.Exchange], w.body) {
			t.Errorf("%s: %d body bytes stored %q; the apiserver sent %v", what, len(bodies[x.Request.Exchange]), bodies[x.Request.Exchange], w)
		}
		if x.End == nil || x.End.Status != formats.EndComplete || x.End.Size != int64(len(w.body)) {
			t.Errorf("%s: end %+v; want complete, %d bytes", what, x.End, len(w.body))
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d requests found in the session", seen, len(want))
	}
}

// checkUnservedReplay replays the session and asks it the same requests:
// it answers what the apiserver did, byte for byte.
func checkUnservedReplay(t *testing.T, path string, want map[string]answer) {
	t.Helper()
	srv, err := replay.Open(path, replay.Options{Writes: replay.WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	for _, path := range unservedWatches {
		for _, accept := range unservedAccepts {
			w := want[path+" "+accept]
			got := get(t, c, srv.URL+path, accept)
			if got.status != w.status || got.ct != w.ct || !bytes.Equal(got.body, w.body) {
				t.Errorf("the replay answers GET %s (Accept %s) with %v; the apiserver sent %v", path, accept, got, w)
			}
		}
	}
}
