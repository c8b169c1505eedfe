package capture

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/google/gopacket/reassembly"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// tlsH2Stream is one TCP connection of the tls-h2 capture: reassembled by
// gopacket, decrypted by tlsdec, parsed by h2Conn. It stands in for the
// Recorder's TLS path so the HTTP/2 handler is checked on real apiserver
// traffic on its own.
type tlsH2Stream struct {
	tls *tlsdec.Conn
	h2  *h2Conn
	t   int64
}

func (s *tlsH2Stream) Data(dir tlsdec.Direction, p []byte, t int64) {
	s.h2.data(formats.Direction(dir), p, t)
}

func (s *tlsH2Stream) Accept(*layers.TCP, gopacket.CaptureInfo, reassembly.TCPFlowDirection, reassembly.Sequence, *bool, reassembly.AssemblerContext) bool {
	return true
}

func (s *tlsH2Stream) ReassembledSG(sg reassembly.ScatterGather, ac reassembly.AssemblerContext) {
	dir, _, end, skip := sg.Info()
	d := tlsdec.ClientToServer
	if dir == reassembly.TCPDirServerToClient {
		d = tlsdec.ServerToClient
	}
	s.t = ac.GetCaptureInfo().Timestamp.UnixNano()
	if skip > 0 {
		s.tls.Gap(d, skip)
		s.h2.gap(formats.Direction(d), int64(skip), s.t)
	}
	if n, _ := sg.Lengths(); n > 0 {
		s.tls.Feed(d, sg.Fetch(n), s.t)
	}
	if end {
		s.h2.fin(formats.Direction(d), s.t)
	}
}

func (s *tlsH2Stream) ReassemblyComplete(reassembly.AssemblerContext) bool {
	s.h2.finish(formats.EndTruncated, s.t)
	return true
}

type tlsH2Factory struct {
	keys *tlsdec.KeyLog
	s    *session
}

func (f *tlsH2Factory) New(netFlow, tcpFlow gopacket.Flow, _ *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	id := f.s.nextConn
	f.s.nextConn++
	f.s.emit(&formats.Conn{ID: id, Client: fmt.Sprintf("%s:%s", netFlow.Src(), tcpFlow.Src()),
		Server: fmt.Sprintf("%s:%s", netFlow.Dst(), tcpFlow.Dst()), Proto: "h2"})
	st := &tlsH2Stream{h2: newH2Conn(f.s, id)}
	st.tls = tlsdec.NewConn(f.keys, st, tlsdec.Options{})
	return st
}

// recordTLSH2 records a TLS + HTTP/2 capture with its key log into memory,
// Secret values kept.
func recordTLSH2(t *testing.T, dir string) []formats.Record {
	kf, err := os.Open(filepath.Join(dir, "keylog.txt"))
	if err != nil {
		t.Skipf("tls-h2 corpus copy not available: %v", err)
	}
	defer kf.Close()
	keys, err := tlsdec.ParseKeyLog(kf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	asm := reassembly.NewAssembler(reassembly.NewStreamPool(&tlsH2Factory{keys: keys, s: &session{sink: sink}}))
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || p.NetworkLayer() == nil {
			continue
		}
		asm.AssembleWithContext(p.NetworkLayer().NetworkFlow(), tcp, &captureContext{ci})
	}
	asm.FlushAll()
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
