package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// stagedUpstream is an apiserver whose watch writes what the test hands
// it, piece by piece (an event cut anywhere), and never ends on its own.
type stagedUpstream struct {
	*httptest.Server
	contentType string
	pieces      chan []byte
	head        chan struct{} // a watch without its head until closed
}

func newStagedUpstream(t *testing.T, contentType string, head bool) *stagedUpstream {
	u := &stagedUpstream{contentType: contentType, pieces: make(chan []byte), head: make(chan struct{})}
	if head {
		close(u.head)
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-u.head:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", u.contentType)
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case p := <-u.pieces:
				w.Write(p)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// send hands the watch a piece; it fails the test if the watch is gone.
func (u *stagedUpstream) send(t *testing.T, p []byte) {
	t.Helper()
	select {
	case u.pieces <- p:
	case <-time.After(time.Minute):
		t.Fatal("the upstream watch did not take a piece within a minute")
	}
}

// startProxy serves a Proxy in front of url on loopback.
func startProxy(t *testing.T, url string, tlsOn bool) *Proxy {
	t.Helper()
	p, err := New(&rest.Config{Host: url}, Options{Listen: "127.0.0.1:0", TLS: tlsOn})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// splitAll splits what a client received into whole events; it fails if
// the bytes end inside one.
func splitAll(t *testing.T, f frame.Format, b []byte) int {
	t.Helper()
	sp := frame.NewSplitter(f, frame.Options{})
	n := 0
	for p := b; len(p) > 0; {
		m, _, ok, err := sp.Next(p)
		if err != nil {
			t.Fatalf("the client's bytes are not whole events: %v", err)
		}
		if ok {
			n++
		}
		p = p[m:]
	}
	if tail, err := sp.End(); err != nil {
		t.Errorf("the client's stream ends inside an event (%d bytes of it): %v", len(tail), err)
	}
	return n
}

func protoFrame(payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(b, payload...)
}

// TestShutdownEndsWatchesBetweenEvents: the proxy's Shutdown ends every
// watch it proxies at an event boundary, cleanly — the terminating chunk
// over HTTP/1.1, END_STREAM over HTTP/2 — whether the client was sent a
// whole event (it ends at once) or part of one (the rest of that event
// is sent, then the end), in JSON and protobuf; a watch whose answer has
// not begun gets 503 ServiceUnavailable. Shutdown returns before its
// deadline: nothing had to be cut.
func TestShutdownEndsWatchesBetweenEvents(t *testing.T) {
	jsonEvent := []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7"},"data":{"v":"` + strings.Repeat("x", 3000) + `"}}}` + "\n")
	pbEvent := protoFrame(append([]byte{0x0a, 0x05}, append([]byte("ADDED"), 0x12, 0x03, 'a', 'b', 'c')...))
	cases := []struct {
		name, contentType string
		format            frame.Format
		event             []byte
	}{
		{"json", "application/json", frame.JSON, jsonEvent},
		{"protobuf", "application/vnd.kubernetes.protobuf;stream=watch", frame.Protobuf, pbEvent},
	}
	for _, tc := range cases {
		for _, h2 := range []bool{false, true} {
			for _, cut := range []string{"between", "inside"} {
				name := fmt.Sprintf("%s/%s/h2=%v", tc.name, cut, h2)
				t.Run(name, func(t *testing.T) {
					u := newStagedUpstream(t, tc.contentType, true)
					p := startProxy(t, u.URL, h2)
					var body io.Reader
					if h2 {
						pool := x509.NewCertPool()
						pool.AppendCertsFromPEM(p.CertPEM())
						c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
						defer c.CloseIdleConnections()
						resp, err := c.Get(p.URL + "/api/v1/configmaps?watch=true")
						if err != nil {
							t.Fatal(err)
						}
						defer resp.Body.Close()
						if resp.ProtoMajor != 2 {
							t.Fatalf("watch over %s; want HTTP/2", resp.Proto)
						}
						body = resp.Body
					} else {
						_, body = wttest.RawWatch(t, p.URL, "/api/v1/configmaps?watch=true")
					}
					rd := wttest.ReadAsync(body)
					u.send(t, tc.event)
					rd.Wait(t, len(tc.event))
					half := len(tc.event) / 2
					if cut == "inside" {
						u.send(t, tc.event[:half])
						rd.Wait(t, len(tc.event)+half)
					} else {
						u.send(t, tc.event)
						rd.Wait(t, 2*len(tc.event))
					}
					shut := make(chan error, 1)
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						shut <- p.Shutdown(ctx)
					}()
					if cut == "inside" {
						waitDraining(t, p)
						// The rest of the event, and the beginning of the next
						// in the same read: only the event's end is sent.
						u.send(t, append(tc.event[half:len(tc.event):len(tc.event)], tc.event[:10]...))
					}
					if err := <-shut; err != nil {
						t.Errorf("Shutdown: %v; want every watch ended before the deadline", err)
					}
					b, err := rd.Result()
					if err != nil {
						t.Fatalf("the watch ended with %v after %d bytes; want a clean end", err, len(b))
					}
					if n := splitAll(t, tc.format, b); n != 2 {
						t.Errorf("the client got %d whole events; want 2", n)
					}
				})
			}
		}
	}

	t.Run("no head yet", func(t *testing.T) {
		u := newStagedUpstream(t, "application/json", false)
		p := startProxy(t, u.URL, false)
		resp := make(chan *http.Response, 1)
		go func() {
			r, err := http.Get(p.URL + "/api/v1/configmaps?watch=true")
			if err != nil {
				t.Error(err)
			}
			resp <- r
		}()
		waitProxied(t, p, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		r := <-resp
		if r == nil {
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"reason":"ServiceUnavailable"`) {
			t.Errorf("a watch without its answer yet: %d %s; want 503 with a Status", r.StatusCode, b)
		}
	})
}

// waitProxied waits until n watches are being proxied.
func waitProxied(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		got := len(p.watches)
		p.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches proxied after a minute; want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDraining waits until Shutdown has asked the watches to end.
func waitDraining(t *testing.T, p *Proxy) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !p.isDraining() {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown did not begin within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShutdownCutsUnknownFraming: a watch whose bytes are not events of
// its media type cannot end cleanly (the client would take what it got
// for whole events): it is cut, at once.
func TestShutdownCutsUnknownFraming(t *testing.T) {
	u := newStagedUpstream(t, "application/json", true)
	p := startProxy(t, u.URL, false)
	_, body := wttest.RawWatch(t, p.URL, "/api/v1/configmaps?watch=true")
	rd := wttest.ReadAsync(body)
	junk := []byte("not json at all\n")
	u.send(t, junk)
	rd.Wait(t, len(junk))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.Shutdown(ctx)
	if _, err := rd.Result(); err == nil {
		t.Errorf("a stream of unknown framing ended with %v; want it cut", err)
	}
}
