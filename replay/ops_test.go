package replay

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wtrace/wtrace/internal/healthz"
)

// TestHealthEndpoints: /livez, /readyz and /healthz answer as
// kube-apiserver v1.33 does (its answers were read off the real binary:
// text/plain "ok", verbose lists, excluded checks, one check by name,
// 404 for a check it does not have), and /readyz fails once Shutdown
// began. /metrics is the session's path unless the Server has a
// registry.
func TestHealthEndpoints(t *testing.T) {
	path, _, _, _ := basicWatch(t)
	srv := newTestServer(t, path, Options{})
	const nosniff = "nosniff"
	for _, c := range []struct {
		method, path string
		code         int
		body         string
		contentType  string
	}{
		{"GET", "/livez", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/readyz", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/healthz", 200, "ok", "text/plain; charset=utf-8"},
		{"HEAD", "/readyz", 200, "", "text/plain; charset=utf-8"},
		{"POST", "/readyz", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/readyz?verbose", 200, "[+]ping ok\n[+]session ok\n[+]world ok\n[+]shutdown ok\nreadyz check passed\n", "text/plain; charset=utf-8"},
		{"GET", "/livez?verbose=1", 200, "[+]ping ok\nlivez check passed\n", "text/plain; charset=utf-8"},
		{"GET", "/healthz?verbose", 200, "[+]ping ok\n[+]session ok\n[+]world ok\nhealthz check passed\n", "text/plain; charset=utf-8"},
		{"GET", "/readyz?exclude=world&verbose", 200, "[+]ping ok\n[+]session ok\n[+]world excluded: ok\n[+]shutdown ok\nreadyz check passed\n", "text/plain; charset=utf-8"},
		{"GET", "/readyz?exclude=nope&verbose", 200, "[+]ping ok\n[+]session ok\n[+]world ok\n[+]shutdown ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n", "text/plain; charset=utf-8"},
		{"GET", "/readyz?exclude=nope", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/readyz/shutdown", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/livez/ping", 200, "ok", "text/plain; charset=utf-8"},
		{"GET", "/readyz/nope", 404, "404 page not found\n", "text/plain; charset=utf-8"},
		{"GET", "/livez/", 404, "404 page not found\n", "text/plain; charset=utf-8"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || string(b) != c.body || resp.Header.Get("Content-Type") != c.contentType {
			t.Errorf("%s %s = %d %q (%s); want %d %q (%s)", c.method, c.path, resp.StatusCode, b, resp.Header.Get("Content-Type"), c.code, c.body, c.contentType)
		}
		if c.code == 200 && !strings.Contains(c.path, "/readyz/") && !strings.Contains(c.path, "/livez/") && resp.Header.Get("X-Content-Type-Options") != nosniff {
			t.Errorf("%s %s: X-Content-Type-Options = %q; want %q", c.method, c.path, resp.Header.Get("X-Content-Type-Options"), nosniff)
		}
	}
	// Without a registry, /metrics is a path of the session: not recorded.
	resp, b := get(t, http.DefaultClient, srv.URL+"/metrics")
	if resp.StatusCode != 404 || !bytes.Contains(b, []byte(`"kind":"Status"`)) {
		t.Errorf("GET /metrics without a registry = %d %q; want the session's 404 Status", resp.StatusCode, b)
	}

	// Shutting down: /readyz fails (always verbose, the reason withheld),
	// /livez still passes. A watch keeps the server draining meanwhile.
	w := rawGet(t, srv.URL, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=999999&timeoutSeconds=60")
	if w.status != 200 {
		t.Fatalf("watch: %d", w.status)
	}
	srv.hub.Drain() // what Shutdown does first
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/readyz", 500, "[+]ping ok\n[+]session ok\n[+]world ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"},
		{"/readyz/shutdown", 500, "internal server error: the replay is shutting down\n"},
		{"/livez", 200, "ok"},
		{"/healthz", 200, "ok"},
	} {
		resp, b := get(t, http.DefaultClient, srv.URL+c.path)
		if resp.StatusCode != c.code || string(b) != c.body {
			t.Errorf("draining: GET %s = %d %q; want %d %q", c.path, resp.StatusCode, b, c.code, c.body)
		}
	}
}

// TestPreload: while the session loads, the listener answers /livez,
// fails /readyz and /healthz (session, world) and gets 503 for anything
// else; handed off, the same listener serves the session, ready.
func TestPreload(t *testing.T) {
	path, _, _, _ := basicWatch(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	pre := Preload(ln, PreloadOptions{})
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/livez", 200, "ok"},
		{"/readyz", 500, "[+]ping ok\n[-]session failed: reason withheld\n[-]world failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"},
		{"/healthz", 500, "[+]ping ok\n[-]session failed: reason withheld\n[-]world failed: reason withheld\nhealthz check failed\n"},
		{"/api/v1/namespaces/corpus-basic/configmaps", 503, ""},
	} {
		resp, b := get(t, http.DefaultClient, base+c.path)
		if resp.StatusCode != c.code || c.body != "" && string(b) != c.body {
			t.Errorf("loading: GET %s = %d %q; want %d %q", c.path, resp.StatusCode, b, c.code, c.body)
		}
		if c.code == 503 && !bytes.Contains(b, []byte(`"reason":"ServiceUnavailable"`)) {
			t.Errorf("loading: GET %s = %q; want a ServiceUnavailable Status", c.path, b)
		}
	}
	srv, err := Open(path, Options{Listener: pre.Listener()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	pre.Handoff()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if srv.URL != base {
		t.Fatalf("URL = %s; want the preloaded listener's %s", srv.URL, base)
	}
	for _, c := range []struct {
		path string
		code int
	}{{"/readyz", 200}, {"/api/v1/namespaces/corpus-basic/configmaps", 200}} {
		if resp, b := get(t, http.DefaultClient, base+c.path); resp.StatusCode != c.code {
			t.Errorf("loaded: GET %s = %d %.80q; want %d", c.path, resp.StatusCode, b, c.code)
		}
	}
}

// scrape gathers reg's metric families as a Prometheus server would
// read them: through the server's /metrics, parsed as exposition text.
func scrape(t testing.TB, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, b := get(t, http.DefaultClient, base+"/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d %.200q", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics Content-Type = %q; want the text exposition format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v", err)
	}
	return fams
}

// metricValue is the value of the sample of family name whose labels
// include want (counter, gauge; a histogram's count).
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range f.Metric {
		for k, v := range want {
			ok := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, found
}

// TestMetrics: /metrics is valid Prometheus text with the replay's
// families, and what it counts is what the clients got: every recorded
// event of the watches (recorded as is without a world, through a flow
// with one), their lateness observed once each, requests by verb,
// resource, code and how, the bytes, the writes applied (none when they
// are rejected), and no watcher or connection left open once the clients
// left.
func TestMetrics(t *testing.T) {
	path, f, id, _ := basicWatch(t)
	events := float64(len(sessionEvents(t, f, id)))
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	for _, c := range []struct {
		writes      Writes
		watches     bool // the watch ends as recorded
		createCode  int
		createHow   string
		createCount float64
	}{
		{WritesRecorded, true, 404, "not-found", 0},
		{WritesReject, true, 403, "rejected", 0},
		{WritesAnswer, false, 201, "synth-create", 1},
	} {
		t.Run(string(c.writes), func(t *testing.T) {
			reg := healthz.NewRegistry()
			srv := newTestServer(t, path, Options{Speed: 1000, Writes: c.writes, Metrics: reg})
			const watchers = 3
			var got int64
			if c.watches {
				for range watchers {
					r := rawGet(t, srv.URL, target)
					b, err := r.body()
					if err != nil {
						t.Fatalf("watch: %v", err)
					}
					got += int64(len(b))
					r.conn.Close()
				}
			}
			if resp, _ := get(t, http.DefaultClient, srv.URL+"/api/v1/namespaces/corpus-basic/configmaps"); resp.StatusCode != 200 {
				t.Fatalf("LIST: %d", resp.StatusCode)
			}
			create := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"metrics-test","namespace":"corpus-basic"}}`
			resp, err := http.Post(srv.URL+"/api/v1/namespaces/corpus-basic/configmaps", "application/json", strings.NewReader(create))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if resp.StatusCode != c.createCode {
				t.Fatalf("POST: %d; want %d", resp.StatusCode, c.createCode)
			}

			// The connections' ends, and the count of a request whose
			// answer the client already read, reach the metrics
			// asynchronously: a handler counts its request after its
			// last byte went out, and a connection a stream took over
			// may see its client leave before that.
			createLabels := map[string]string{"verb": "create", "resource": "configmaps", "code": strconv.Itoa(c.createCode), "how": c.createHow}
			watchLabels := map[string]string{"verb": "watch", "resource": "configmaps", "code": "200", "how": "recorded"}
			var fams map[string]*dto.MetricFamily
			deadline := time.Now().Add(10 * time.Second)
			for {
				fams = scrape(t, srv.URL)
				http.DefaultClient.CloseIdleConnections()
				open, _ := metricValue(fams, "wtrace_replay_connections", nil)
				created, _ := metricValue(fams, "wtrace_replay_requests_total", createLabels)
				watching, _ := metricValue(fams, "wtrace_replay_watchers", nil)
				// A watch is counted once its stream ended, which may be
				// after the gauge of open watches fell.
				watched, _ := metricValue(fams, "wtrace_replay_requests_total", watchLabels)
				if open <= 1 && created >= 1 && watching == 0 && (!c.watches || watched >= watchers) { // the scrape's own connection
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after the clients left: wtrace_replay_connections = %v, want at most 1 (the scrape); wtrace_replay_watchers = %v, want 0; the create counted %v times, want 1; the watches %v times, want %d",
						open, watching, created, watched, watchers)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, name := range []string{"wtrace_replay_watchers", "wtrace_replay_connections", "wtrace_replay_connections_total",
				"wtrace_replay_requests_total", "wtrace_replay_watch_events_sent_total", "wtrace_replay_sent_bytes_total",
				"wtrace_replay_event_lateness_seconds", "wtrace_replay_sessions_loaded_total", "wtrace_replay_session_info",
				"wtrace_replay_writes_applied_total", "go_goroutines", "process_cpu_seconds_total"} {
				if fams[name] == nil && (name != "wtrace_replay_writes_applied_total" || c.createCount > 0) {
					t.Errorf("/metrics has no %s", name)
				}
			}
			check := func(name string, labels map[string]string, want float64) {
				t.Helper()
				if v, _ := metricValue(fams, name, labels); v != want {
					t.Errorf("%s%v = %v; want %v", name, labels, v, want)
				}
			}
			check("wtrace_replay_watchers", nil, 0)
			check("wtrace_replay_sessions_loaded_total", nil, 1)
			check("wtrace_replay_requests_total", map[string]string{"verb": "list", "resource": "configmaps", "code": "200"}, 1)
			check("wtrace_replay_requests_total", createLabels, 1)
			check("wtrace_replay_writes_applied_total", map[string]string{"verb": "create", "resource": "configmaps"}, c.createCount)
			if !c.watches {
				return
			}
			check("wtrace_replay_watch_events_sent_total", nil, watchers*events)
			check("wtrace_replay_event_lateness_seconds", nil, watchers*events)
			check("wtrace_replay_requests_total", watchLabels, watchers)
			if v, _ := metricValue(fams, "wtrace_replay_sent_bytes_total", nil); v < float64(got) {
				t.Errorf("wtrace_replay_sent_bytes_total = %v; want at least the %d body bytes the watchers read", v, got)
			}
		})
	}
}

// TestMetricsShared: two Servers on one registry share its collectors
// (no duplicate registration), and a Server without one registers
// nothing.
func TestMetricsShared(t *testing.T) {
	path, _, _, _ := basicWatch(t)
	reg := prometheus.NewRegistry()
	newTestServer(t, path, Options{Metrics: reg})
	newTestServer(t, path, Options{Metrics: reg})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "wtrace_replay_sessions_loaded_total" && f.Metric[0].Counter.GetValue() != 2 {
			t.Errorf("sessions_loaded_total = %v; want 2", f.Metric[0].Counter.GetValue())
		}
	}
	if newTestServer(t, path, Options{}).met != nil {
		t.Error("a Server without a registry has metrics")
	}
}

// TestShutdown: Shutdown ends every open watch cleanly — over HTTP/1.1
// with the terminating chunk (streams parked in the scheduler, waiting in
// reads, served through a flow), over HTTP/2 with END_STREAM after a
// GOAWAY — stops accepting, and returns nil.
func TestShutdown(t *testing.T) {
	path, _, _, _ := basicWatch(t)
	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	for _, c := range []struct {
		name string
		opts Options
		h2   bool
	}{
		{"h1-recorded", Options{Speed: 1, Hold: true, Writes: WritesRecorded}, false},
		{"h1-world", Options{Speed: 1, Hold: true}, false},
		{"h1-apply", Options{Speed: 1, Hold: true, Writes: WritesApply}, false},
		{"h2", Options{Speed: 1, Hold: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			if c.h2 {
				err = srv.StartTLS()
			} else {
				err = srv.Start()
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.h2 {
				h2 := h2Watch(t, srv, target)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := srv.Shutdown(ctx); err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				goaway, end, rst := h2.until()
				if !goaway || !end || rst {
					t.Errorf("HTTP/2 watch: GOAWAY %v, END_STREAM %v, RST_STREAM %v; want a GOAWAY and END_STREAM, no reset", goaway, end, rst)
				}
				return
			}
			var ws []*rawResponse
			for range 5 {
				w := rawGet(t, srv.URL, target)
				if _, err := w.nextChunk(); err != nil { // streaming
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			time.Sleep(50 * time.Millisecond) // let them wait (park)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			for i, w := range ws {
				if _, err := w.chunks(); err != io.EOF {
					t.Errorf("watch %d ended with %v; want a clean end (the terminating chunk)", i, err)
				}
			}
			if _, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), time.Second); err == nil {
				t.Error("the server still accepts connections after Shutdown")
			}
		})
	}
}

// h2Conn is a raw HTTP/2 client connection with one watch stream.
type h2Conn struct {
	t  *testing.T
	c  *tls.Conn
	fr *http2.Framer
}

// h2Watch opens an HTTP/2 connection to srv (TLS) and sends GET target
// on stream 1, then reads until the response's first DATA frame.
func h2Watch(t *testing.T, srv *Server, target string) *h2Conn {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(srv.URL, "https://"), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", target}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	h := &h2Conn{t: t, c: c, fr: fr}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("HTTP/2 watch: %v before its first event", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				fr.WriteWindowUpdate(0, uint32(len(f.Data())))
				fr.WriteWindowUpdate(1, uint32(len(f.Data())))
				return h
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("HTTP/2 watch reset: %v", f.ErrCode)
		}
	}
}

// until reads frames until the connection ends: whether a GOAWAY came,
// and whether stream 1 ended with END_STREAM or RST_STREAM.
func (h *h2Conn) until() (goaway, end, rst bool) {
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goaway = true
		case *http2.DataFrame:
			if f.StreamID == 1 {
				end = end || f.StreamEnded()
				if len(f.Data()) > 0 {
					h.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
				}
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				end = true
			}
		case *http2.RSTStreamFrame:
			rst = rst || f.StreamID == 1
		case *http2.PingFrame:
			if !f.IsAck() {
				h.fr.WritePing(true, f.Data)
			}
		}
	}
}
