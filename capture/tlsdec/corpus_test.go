package tlsdec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/google/gopacket/reassembly"
)

var update = flag.Bool("update", false, "regenerate testdata fixtures from ../../../shared/corpus")

const corpusDir = "../../../shared/corpus/tls-h2"

// h2Preface is the HTTP/2 client connection preface (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// tcpConn is one TCP connection of a capture, decrypted as it reassembles.
type tcpConn struct {
	client string // ip:port of the side that sent the SYN
	conn   *Conn
	sink   capSink
	errs   []error
	fed    [2]bool
	stats  reassembly.TCPAssemblyStats // summed: how much reordering and overlap reassembly handled
}

func (s *tcpConn) Accept(*layers.TCP, gopacket.CaptureInfo, reassembly.TCPFlowDirection, reassembly.Sequence, *bool, reassembly.AssemblerContext) bool {
	return true
}

func (s *tcpConn) ReassembledSG(sg reassembly.ScatterGather, ac reassembly.AssemblerContext) {
	dir, _, _, skip := sg.Info()
	d := ClientToServer
	if dir == reassembly.TCPDirServerToClient {
		d = ServerToClient
	}
	n, _ := sg.Lengths()
	st := sg.Stats()
	s.stats.OverlapPackets += st.OverlapPackets
	s.stats.OverlapBytes += st.OverlapBytes
	s.stats.QueuedPackets += st.QueuedPackets
	if skip > 0 || skip < 0 && s.fed[d] {
		s.conn.Gap(d, skip)
	}
	if n == 0 {
		return
	}
	s.fed[d] = true
	if err := s.conn.Feed(d, sg.Fetch(n), ac.GetCaptureInfo().Timestamp.UnixNano()); err != nil {
		s.errs = append(s.errs, err)
	}
}

func (s *tcpConn) ReassemblyComplete(reassembly.AssemblerContext) bool { return true }

type connFactory struct {
	keys  *KeyLog
	conns []*tcpConn
}

func (f *connFactory) New(netFlow, tcpFlow gopacket.Flow, _ *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	c := &tcpConn{client: fmt.Sprintf("%s:%s", netFlow.Src(), tcpFlow.Src())}
	c.conn = NewConn(f.keys, &c.sink, Options{})
	f.conns = append(f.conns, c)
	return c
}

type captureContext struct{ ci gopacket.CaptureInfo }

func (c *captureContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

// decryptPcap reassembles every TCP connection of a pcap with gopacket's
// reassembly (which drops retransmitted bytes and reorders segments) and
// decrypts each one. It returns the connections by client address.
func decryptPcap(t testing.TB, path string, keys *KeyLog, mangle func([]gopacket.Packet) []gopacket.Packet) map[string]*tcpConn {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var pkts []gopacket.Packet
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		p.Metadata().CaptureInfo = ci
		pkts = append(pkts, p)
	}
	if mangle != nil {
		pkts = mangle(pkts)
	}
	factory := &connFactory{keys: keys}
	asm := reassembly.NewAssembler(reassembly.NewStreamPool(factory))
	for _, p := range pkts {
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || p.NetworkLayer() == nil {
			continue
		}
		asm.AssembleWithContext(p.NetworkLayer().NetworkFlow(), tcp, &captureContext{p.Metadata().CaptureInfo})
	}
	asm.FlushAll()
	out := map[string]*tcpConn{}
	for _, c := range factory.conns {
		out[c.client] = c
	}
	return out
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// tsharkPlaintext: the decrypted streams of tls-h2 per client address, as
// tshark 4.0.17 reports them (`-o tls.keylog_file:keylog.txt -z
// follow,tls,raw,N`): length and SHA-256 of each direction.
var tsharkPlaintext = map[string][2]struct {
	n   int
	sum string
}{
	"127.0.0.1:20853": {{183594, "97f21f3873c097ca6a06bcea05b443f9e4e02f7aa33a000e665f513a4f7a1aed"}, {227835, "48ab0b5b60e00ed169ef08f9754e20f4d96a4fdb50849e2d3b059a6937d48417"}},
	"127.0.0.1:20272": {{1813, "3cf5ae0629b6bd613ac9c593882834693fa7fb4a6e8c0175c68f6c1128acbe03"}, {272875, "eea9bfb89e0c356894539cf74e3200e4a02bb4f7c0444730fe88796e74b483af"}},
	"127.0.0.1:20102": {{1358, "722e646a82d0f3bf0d107daec8dacb98322c330e434c9f8b40ebfc04bf17bb06"}, {208210, "ed6dc15d08691e4c17cb34c5d4baa34a4cb5bd203722f3c9f68c1afb6bee4274"}},
}

// checkH2Conns asserts that every connection decrypted completely, speaks
// HTTP/2 and matches tshark's plaintext.
func checkH2Conns(t *testing.T, conns map[string]*tcpConn, want []string) {
	t.Helper()
	var got []string
	for k := range conns {
		got = append(got, k)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("connections %v; want %v", got, want)
	}
	for _, addr := range want {
		c := conns[addr]
		in := c.conn.Info()
		if len(c.errs) > 0 || !in.Decrypted || in.Note != "" {
			t.Errorf("%s: errors %v, Decrypted %v, Note %q", addr, c.errs, in.Decrypted, in.Note)
		}
		if in.Version != 0x0304 || in.ALPN != "h2" || in.SNI != "" && in.SNI != "127.0.0.1" {
			t.Errorf("%s: version %#x ALPN %q SNI %q; want TLS 1.3, h2", addr, in.Version, in.ALPN, in.SNI)
		}
		for d := range in.Dir {
			if in.Dir[d].Undecryptable != 0 || in.Dir[d].Err != nil || in.Dir[d].Lost != 0 {
				t.Errorf("%s %s: %+v", addr, Direction(d), in.Dir[d])
			}
		}
		if !bytes.HasPrefix(c.sink.data[ClientToServer], []byte(h2Preface)) {
			t.Errorf("%s: client->server plaintext starts %q; want the HTTP/2 preface", addr, c.sink.data[ClientToServer][:min(24, len(c.sink.data[0]))])
		}
		ts := tsharkPlaintext[addr]
		for d := range ts {
			if n, s := len(c.sink.data[d]), sum(c.sink.data[d]); n != ts[d].n || s != ts[d].sum {
				t.Errorf("%s %s: plaintext %d bytes sha256 %s; tshark: %d bytes %s", addr, Direction(d), n, s, ts[d].n, ts[d].sum)
			}
		}
		t.Logf("%s: %s %s ALPN %s, records c->s %d s->c %d, plaintext %d/%d bytes, alerts %v",
			addr, in.VersionName, in.CipherName, in.ALPN, in.Dir[0].Records, in.Dir[1].Records, in.Dir[0].AppData, in.Dir[1].AppData, in.Alerts)
	}
}

func TestCorpusTLSH2(t *testing.T) {
	pcap := filepath.Join(corpusDir, "capture.pcap")
	kl, err := os.ReadFile(filepath.Join(corpusDir, "keylog.txt"))
	if err != nil {
		t.Skipf("corpus not available: %v", err)
	}
	keys := mustKeyLog(t, kl)
	conns := decryptPcap(t, pcap, keys, nil)
	checkH2Conns(t, conns, []string{"127.0.0.1:20102", "127.0.0.1:20272", "127.0.0.1:20853"})
}

// The fixture is the client-go protobuf watch connection of tls-h2
// (127.0.0.1:20102), all its packets, with its four key log lines.
const (
	fixturePcap   = "testdata/tls13-h2.pcap"
	fixtureKeyLog = "testdata/tls13-h2.keylog"
	fixtureClient = "127.0.0.1:20102"
)

func TestFixtureTLSH2(t *testing.T) {
	if *update {
		writeFixture(t)
	}
	kl, err := os.ReadFile(fixtureKeyLog)
	if err != nil {
		t.Fatal(err)
	}
	conns := decryptPcap(t, fixturePcap, mustKeyLog(t, kl), nil)
	checkH2Conns(t, conns, []string{fixtureClient})
}

// TestFixtureRetransmissions replays the fixture with every third data
// segment sent twice and every fifth pair of data segments swapped: TCP
// reassembly drops the duplicates and reorders, and decryption is the same.
func TestFixtureRetransmissions(t *testing.T) {
	kl, err := os.ReadFile(fixtureKeyLog)
	if err != nil {
		t.Fatal(err)
	}
	mangle := func(in []gopacket.Packet) []gopacket.Packet {
		var out []gopacket.Packet
		n := 0
		for _, p := range in {
			tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if !ok || len(tcp.Payload) == 0 {
				out = append(out, p)
				continue
			}
			n++
			out = append(out, p)
			if n%5 == 0 && len(out) >= 2 {
				if prev, ok := out[len(out)-2].Layer(layers.LayerTypeTCP).(*layers.TCP); ok && len(prev.Payload) > 0 {
					out[len(out)-1], out[len(out)-2] = out[len(out)-2], out[len(out)-1]
				}
			}
			if n%3 == 0 {
				out = append(out, p) // a retransmission
			}
		}
		return out
	}
	conns := decryptPcap(t, fixturePcap, mustKeyLog(t, kl), mangle)
	checkH2Conns(t, conns, []string{fixtureClient})
	if st := conns[fixtureClient].stats; st.OverlapPackets == 0 || st.QueuedPackets == 0 {
		t.Fatalf("reassembly stats %+v: the mangling did not reach it", st)
	}
	t.Logf("reassembly: %+v", conns[fixtureClient].stats)
}

// writeFixture copies the packets of one connection out of the corpus, and
// the key log lines of its client random.
func writeFixture(t *testing.T) {
	in, err := os.Open(filepath.Join(corpusDir, "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, err := pcapgo.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := pcapgo.NewWriterNanos(&out)
	if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
		t.Fatal(err)
	}
	var clientHello []byte
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
		if !ok || (fmt.Sprint(tcp.SrcPort) != "20102" && fmt.Sprint(tcp.DstPort) != "20102") {
			continue
		}
		if clientHello == nil && tcp.DstPort == 6443 && IsClientHello(tcp.Payload) {
			clientHello = bytes.Clone(tcp.Payload)
		}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	cr := hex.EncodeToString(clientHello[11:43])
	kl, err := os.ReadFile(filepath.Join(corpusDir, "keylog.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []byte
	for _, l := range bytes.SplitAfter(kl, []byte("\n")) {
		if bytes.Contains(l, []byte(" "+cr+" ")) {
			lines = append(lines, l...)
		}
	}
	if err := os.WriteFile(fixturePcap, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixtureKeyLog, lines, 0o644); err != nil {
		t.Fatal(err)
	}
}
