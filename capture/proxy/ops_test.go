package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/healthz"
)

// TestRecordOps: a recording with RecordOptions.Health and Metrics
// answers /livez, /readyz and /healthz as kube-apiserver does, on its own
// listener, and /metrics counts what the session holds: the exchanges,
// events, bytes and Secret values redacted of a watch through the proxy.
// Record closes the listener when it returns.
func TestRecordOps(t *testing.T) {
	evs := testEvents(30) // every third a Secret
	up := newUpstream(t, evs)
	cl, err := LoadConfig(kubeconfig(t, up.URL, certPEM(up.Server), "current-context: ctx\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := "http://" + hl.Addr().String()
	path := filepath.Join(t.TempDir(), "proxy.wt")
	ctx, cancel := context.WithCancelCause(context.Background())
	started := make(chan *Proxy, 1)
	done := make(chan error, 1)
	go func() {
		_, err := Record(ctx, cl, ln, RecordOptions{Output: formats.FileSinkOptions{Path: path}, Tool: "test",
			Health: hl, Metrics: healthz.NewRegistry(),
			OnStart: func(p *Proxy, _ *capture.Tee) { started <- p }})
		done <- err
	}()
	var p *Proxy
	select {
	case p = <-started:
	case err := <-done:
		t.Fatalf("Record: %v", err)
	}
	get := func(base, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/livez", 200, "ok"},
		{"/readyz", 200, "ok"},
		{"/readyz?verbose", 200, "[+]ping ok\n[+]recording ok\n[+]shutdown ok\nreadyz check passed\n"},
		{"/healthz?verbose", 200, "[+]ping ok\n[+]recording ok\nhealthz check passed\n"},
	} {
		if code, body := get(ops, c.path); code != c.code || body != c.body {
			t.Errorf("GET %s = %d %q; want %d %q", c.path, code, body, c.code, c.body)
		}
	}

	// A watch through the proxy: its events and the Secret values
	// redacted in them show in the metrics.
	req, _ := http.NewRequest("GET", p.URL+"/api/v1/namespaces/demo/configmaps?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	want := map[string]float64{
		"wtrace_proxy_exchanges_recorded_total":    1,
		"wtrace_proxy_watch_events_recorded_total": 30,
		"wtrace_proxy_redactions_total":            10,
		"wtrace_proxy_connections_recorded_total":  1,
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := get(ops, "/metrics")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("/metrics is not Prometheus text: %v", err)
		}
		missing := ""
		for name, v := range want {
			f := fams[name]
			if f == nil || f.Metric[0].Counter.GetValue() != v {
				missing = name
			}
		}
		if f := fams["wtrace_proxy_recorded_bytes_total"]; f == nil || f.Metric[0].Counter.GetValue() == 0 {
			missing = "wtrace_proxy_recorded_bytes_total"
		}
		for _, name := range []string{"wtrace_proxy_anomalies_total", "wtrace_proxy_requests_in_flight", "wtrace_proxy_recording_failed", "go_goroutines", "process_cpu_seconds_total"} {
			if fams[name] == nil {
				missing = name
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not as expected (%v) 30 s after the watch:\n%s", missing, want, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel(errTestStop)
	if err := <-done; err != nil {
		t.Fatalf("Record: %v", err)
	}
	if _, err := net.DialTimeout("tcp", hl.Addr().String(), time.Second); err == nil {
		t.Error("the health listener still accepts after Record returned")
	}
	if b := readSession(t, path); len(b.exchanges) != 1 {
		t.Errorf("%d exchanges recorded; want 1", len(b.exchanges))
	}
}
