package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
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
		if v.resp.Events != formats.EventsNone {
			watches = append(watches, fmt.Sprintf("conn %d stream %d %s", v.req.Conn, v.req.Stream, v.req.Target))
		}
	}
	sort.Strings(watches)
	t.Logf("watches: %q", watches)
	if len(watches) != 3 {
		t.Errorf("%d watch exchanges; want 3", len(watches))
	}
}
