package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// clientH2 is a client of the TLS proxy that offers HTTP/2, as client-go
// over HTTPS does.
func (r *recording) clientH2() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.proxy.CertPEM())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

// sessionConns returns the Conn records of a session file.
func sessionConns(t *testing.T, path string) []*formats.Conn {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*formats.Conn
	for rec, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := rec.(*formats.Conn); ok {
			out = append(out, c)
		}
	}
	return out
}

// TestProxyRecordsH2: with TLS, a client that offers HTTP/2 gets HTTP/2
// from the proxy, and the session holds its streams as exchanges, like a
// capture of HTTP/2: the requests, the watch's events byte for byte (the
// Secret's redacted), a chunk per DATA frame, how each stream ended.
func TestProxyRecordsH2(t *testing.T) {
	before := goleak.IgnoreCurrent()
	evs := testEvents(30)
	up := newUpstream(t, evs)
	r := startRecording(t, kubeconfig(t, up.URL, certPEM(up.Server), "current-context: ctx\n"), true, 5*time.Second)
	c := r.clientH2()
	get := func(target string) string {
		req, _ := http.NewRequest("GET", r.proxy.URL+target, nil)
		req.Header.Set("Authorization", "Bearer "+clientToken)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("GET %s: %s %d %q, %v; want HTTP/2 200", target, resp.Proto, resp.StatusCode, b, err)
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

	conns := sessionConns(t, r.path)
	if len(conns) != 1 || conns[0].Proto != "h2" {
		t.Fatalf("conns %+v; want one, h2", conns)
	}
	v := readSession(t, r.path)
	if len(v.exchanges) != 2 {
		t.Fatalf("%d exchanges; want 2 (two streams)", len(v.exchanges))
	}
	var wx *formats.ExchangeInfo
	for i := range v.exchanges {
		if v.exchanges[i].Request.Target == watch {
			wx = &v.exchanges[i]
		}
	}
	if wx == nil {
		t.Fatalf("no exchange for %s", watch)
	}
	id := wx.Request.Exchange
	for _, h := range v.requests[id].Header {
		if strings.EqualFold(h.Name, "authorization") && (!h.Redacted || h.Value != "") {
			t.Errorf("client Authorization stored as %+v", h)
		}
	}
	frames := v.frames[id]
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
	if v.chunks[id] == 0 {
		t.Error("no chunk records (DATA frames) for the watch")
	}
	if wx.End == nil || wx.End.Status != formats.EndComplete {
		t.Errorf("watch End = %+v", wx.End)
	}
	wttest.CheckNoSecrets(t, r.path, clientToken, kubeToken, secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)))
	up.Close()
	goleak.VerifyNone(t, before)
}

// TestRealAPIServerH2: client-go (HTTPS, so HTTP/2) through `record
// --proxy --tls` to a real kube-apiserver: a Secret informer syncs through
// the proxy, and the session holds its LIST/watch as exchanges of an h2
// connection, with the watch's events, redacted.
func TestRealAPIServerH2(t *testing.T) {
	kc, api := startCluster(t)
	const ns = "wtrace-h2"
	if code, b := api.do("POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": ns}}); code != 201 {
		t.Fatalf("create namespace: %d %s", code, b)
	}
	const password = "real-apiserver-h2-password-5d1e"
	for i := range 3 {
		if code, b := api.do("POST", "/api/v1/namespaces/"+ns+"/secrets", map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("s-%d", i)},
			"stringData": map[string]string{"password": password}}); code != 201 {
			t.Fatalf("create secret: %d %s", code, b)
		}
	}
	r := startRecording(t, kc, true, 100*time.Millisecond)
	cfg := &rest.Config{Host: r.proxy.URL, BearerToken: "not-a-real-token-a1b2c3d4", TLSClientConfig: rest.TLSClientConfig{CAData: r.proxy.CertPEM()}}
	got := informerSync(t, cfg, ns, 3)
	for _, s := range got {
		if string(s.Data["password"]) != password {
			t.Fatalf("the informer got %q through the proxy", s.Data["password"])
		}
	}
	deadline := time.Now().Add(time.Minute)
	for r.tee.Stats().Exchanges < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the tee saw no exchange")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.stop(t)
	conns := sessionConns(t, r.path)
	h2 := 0
	for _, c := range conns {
		if c.Proto == "h2" {
			h2++
		}
	}
	if h2 == 0 {
		t.Fatalf("conns %+v; want client-go's over h2", conns)
	}
	// The informer listed the Secrets (this apiserver has no WatchList:
	// its streaming list is refused, and client-go falls back to a LIST
	// then a watch): their values are redacted where they were, in the
	// LIST body or the watch's events.
	v := readSession(t, r.path)
	var redacted int64
	for _, x := range v.exchanges {
		if x.End == nil || !strings.Contains(x.Request.Target, "/secrets") {
			continue
		}
		for _, rd := range x.End.Redactions {
			if rd.Reason == formats.RedactSecretValue {
				redacted += rd.Count
			}
		}
	}
	if redacted < 3 {
		t.Fatalf("%d Secret values redacted in the informer's exchanges; want 3", redacted)
	}
	wttest.CheckNoSecrets(t, r.path, password, base64.StdEncoding.EncodeToString([]byte(password)), k8stest.Token, "not-a-real-token-a1b2c3d4")
}
