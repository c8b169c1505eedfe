//go:build linux

package live_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/live"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/wttest"
)

const (
	liveToken  = "live-test-token-0d9c6b2a"
	liveSecret = "live-test-secret-41f0e2"
)

// liveEvents are the watch events the test server sends: configmaps and
// Secrets holding liveSecret.
func liveEvents(n int) []string {
	var evs []string
	for i := range n {
		if i%4 == 3 {
			evs = append(evs, fmt.Sprintf(`{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s-%d","namespace":"demo","resourceVersion":"%d"},"data":{"token":"%s"},"stringData":{"x":"%s"}}}`,
				i, 500+i, base64.StdEncoding.EncodeToString([]byte(liveSecret)), liveSecret))
			continue
		}
		evs = append(evs, fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"v":"%s"}}}`,
			i, 500+i, strings.Repeat("x", i*97%3000)))
	}
	return evs
}

// watchServer serves a chunked JSON watch on 127.0.0.1, flushing after
// each event as the apiserver does.
func watchServer(t *testing.T, evs []string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		for _, e := range evs {
			io.WriteString(w, e+"\n")
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLiveLoopback captures a watch served on lo and checks that the
// recorded events are what the client received, that secrets are
// redacted, and that each packet was kept once.
func TestLiveLoopback(t *testing.T) {
	evs := liveEvents(40)
	srv := watchServer(t, evs)
	port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	h, err := live.Open("lo", live.Options{Filter: live.Filter{Port: port}, PollInterval: 10 * time.Millisecond})
	if errors.Is(err, live.ErrPermission) {
		t.Skipf("live capture needs CAP_NET_RAW: %v", err)
	}
	if err != nil {
		t.Fatalf("Open(lo): %v", err)
	}
	defer h.Close()

	path := filepath.Join(t.TempDir(), "live.wt")
	fs, err := capture.NewFileSink(capture.FileSinkOptions{Path: path, Meta: formats.Meta{Tool: "test", Source: "iface", Redaction: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := capture.NewRecorder(fs, capture.Options{Port: port})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var ended bool
	segs := map[string]int{}
	var dec struct {
		eth  layers.Ethernet
		ip4  layers.IPv4
		ip6  layers.IPv6
		tcp  layers.TCP
		load gopacket.Payload
	}
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &dec.eth, &dec.ip4, &dec.ip6, &dec.tcp, &dec.load)
	parser.IgnoreUnsupported = true
	decoded := []gopacket.LayerType{}
	runErr := make(chan error, 1)
	go func() {
		runErr <- live.Run(ctx, h, rec, live.RunOptions{
			FlushInterval: 10 * time.Millisecond,
			Flush:         fs.Flush,
			Packet: func(p pcapfile.Packet) error {
				if err := parser.DecodeLayers(p.Data, &decoded); err != nil {
					return nil
				}
				if len(dec.tcp.Payload) > 0 || dec.tcp.FIN || dec.tcp.SYN {
					k := fmt.Sprintf("%d>%d seq %d len %d", dec.tcp.SrcPort, dec.tcp.DstPort, dec.tcp.Seq, len(dec.tcp.Payload))
					mu.Lock()
					segs[k]++
					mu.Unlock()
				}
				return nil
			},
			OnTick: func(st capture.Stats) {
				mu.Lock()
				done := ended
				mu.Unlock()
				if done && st.Events >= int64(len(evs)) {
					cancel()
				}
			},
		})
	}()

	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/demo/secrets?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+liveToken)
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(evs, "\n") + "\n"; string(body) != want {
		t.Fatalf("client got %d bytes; want %d", len(body), len(want))
	}
	mu.Lock()
	ended = true
	mu.Unlock()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
	case <-time.After(60 * time.Second):
		cancel()
		<-runErr
		t.Fatalf("the capture did not see the %d events within a minute (stats %+v)", len(evs), rec.Stats())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(""); err != nil {
		t.Fatal(err)
	}
	st, err := h.Stats()
	if err != nil || st.Packets == 0 {
		t.Errorf("Stats() = %+v, %v", st, err)
	}
	// Loopback shows each packet twice (outgoing, incoming); one copy is
	// kept. A few segments may still repeat: real retransmissions (tail
	// loss probes on a loaded machine).
	dups := 0
	for _, n := range segs {
		if n > 1 {
			dups++
		}
	}
	if dups*2 > len(segs) {
		t.Errorf("%d of %d segments captured more than once", dups, len(segs))
	}

	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []*formats.Frame
	sc := f.Records()
	for {
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if fr, ok := r.(*formats.Frame); ok {
			got = append(got, fr)
		}
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events recorded; want %d", len(got), len(evs))
	}
	for i, e := range evs {
		secret := strings.Contains(e, `"kind":"Secret"`)
		switch {
		case !secret && string(got[i].Data) != e:
			t.Errorf("event %d = %q; want %q", i, got[i].Data, e)
		case secret && (len(got[i].Data) != len(e) || len(got[i].Redacted) == 0):
			t.Errorf("Secret event %d = %q; want it redacted, same length", i, got[i].Data)
		}
	}
	if x := f.Index().Exchanges; len(x) != 1 || x[0].Request.Method != "GET" {
		t.Errorf("exchanges = %+v", x)
	}
	wttest.CheckNoSecrets(t, path, liveToken, liveSecret, base64.StdEncoding.EncodeToString([]byte(liveSecret)))
}

func TestOpenErrors(t *testing.T) {
	_, err := live.Open("no-such-interface0", live.Options{})
	if !errors.Is(err, live.ErrNoInterface) {
		t.Errorf("Open(no-such-interface0) = %v; want ErrNoInterface", err)
	}
}
