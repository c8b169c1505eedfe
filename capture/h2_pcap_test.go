package capture

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/wtrace/wtrace/formats"
)

// writeTCPPcap writes pieces as the packets of one TCP connection
// (Ethernet, IPv4, TCP) from 127.0.0.1:40001 to 127.0.0.1:8080: the
// handshake, each piece in segments of at most mss bytes stamped with its
// time, then both FINs.
func writeTCPPcap(t testing.TB, path string, pieces []wirePiece, mss int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ips := [2]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 1)}
	ports := [2]layers.TCPPort{40001, 8080}
	seq := [2]uint32{1000, 900000}
	tm := pieces[0].t - 3000
	pkt := func(dir int, syn, fin bool, payload []byte, ts int64) {
		eth := &layers.Ethernet{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: ips[dir], DstIP: ips[1-dir]}
		tcp := &layers.TCP{SrcPort: ports[dir], DstPort: ports[1-dir], Seq: seq[dir], Ack: seq[1-dir], SYN: syn, FIN: fin,
			ACK: !syn || dir == 1, PSH: len(payload) > 0, Window: 65535}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
		if err := gopacket.SerializeLayers(buf, opts, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, ts), CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
		seq[dir] += uint32(len(payload))
		if syn || fin {
			seq[dir]++
		}
	}
	pkt(0, true, false, nil, tm)
	pkt(1, true, false, nil, tm+1000)
	pkt(0, false, false, nil, tm+2000)
	for _, p := range pieces {
		dir := 0
		if p.dir == formats.ServerToClient {
			dir = 1
		}
		for b := p.data; len(b) > 0; {
			n := min(len(b), mss)
			pkt(dir, false, false, b[:n], p.t)
			b = b[n:]
		}
		tm = p.t
	}
	pkt(0, false, true, nil, tm+1000)
	pkt(1, false, true, nil, tm+2000)
	pkt(0, false, false, nil, tm+3000)
}

// TestH2Recorder records the test session as a pcap: the Recorder detects
// HTTP/2 with prior knowledge by the client preface and records every
// exchange as the handler does on its own.
func TestH2Recorder(t *testing.T) {
	pieces, want := h2Session(t)
	serverFirst := append([]wirePiece(nil), pieces...)
	for i, p := range serverFirst {
		if p.dir == formats.ServerToClient {
			// The server's SETTINGS before the client's preface.
			first := serverFirst[i]
			copy(serverFirst[1:i+1], serverFirst[:i])
			serverFirst[0] = first
			break
		}
	}
	for _, tc := range []struct {
		name   string
		pieces []wirePiece
		mss    int
	}{
		{"loopback", pieces, 65000},
		{"ethernet", pieces, 1448},
		{"server first", serverFirst, 65000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h2c.pcap")
			writeTCPPcap(t, path, tc.pieces, tc.mss)
			sink, st := recordFile(t, path, Options{})
			var conns []*formats.Conn
			var recs []formats.Record
			for _, r := range sink.recs {
				switch r := r.(type) {
				case *formats.Conn:
					conns = append(conns, r)
				case *formats.ConnEnd:
					if r.Reason != formats.ConnFIN || r.LostBytes != 0 {
						t.Errorf("ConnEnd %+v; want FIN, nothing lost", r)
					}
				default:
					recs = append(recs, r)
				}
			}
			if len(conns) != 1 || conns[0].Proto != "h2c" || conns[0].Client != "127.0.0.1:40001" || conns[0].Midstream {
				t.Fatalf("connections %+v; want one h2c connection from 127.0.0.1:40001", conns)
			}
			checkH2Session(t, recs, pieces, want)
			evs := events(t, sink.recs)
			if st.Events != int64(len(evs)) || len(evs) == 0 {
				t.Errorf("Stats.Events = %d; %d events", st.Events, len(evs))
			}
			for _, e := range evs {
				if e.Conn != "127.0.0.1:40001->127.0.0.1:8080" || e.Type == "" || e.Name == "" {
					t.Errorf("event %+v", e)
					break
				}
			}
		})
	}
}
