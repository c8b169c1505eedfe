package capture

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"golang.org/x/net/http2"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// recordInformerTLS runs configmap and secret informers (client-go, TLS
// 1.3 and HTTP/2, its key log kept) against a real apiserver through a
// loop tap while a workload creates, updates and deletes objects of a
// few KiB to a few tens of KiB; it returns the capture and the key log.
func recordInformerTLS(t *testing.T) (pcap []byte, keys *tlsdec.KeyLog, server layers.TCPPort) {
	c := k8stest.Start(t)
	const ns = "wtrace-burst"
	api := func(method, path string, body string) {
		resp, b := c.Do(method, path, http.Header{"Content-Type": {"application/json"}}, []byte(body))
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	api("POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`)
	// Objects there before the informers start: their LIST is a few MB
	// of full-size TLS records, in packets of up to 64 KiB.
	for i := range 150 {
		api("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"big-%03d"},"data":{"v":%q}}`, i, strings.Repeat(fmt.Sprintf("big-%03d-", i), 2500)))
	}
	tp, err := pcaptest.NewTap(strings.TrimPrefix(c.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	var kl bytes.Buffer
	var klMu sync.Mutex
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1",
		KeyLogWriter: lockedWriter{&klMu, &kl}}, ForceAttemptHTTP2: true}
	if err := http2.ConfigureTransport(tr); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://" + tp.Addr(), BearerToken: k8stest.Token, Transport: tr}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	cms, secs := factory.Core().V1().ConfigMaps().Informer(), factory.Core().V1().Secrets().Informer()
	var mu sync.Mutex
	seen := 0
	count := k8scache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mu.Lock(); seen++; mu.Unlock() },
		UpdateFunc: func(any, any) { mu.Lock(); seen++; mu.Unlock() },
		DeleteFunc: func(any) { mu.Lock(); seen++; mu.Unlock() },
	}
	cms.AddEventHandler(count)
	secs.AddEventHandler(count)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	if !k8scache.WaitForCacheSync(ctx.Done(), cms.HasSynced, secs.HasSynced) {
		t.Fatal("informers did not sync")
	}
	want := 150 + informerWorkload(t, api, ns, tp)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		s := seen
		mu.Unlock()
		if s >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the informers saw %d events; want %d", s, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	factory.Shutdown()
	tr.CloseIdleConnections()
	tp.Close()
	klMu.Lock()
	defer klMu.Unlock()
	keys, err = tlsdec.ParseKeyLog(bytes.NewReader(kl.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(tp.Addr())
	p, _ := strconv.Atoi(port)
	return tp.Pcap(pcaptest.TapCapture{Times: true}), keys, layers.TCPPort(p)
}

// informerWorkload creates, updates and deletes configmaps and secrets in
// ns, then floods it with small configmaps (tp reads them 64 KiB at a
// time) and creates a large one; it returns how many events the
// informers will see.
func informerWorkload(t *testing.T, api func(method, path, body string), ns string, tp *pcaptest.Tap) int {
	t.Helper()
	const n = 80
	want := 0
	for i := range n {
		data := strings.Repeat(fmt.Sprintf("%04d-", i), 200*(1+i%30))
		api("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%03d"},"data":{"v":%q}}`, i, data))
		want++
		if i%4 == 0 {
			api("POST", "/api/v1/namespaces/"+ns+"/secrets", fmt.Sprintf(`{"metadata":{"name":"s-%03d"},"stringData":{"v":%q}}`, i, data[:len(data)/2]))
			want++
		}
	}
	for i := range n {
		api("PUT", fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%03d", ns, i), fmt.Sprintf(`{"metadata":{"name":"cm-%03d"},"data":{"v":"updated-%d"}}`, i, i))
		want++
	}
	for i := range n {
		api("DELETE", fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%03d", ns, i), "")
		want++
	}
	// A flood of small objects (events many to a packet, a TLS record
	// each), then a large one.
	const flood = 1200
	tp.Slow.Store(true)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < flood; i += 16 {
				api("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"small-%04d"},"data":{"v":"%d"}}`, i, i))
			}
		}()
	}
	wg.Wait()
	want += flood
	time.Sleep(time.Second) // the flood's events read, 64 KiB at a time
	tp.Slow.Store(false)
	api("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"last-big"},"data":{"v":%q}}`, strings.Repeat("last-big-", 8000)))
	want++
	return want
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTLSGarbledBurstLoopback: a loopback capture of client-go informers
// on TLS 1.3 and HTTP/2 (real kube-apiserver; a LIST of large objects,
// creates, updates and deletes, a flood of small events read 64 KiB at a
// time, then a large one) with 40 consecutive packets garbled in place
// (issue 34: 173 of 511 events were recorded where 494 are recoverable):
// every event recorded is one the clean capture holds, in its order, and
// at least 95% of those recorded when the same packets are dropped
// instead (what is recoverable) — the burst anywhere in the capture,
// server→client or both ways, every byte garbled or one in each, and
// ending right before a large record after the flood of small ones. The
// drops are recorded with a reorder window of 100 ms, so that the bytes
// after a gap are not held past the clients' own end of the streams.
func TestTLSGarbledBurstLoopback(t *testing.T) {
	if raceEnabled {
		t.Skip("records a 5 MB capture some 30 times; not under -race")
	}
	pcap, keys, server := recordInformerTLS(t)
	path := filepath.Join(t.TempDir(), "capture.pcap")
	if err := os.WriteFile(path, pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{KeyLog: keys, KeepSecrets: true, ReorderWindow: 100 * time.Millisecond}
	sink, _ := recordReader(t, bytes.NewReader(pcap), opts)
	clean := events(t, sink.recs)
	port, total := informerPort(t, path, server)
	pktOff, recs := s2cRecords(t, path, server, port)
	bigPkt, head := largeAfterFlood(t, pktOff, recs)
	t.Logf("%d events, %d server→client packets of the informers' connection (%d bytes of capture); the large record after the flood at byte %d of packet %d",
		len(clean), total, len(pcap), head, bigPkt)

	check := func(name string, set map[int]bool, garble func(k int, p []byte)) {
		pick := func(i int, _ *layers.TCP) bool { return set[i] }
		k := 0
		gp, garbled := garblePackets(t, path, pick, func(p []byte) { garble(k, p); k++ })
		gs, st := recordReader(t, bytes.NewReader(gp), opts)
		got := events(t, gs.recs)
		dp, _ := dropPackets(t, path, pick)
		ds, _ := recordReader(t, bytes.NewReader(dp), opts)
		recoverable := len(events(t, ds.recs))
		t.Logf("%s: %d packets garbled: %d events recorded, %d with them dropped, %d in all", name, garbled, len(got), recoverable, len(clean))
		if 100*len(got) < 95*recoverable {
			t.Errorf("%s: %d events recorded; %d are recoverable (want at least 95%%)", name, len(got), recoverable)
		}
		if st.TLSUndecrypted != 0 {
			t.Errorf("%s: %d TLS connections not decrypted to their end", name, st.TLSUndecrypted)
		}
		checkSubsequence(t, name, got, clean)
	}
	// burst returns the capture's packets of the informers' connection
	// with payload while its server→client packets numbered [from, to)
	// (from 0) go by: those of the server, or of both.
	burst := func(from, to int, both bool) map[int]bool {
		set := map[int]bool{}
		n := 0
		dropPackets(t, path, func(i int, tcp *layers.TCP) bool {
			if tcp == nil || len(tcp.Payload) == 0 {
				return false
			}
			switch {
			case tcp.SrcPort == server && tcp.DstPort == port:
				if n >= from && n < to {
					set[i] = true
				}
				n++
			case both && tcp.SrcPort == port && tcp.DstPort == server && n >= from && n < to:
				set[i] = true
			}
			return false
		})
		return set
	}
	whole := func(_ int, p []byte) {
		for i := range p {
			p[i] ^= 0x5a
		}
	}
	oneByte := func(_ int, p []byte) { p[len(p)/2] ^= 1 }
	for _, frac := range []int{10, 30, 50, 70} {
		for _, both := range []bool{false, true} {
			from := total * frac / 100
			set := burst(from, from+40, both)
			check(fmt.Sprintf("whole/from-%d%%/both-%v", frac, both), set, whole)
			check(fmt.Sprintf("one-byte-each/from-%d%%/both-%v", frac, both), set, oneByte)
		}
	}
	// The 40 packets before the large record, and its own packet up to
	// the record: the first record that authenticates after the burst is
	// large, the records lost are small (the flood's).
	set := burst(bigPkt-40, bigPkt+1, false)
	if head == 0 {
		set = burst(bigPkt-40, bigPkt, false)
	}
	check("before-large", set, func(k int, p []byte) {
		end := len(p)
		if k == 40 {
			end = head
		}
		for i := range end {
			p[i] ^= 0x5a
		}
	})
}

// informerPort returns the client port of the connection that carried the
// most server→client bytes (the informers'), and how many server→client
// packets with payload it has.
func informerPort(t *testing.T, path string, server layers.TCPPort) (layers.TCPPort, int) {
	bytesTo, pkts := map[layers.TCPPort]int{}, map[layers.TCPPort]int{}
	dropPackets(t, path, func(_ int, tcp *layers.TCP) bool {
		if tcp != nil && tcp.SrcPort == server && len(tcp.Payload) > 0 {
			bytesTo[tcp.DstPort] += len(tcp.Payload)
			pkts[tcp.DstPort]++
		}
		return false
	})
	var port layers.TCPPort
	for p, n := range bytesTo {
		if n > bytesTo[port] {
			port = p
		}
	}
	return port, pkts[port]
}

// largeAfterFlood returns the packet (its index among the informers'
// server→client packets) holding the first large TLS record after the
// flood's small ones, and where in the packet the record begins.
func largeAfterFlood(t *testing.T, pktOff []int, recs [][2]int) (pkt, head int) {
	big := -1
	for i := 600; i < len(recs) && big < 0; i++ {
		small := 0
		for _, r := range recs[i-600 : i-5] {
			if r[1] < 2000 {
				small++
			}
		}
		if recs[i][1] > 10000 && small >= 500 {
			big = i
		}
	}
	if big < 0 {
		t.Fatalf("no large TLS record after the flood's small ones (%d records)", len(recs))
	}
	off := recs[big][0]
	for pkt+1 < len(pktOff) && pktOff[pkt+1] <= off {
		pkt++
	}
	return pkt, off - pktOff[pkt]
}

// checkSubsequence fails t unless every event of got is one of want (by
// its bytes), in want's order within each exchange.
func checkSubsequence(t *testing.T, name string, got, want []event) {
	t.Helper()
	at := map[string][]int{}
	for i, e := range want {
		at[e.SHA256] = append(at[e.SHA256], i)
	}
	last := map[int64]int{}
	for _, e := range got {
		idx, ok := at[e.SHA256]
		if !ok {
			t.Errorf("%s: exchange %d event %d (%s %s %s) is not in the clean capture", name, e.Exchange, e.Seq, e.Type, e.Kind, e.Name)
			return
		}
		p, seen := last[e.Exchange]
		i := idx[0]
		for _, j := range idx {
			if !seen || j > p {
				i = j
				break
			}
		}
		if seen && i <= p {
			t.Errorf("%s: exchange %d event %d is out of the clean capture's order", name, e.Exchange, e.Seq)
			return
		}
		last[e.Exchange] = i
	}
}

// s2cRecords returns, for the server→client packets of a capture (in
// order, those with payload), each one's stream offset, and the TLS
// records of that stream (offset, length of the body).
func s2cRecords(t *testing.T, path string, server, port layers.TCPPort) (pktOff []int, recs [][2]int) {
	var stream []byte
	dropPackets(t, path, func(i int, tcp *layers.TCP) bool {
		if tcp != nil && tcp.SrcPort == server && tcp.DstPort == port && len(tcp.Payload) > 0 {
			pktOff = append(pktOff, len(stream))
			stream = append(stream, tcp.Payload...)
		}
		return false
	})
	for off := 0; off+5 <= len(stream); {
		n := int(stream[off+3])<<8 | int(stream[off+4])
		recs = append(recs, [2]int{off, n})
		off += 5 + n
	}
	return pktOff, recs
}
