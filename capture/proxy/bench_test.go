package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// BenchmarkProxyWatch measures a watch streamed through the proxy (HTTP/2
// upstream over TLS, HTTP/1.1 to the client, flushed per upstream read),
// with and without recording (a Tee into a session written to
// io.Discard). MB/s are of watch body bytes.
func BenchmarkProxyWatch(b *testing.B) {
	var evs []string
	for i := range 4000 {
		evs = append(evs, fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"v":"%s"}}}`,
			i, 100+i, strings.Repeat("x", 900)))
	}
	body := strings.Join(evs, "\n") + "\n"
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// Flush every 16 events: upstream reads of about 16 KiB.
		for i := 0; i < len(evs); i += 16 {
			io.WriteString(w, strings.Join(evs[i:min(i+16, len(evs))], "\n")+"\n")
			w.(http.Flusher).Flush()
		}
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	defer up.Close()
	cl, err := LoadConfig(kubeconfig(b, up.URL, certPEM(up), "current-context: ctx\n"), "")
	if err != nil {
		b.Fatal(err)
	}
	for _, record := range []bool{false, true} {
		b.Run(fmt.Sprintf("record=%v", record), func(b *testing.B) {
			// Without recording, a bare Proxy; with it, Record into a
			// session written to io.Discard, as wtrace record --proxy runs.
			url := ""
			var tee *capture.Tee
			stop := func() {}
			if record {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				started, done := make(chan struct{}), make(chan error, 1)
				go func() {
					_, err := Record(ctx, cl, ln, RecordOptions{Output: formats.FileSinkOptions{Out: io.Discard}, Tool: "bench",
						OnStart: func(p *Proxy, t *capture.Tee) { url, tee = p.URL, t; close(started) }})
					done <- err
				}()
				select {
				case <-started:
				case err := <-done:
					b.Fatal(err)
				}
				stop = func() {
					cancel()
					if err := <-done; err != nil {
						b.Error(err)
					}
				}
			} else {
				p, err := New(cl.Config, Options{Listen: "127.0.0.1:0"})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Start(); err != nil {
					b.Fatal(err)
				}
				url, stop = p.URL, func() { p.Close() }
			}
			c := &http.Client{Transport: &http.Transport{}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Get(url + "/api/v1/configmaps?watch=true")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != int64(len(body)) {
					b.Fatalf("read %d bytes, %v; want %d", n, err, len(body))
				}
			}
			b.StopTimer()
			c.CloseIdleConnections()
			stop()
			if tee != nil {
				if st := tee.Stats(); st.Events != int64(b.N)*int64(len(evs)) {
					b.Errorf("recorded %d events; want %d", st.Events, b.N*len(evs))
				}
			}
		})
	}
}
