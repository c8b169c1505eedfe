package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// Credentials the tests use; none may reach a session.
const (
	clientToken = "client-token-7a1d55c3e9"
	kubeToken   = "kubeconfig-token-c0ffee4411"
	secretValue = "proxy-test-secret-9e3b71"
)

// upstream is a fake apiserver: HTTPS with HTTP/2, checking credentials.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	auth   []string // Authorization headers seen
	protos []string
	events []string
	hang   bool // watches never end (until the client leaves)
}

func newUpstream(t testing.TB, events []string) *upstream {
	u := &upstream{events: events}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.EnableHTTP2 = true
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.auth = append(u.auth, r.Header.Get("Authorization"))
	u.protos = append(u.protos, r.Proto)
	hang := u.hang
	u.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+kubeToken {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") != "true" {
		io.WriteString(w, `{"major":"1","minor":"33","gitVersion":"v1.33.13"}`)
		return
	}
	w.WriteHeader(200)
	for _, e := range u.events {
		io.WriteString(w, e+"\n")
		w.(http.Flusher).Flush()
	}
	if hang {
		<-r.Context().Done()
	}
}

// kubeconfig writes a kubeconfig for server (with its CA) to a temp dir.
func kubeconfig(t testing.TB, server string, caPEM []byte, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	ca := ""
	if caPEM != nil {
		ca = "    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM) + "\n"
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: up
  cluster:
    server: %s
%susers:
- name: u
  user:
    token: %s
contexts:
- name: ctx
  context: {cluster: up, user: u}
- name: other
  context: {cluster: up, user: u}
%s`, server, ca, kubeToken, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func certPEM(s *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

func testEvents(n int) []string {
	var evs []string
	for i := range n {
		if i%3 == 2 {
			evs = append(evs, fmt.Sprintf(`{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s-%d","resourceVersion":"%d"},"data":{"p":"%s"}}}`,
				i, 10+i, base64.StdEncoding.EncodeToString([]byte(secretValue))))
			continue
		}
		evs = append(evs, fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","resourceVersion":"%d"},"data":{"v":"%s"}}}`,
			i, 10+i, strings.Repeat("y", i*131%2000)))
	}
	return evs
}

// recording is Record running in front of an upstream, recording to a
// file.
type recording struct {
	path   string
	proxy  *Proxy
	tee    *capture.Tee
	cancel context.CancelCauseFunc
	done   chan error
	res    capture.Result
}

// startRecording starts Record, as wtrace record --proxy does, and
// returns once the proxy serves. grace is its ShutdownGrace.
func startRecording(t *testing.T, kc string, tlsOn bool, grace time.Duration) *recording {
	t.Helper()
	cl, err := LoadConfig(kc, "")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recording{path: filepath.Join(t.TempDir(), "proxy.wt"), done: make(chan error, 1)}
	ctx, cancel := context.WithCancelCause(context.Background())
	r.cancel = cancel
	started := make(chan struct{})
	go func() {
		res, err := Record(ctx, cl, ln, RecordOptions{
			Proxy:         Options{TLS: tlsOn},
			Output:        formats.FileSinkOptions{Path: r.path},
			Tool:          "test",
			ShutdownGrace: grace,
			OnStart: func(p *Proxy, tee *capture.Tee) {
				r.proxy, r.tee = p, tee
				close(started)
			},
		})
		r.res = res
		r.done <- err
	}()
	select {
	case <-started:
	case err := <-r.done:
		t.Fatalf("Record: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the proxy did not start within a minute")
	}
	return r
}

// errTestStop is why a test stops a recording.
var errTestStop = errors.New("stopped by the test")

// stop ends the recording (requests that are not watches may finish
// within the recording's grace) and checks that the session was closed
// with the stop as its note.
func (r *recording) stop(t *testing.T) {
	t.Helper()
	r.cancel(errTestStop)
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Record: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Record did not return within a minute of the stop")
	}
	if r.res.Note != errTestStop.Error() || len(r.res.Files) != 1 || r.res.Files[0] != r.path {
		t.Errorf("Record result %+v; want note %q, file %s", r.res, errTestStop, r.path)
	}
}

// client returns an HTTP client for the proxy.
func (r *recording) client() *http.Client {
	tr := &http.Transport{}
	if pemBytes := r.proxy.CertPEM(); pemBytes != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Transport: tr}
}

type sessionView struct {
	exchanges []formats.ExchangeInfo
	frames    map[int64][]*formats.Frame
	requests  map[int64]*formats.Request
	chunks    map[int64]int
	conns     int
}

func readSession(t *testing.T, path string) *sessionView {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Clean() {
		t.Errorf("%s not closed cleanly: %v", path, f.Problems())
	}
	v := &sessionView{exchanges: f.Index().Exchanges, frames: map[int64][]*formats.Frame{}, requests: map[int64]*formats.Request{}, chunks: map[int64]int{}}
	for rec, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		switch rec := rec.(type) {
		case *formats.Frame:
			v.frames[rec.Exchange] = append(v.frames[rec.Exchange], rec)
		case *formats.Request:
			v.requests[rec.Exchange] = rec
		case *formats.Chunk:
			v.chunks[rec.Exchange]++
		case *formats.Conn:
			v.conns++
		}
	}
	return v
}

func TestProxyRecords(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			// Every goroutine of the proxy and the tee ends with them (checked
			// once the upstream, whose connections the proxy's transport
			// keeps, is closed too).
			before := goleak.IgnoreCurrent()
			evs := testEvents(30)
			up := newUpstream(t, evs)
			r := startRecording(t, kubeconfig(t, up.URL, certPEM(up.Server), "current-context: ctx\n"), tlsOn, 5*time.Second)
			if want := map[bool]string{false: "http://", true: "https://"}[tlsOn]; !strings.HasPrefix(r.proxy.URL, want) {
				t.Errorf("URL = %q", r.proxy.URL)
			}
			c := r.client()
			get := func(target string) string {
				req, _ := http.NewRequest("GET", r.proxy.URL+target, nil)
				req.Header.Set("Authorization", "Bearer "+clientToken)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET %s: %d %q, %v", target, resp.StatusCode, b, err)
				}
				return string(b)
			}
			if got := get("/version"); !strings.Contains(got, "v1.33.13") {
				t.Errorf("GET /version = %q", got)
			}
			watch := "/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=9"
			if got, want := get(watch), strings.Join(evs, "\n")+"\n"; got != want {
				t.Errorf("watch body: %d bytes; want %d", len(got), len(want))
			}
			c.CloseIdleConnections()
			r.stop(t)

			up.mu.Lock()
			for i, a := range up.auth {
				if a != "Bearer "+kubeToken || up.protos[i] != "HTTP/2.0" {
					t.Errorf("upstream request %d: Authorization %q over %s; want the kubeconfig token over HTTP/2.0", i, a, up.protos[i])
				}
			}
			up.mu.Unlock()

			v := readSession(t, r.path)
			if len(v.exchanges) != 2 || v.conns != 1 {
				t.Fatalf("%d exchanges on %d conns; want 2 on 1 (keep-alive)", len(v.exchanges), v.conns)
			}
			if req := v.requests[1]; req == nil || req.Target != watch {
				t.Fatalf("exchange 1 request = %+v; want %s", req, watch)
			}
			for _, h := range v.requests[1].Header {
				if h.Name == "Authorization" && (!h.Redacted || h.Len != len("Bearer "+clientToken)) {
					t.Errorf("client Authorization stored as %+v", h)
				}
			}
			frames := v.frames[1]
			if len(frames) != len(evs) {
				t.Fatalf("%d frames; want %d", len(frames), len(evs))
			}
			for i, e := range evs {
				if strings.Contains(e, `"Secret"`) {
					if len(frames[i].Redacted) == 0 || len(frames[i].Data) != len(e) {
						t.Errorf("Secret event %d not redacted: %q", i, frames[i].Data)
					}
				} else if string(frames[i].Data) != e {
					t.Errorf("event %d = %q; want %q", i, frames[i].Data, e)
				}
			}
			if v.chunks[1] == 0 {
				t.Error("no chunk records for the watch")
			}
			if x := v.exchanges[1]; x.End == nil || x.End.Status != formats.EndComplete {
				t.Errorf("watch End = %+v", x.End)
			}
			wttest.CheckNoSecrets(t, r.path, clientToken, kubeToken, secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)))
			up.Close()
			goleak.VerifyNone(t, before)
		})
	}
}

// TestProxyShutdownOpenWatch: stopping with a watch open (its apiserver
// would never end it) does not wait for its end: the watch ends cleanly
// after its last whole event, as the recording holds it (complete).
func TestProxyShutdownOpenWatch(t *testing.T) {
	evs := testEvents(5)
	up := newUpstream(t, evs)
	up.hang = true
	r := startRecording(t, kubeconfig(t, up.URL, certPEM(up.Server), "current-context: ctx\n"), false, time.Minute)
	resp, err := r.client().Get(r.proxy.URL + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range evs {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	r.stop(t)
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("the watch body ended with %v after %q; want a clean end after the last event", err, rest)
	}
	resp.Body.Close()
	v := readSession(t, r.path)
	if len(v.frames[0]) != len(evs) {
		t.Errorf("%d frames; want %d", len(v.frames[0]), len(evs))
	}
	if x := v.exchanges[0]; x.End == nil || x.End.Status != formats.EndComplete {
		t.Errorf("End = %+v; want complete", x.End)
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := startRecording(t, kubeconfig(t, "http://"+addr, nil, "current-context: ctx\n"), false, time.Second)
	resp, err := r.client().Get(r.proxy.URL + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Kind    string
		Code    int
		Message string
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 502 || st.Kind != "Status" || st.Code != 502 || !strings.Contains(st.Message, "connection refused") {
		t.Errorf("response %d %+v, %v; want a 502 Status naming the refused connection", resp.StatusCode, st, err)
	}
	r.stop(t)
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, tc := range []struct {
		name     string
		path     string
		context  string
		want     string // context used
		wantErr  error
		anyError bool
	}{
		{name: "current", path: kubeconfig(t, "https://127.0.0.1:6443", nil, "current-context: ctx\n"), want: "ctx"},
		{name: "explicit", path: kubeconfig(t, "https://127.0.0.1:6443", nil, "current-context: ctx\n"), context: "other", want: "other"},
		{name: "unknown context", path: kubeconfig(t, "https://127.0.0.1:6443", nil, "current-context: ctx\n"), context: "nope", wantErr: ErrContextNotFound},
		{name: "no current context", path: kubeconfig(t, "https://127.0.0.1:6443", nil, ""), wantErr: ErrNoContext},
		{name: "current context missing", path: kubeconfig(t, "https://127.0.0.1:6443", nil, "current-context: gone\n"), wantErr: ErrContextNotFound},
		{name: "empty file", path: empty, wantErr: ErrNoKubeconfig},
		{name: "missing file", path: filepath.Join(dir, "nope"), anyError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := LoadConfig(tc.path, tc.context)
			switch {
			case tc.anyError && err != nil:
			case tc.wantErr != nil && errors.Is(err, tc.wantErr):
			case tc.wantErr == nil && !tc.anyError && err == nil:
				if cl.Context != tc.want || cl.Server != "https://127.0.0.1:6443" || cl.Config.BearerToken != kubeToken || len(cl.Contexts) != 2 {
					t.Errorf("LoadConfig = %+v", cl)
				}
			default:
				t.Errorf("LoadConfig(%s, %q) = %v; want %v", tc.name, tc.context, err, tc.wantErr)
			}
		})
	}
}

func TestStartTwice(t *testing.T) {
	cl, err := LoadConfig(kubeconfig(t, "https://127.0.0.1:6443", nil, "current-context: ctx\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cl.Config, Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(); err == nil {
		t.Error("second Start: no error")
	}
	// The same address again: in use.
	q, _ := New(cl.Config, Options{Listen: strings.TrimPrefix(p.URL, "http://")})
	if err := q.Start(); err == nil {
		t.Error("Start on an address in use: no error")
		q.Close()
	}
}
