package capture

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// recordTLSH2 records the tls-h2 scenario with its key log through the
// Recorder: TCP reassembly, TLS 1.3 decryption, HTTP/2.
func recordTLSH2(t *testing.T, dir string) []formats.Record {
	t.Helper()
	kl, err := os.Open(filepath.Join(dir, "keylog.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	keys, err := tlsdec.ParseKeyLog(kl)
	if err != nil {
		t.Fatal(err)
	}
	sink, st := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeyLog: keys, KeepSecrets: true})
	if st.TLSConns == 0 || st.TLSUndecrypted != 0 {
		t.Errorf("TLS connections: %d, not decrypted: %d", st.TLSConns, st.TLSUndecrypted)
	}
	for _, r := range sink.recs {
		if v, ok := r.(*formats.TLS); ok && (v.Version != 0x0304 || v.ALPN != "h2" || !v.Decrypted) {
			t.Errorf("conn %d: TLS %+v; want TLS 1.3, h2, decrypted", v.Conn, v)
		}
	}
	return sink.recs
}

// TestH2CorpusTLS checks the HTTP/2 handler on the tls-h2 corpus scenario
// (a real kube-apiserver over TLS 1.3 + HTTP/2): every watch event the
// real clients received, no anomaly, every request complete, and no
// bearer token in any record.
func TestH2CorpusTLS(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus", "tls-h2")
	recs := recordTLSH2(t, dir)
	for _, r := range recs {
		if a, ok := r.(*formats.Anomaly); ok {
			t.Errorf("anomaly: %+v", a)
		}
		if s := fmt.Sprintf("%+v", r); strings.Contains(s, "corpus-admin-token") {
			t.Fatalf("a record holds the bearer token: %s", clip(s))
		}
	}
	compareTruth(t, readTruth(t, filepath.Join(dir, "truth.jsonl")), events(t, recs))

	views := viewExchanges(t, recs)
	if len(views) != 209 {
		t.Errorf("%d exchanges; meta.json lists 209 requests", len(views))
	}
	var watches []string
	for _, v := range views {
		if v.resp == nil || v.end == nil || v.reqEnd == nil || v.req.Missing {
			t.Errorf("exchange %d (%s %s, stream %d): response %v, end %v, request end %v", v.req.Exchange, v.req.Method, v.req.Target, v.req.Stream, v.resp, v.end, v.reqEnd)
			continue
		}
		if v.end.Status != formats.EndComplete || v.reqEnd.Status != formats.EndComplete {
			t.Errorf("exchange %d (%s %s): ends %v / %v %q", v.req.Exchange, v.req.Method, v.req.Target, v.reqEnd.Status, v.end.Status, v.end.Note)
		}
		if a := headerMap(v.req.Header)["authorization"]; a.Name != "" && (!a.Redacted || a.Value != "") {
			t.Errorf("exchange %d: authorization %+v", v.req.Exchange, a)
		}
		if v.resp.Events != frame.Unknown {
			watches = append(watches, fmt.Sprintf("conn %d stream %d %s", v.req.Conn, v.req.Stream, v.req.Target))
		}
	}
	sort.Strings(watches)
	t.Logf("watches: %q", watches)
	if len(watches) != 3 {
		t.Errorf("%d watch exchanges; want 3", len(watches))
	}
}

// dropPackets returns the capture at path without the packets drop picks,
// as a pcap in memory. drop sees every packet's TCP layer (nil for a
// packet without one) and its index.
func dropPackets(t *testing.T, path string, drop func(i int, tcp *layers.TCP) bool) (out []byte, dropped int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f, pcapfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	if err := w.WriteFileHeader(262144, layers.LinkType(r.LinkType())); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(p.Data, layers.LinkType(p.LinkType), gopacket.DecodeOptions{NoCopy: true, Lazy: true})
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if drop(i, tcp) {
			dropped++
			continue
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.Time), CaptureLength: len(p.Data), Length: p.Length}
		if err := w.WritePacket(ci, p.Data); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes(), dropped
}

// TestH2CorpusTLSGap drops server→client packets from the middle of the
// tls-h2 capture's watches (as a capture that lost packets would): TLS
// decryption and HTTP/2 framing resynchronize after each gap, and every
// watch goes on: the events recorded are the truth's, in order, byte for
// byte, less only the few the lost packets carried.
func TestH2CorpusTLSGap(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus", "tls-h2")
	kl, err := os.Open(filepath.Join(dir, "keylog.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	keys, err := tlsdec.ParseKeyLog(kl)
	if err != nil {
		t.Fatal(err)
	}
	// Server→client packets with at least 500 bytes of payload (a TLS
	// record with events): every 40th of them is lost.
	n := 0
	pcap, dropped := dropPackets(t, filepath.Join(dir, "capture.pcap"), func(i int, tcp *layers.TCP) bool {
		if tcp == nil || tcp.SrcPort != 6443 || len(tcp.Payload) < 500 {
			return false
		}
		n++
		return n%40 == 20
	})
	t.Logf("dropped %d of %d server→client data packets", dropped, n)
	sink, _ := recordReader(t, bytes.NewReader(pcap), Options{KeyLog: keys, KeepSecrets: true})
	got := events(t, sink.recs)

	truth := readTruth(t, filepath.Join(dir, "truth.jsonl"))
	index := map[string]int{} // event SHA-256 → its place in the truth
	for i, e := range truth {
		index[e.EventSHA256] = i
	}
	last := map[int64]int{} // exchange → truth index of its last event
	var maxLate time.Duration
	for _, e := range got {
		i, ok := index[e.SHA256]
		if !ok {
			t.Fatalf("exchange %d event %d (%s %s %s rv %s) is in no client's truth", e.Exchange, e.Seq, e.Type, e.Kind, e.Name, e.RV)
		}
		if p, ok := last[e.Exchange]; ok && (i <= p || truth[i].ReqID != truth[p].ReqID || truth[i].Conn != truth[p].Conn) {
			t.Fatalf("exchange %d event %d is truth event %d, after truth event %d: out of order or from another stream", e.Exchange, e.Seq, i, p)
		}
		last[e.Exchange] = i
		// The capture time of an event is that of the packet completing
		// it (within 2 ms of the client's receipt on the intact capture),
		// except for data that waited behind a gap: TCP reassembly holds
		// it until the gap is declared lost, up to the reorder window
		// (10 s, checked once a second of capture time) later, and it
		// carries that time.
		d := time.Duration(e.Time - truth[i].RecvUnixNano).Abs()
		maxLate = max(maxLate, d)
		if d > 13*time.Second {
			t.Errorf("exchange %d event %d: capture time %v from the client's receipt", e.Exchange, e.Seq, d)
		}
	}
	t.Logf("largest difference between capture time and the client's receipt: %v", maxLate)
	missing := len(truth) - len(got)
	t.Logf("%d of %d events recorded, %d lost with the packets", len(got), len(truth), missing)
	if missing < 1 || missing > 4*dropped {
		t.Errorf("%d events lost to %d dropped packets; want between 1 and %d", missing, dropped, 4*dropped)
	}
	var gaps, resyncs int
	for _, r := range sink.recs {
		if a, ok := r.(*formats.Anomaly); ok {
			switch a.Kind {
			case formats.AnomalyGap:
				gaps++
			case formats.AnomalyResync:
				resyncs++
			}
		}
	}
	if gaps < dropped || resyncs < dropped {
		t.Errorf("%d gap and %d resync anomalies for %d dropped packets", gaps, resyncs, dropped)
	}
}
