package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// drainWatch is one client watch through the proxy: what it received,
// and how its stream ended.
type drainWatch struct {
	format frame.Format
	*wttest.AsyncRead
}

// events splits what the watch received into whole events; tail is
// what is left after the last whole one, err says whether it is part of
// an event (frame.ErrTruncated) rather than whitespace, end how the
// stream ended (nil: cleanly).
func (w *drainWatch) events() (n, tail int, err, end error) {
	b, end := w.Result()
	sp := frame.NewSplitter(w.format, frame.Options{})
	for p := b; len(p) > 0; {
		m, _, ok, err := sp.Next(p)
		if err != nil {
			return n, 0, err, end
		}
		if ok {
			n++
		}
		p = p[m:]
	}
	t, err := sp.End()
	return n, len(t), err, end
}

// TestRecordProxySIGTERMWatches: SIGTERM to `wtrace record --proxy` in
// front of a real kube-apiserver, while a workload writes ConfigMaps of
// up to 200 KB (events that span many reads) and watches in JSON and in
// protobuf follow them — over HTTP/1.1 and over HTTP/2 (--tls) — ends
// every proxied watch with a clean terminator after a whole event (the
// terminating chunk, read off the wire; END_STREAM), exits 0, and closes
// the session cleanly with each watch's exchange holding exactly the
// events its client received.
func TestRecordProxySIGTERMWatches(t *testing.T) {
	c := k8stest.Start(t) // skipped without the binaries
	ns := "drain"
	if resp, b := c.Do("POST", "/api/v1/namespaces", http.Header{"Content-Type": {"application/json"}}, []byte(`{"metadata":{"name":"`+ns+`"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create namespace: %s %s", resp.Status, b)
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "h2"}[h2], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s.wt")
			args := []string{"record", "--proxy", "--kubeconfig", c.Kubeconfig, "--listen", "127.0.0.1:0", "-o", out, "--shutdown-grace", "30s"}
			if h2 {
				args = append(args, "--tls")
			}
			child := startChild(t, args...)
			base := waitMatch(t, child.errw.lines, `^Proxying (https?://127\.0\.0\.1:\d+) → `, child.errw.String)[1]

			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			var wrote sync.WaitGroup
			wrote.Add(1)
			go func() { // the workload: ConfigMaps created and rewritten, 2 to 200 KB
				defer wrote.Done()
				for i := 0; ctx.Err() == nil; i++ {
					body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i%8)},
						"data": map[string]string{"v": strings.Repeat(fmt.Sprint(i%10), 2000+(i*37_000)%200_000)}})
					method, path := "POST", "/api/v1/namespaces/"+ns+"/configmaps"
					if i >= 8 {
						method, path = "PUT", path+fmt.Sprintf("/cm-%d", i%8)
					}
					c.Do(method, path, http.Header{"Content-Type": {"application/json"}}, body)
				}
			}()

			const perFormat = 4
			var watches []*drainWatch
			var client *http.Client
			if h2 {
				client = &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				defer client.CloseIdleConnections()
			}
			target := "/api/v1/namespaces/" + ns + "/configmaps?watch=true&timeoutSeconds=600"
			for i := range 2 * perFormat {
				format, accept := frame.JSON, "application/json"
				if i%2 == 1 {
					format, accept = frame.Protobuf, "application/vnd.kubernetes.protobuf;stream=watch"
				}
				var body io.Reader
				if h2 {
					req, _ := http.NewRequest("GET", base+target, nil)
					req.Header.Set("Accept", accept)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
						t.Fatalf("watch: %s over %s; want 200 over HTTP/2", resp.Status, resp.Proto)
					}
					defer resp.Body.Close()
					body = resp.Body
				} else {
					_, body = wttest.RawWatch(t, base, target, "Accept: "+accept)
				}
				watches = append(watches, &drainWatch{format: format, AsyncRead: wttest.ReadAsync(body)})
			}
			// Every watch under way (its first events in), then SIGTERM
			// while the workload goes on.
			deadline := time.Now().Add(2 * time.Minute)
			for _, w := range watches {
				for w.Len() < 100_000 {
					if time.Now().After(deadline) {
						t.Fatalf("a watch received %d bytes in 2 minutes", w.Len())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			child.signal(t, syscall.SIGTERM)
			if code := child.wait(t); code != 0 {
				t.Fatalf("record --proxy: exit %d after SIGTERM; want 0:\n%s", code, child.errw.String())
			}
			stop()
			wrote.Wait()

			f, err := formats.Open(out, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			idx := f.Index()
			if idx.Summary == nil {
				t.Errorf("the session was not closed cleanly")
			}
			var recorded []int64 // events per watch exchange, in order
			for _, x := range idx.Exchanges {
				if x.Response != nil && x.Response.Events != frame.Unknown {
					recorded = append(recorded, x.Frames)
					if x.End == nil || x.End.Status != formats.EndComplete {
						t.Errorf("exchange %d (%s): end %+v; want complete", x.Request.Exchange, x.Request.Target, x.End)
					}
				}
			}
			total := 0
			for i, w := range watches {
				n, tail, err, end := w.events()
				if end != nil || err != nil { // a tail of whitespace (JSON's newline) is no event
					t.Errorf("watch %d (%v): %d events, then %v (%d bytes of an event; split: %v); want whole events, then a clean end", i, w.format, n, end, tail, err)
				}
				total += n
			}
			sum := int64(0)
			for _, n := range recorded {
				sum += n
			}
			if len(recorded) != len(watches) || sum != int64(total) {
				t.Errorf("the session holds %d watches with %d events (%v); the clients received %d in %d", len(recorded), sum, recorded, total, len(watches))
			}
			t.Logf("%d watches: %d whole events, then a clean end", len(watches), total)
		})
	}
}
