package proxy

import (
	"fmt"
	"io"
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
			var tee *capture.Tee
			var fs *capture.FileSink
			if record {
				fs, err = capture.NewFileSink(capture.FileSinkOptions{Out: io.Discard, Meta: formats.Meta{Tool: "bench"}})
				if err != nil {
					b.Fatal(err)
				}
				tee = capture.NewTee(fs, capture.TeeOptions{})
			}
			p, err := New(cl.Config, Options{Listen: "127.0.0.1:0", Tee: tee})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(); err != nil {
				b.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Get(p.URL + "/api/v1/configmaps?watch=true")
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
			p.Close()
			if tee != nil {
				tee.Close()
				fs.Close("")
				if st := tee.Stats(); st.Events != int64(b.N)*int64(len(evs)) {
					b.Errorf("recorded %d events; want %d", st.Events, b.N*len(evs))
				}
			}
		})
	}
}
