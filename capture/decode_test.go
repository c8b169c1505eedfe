package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/wtrace/wtrace/capture/pcapfile"
)

// gopacketSegment is what the reference decoder (gopacket's layers, which
// the recorder used before its own decoder) makes of a packet.
type gopacketSegment struct {
	src, dst           endpointKey
	seq                uint32
	fin, syn, rst, ack bool
	payload            []byte
	cut                int
}

// gopacketDecode decodes a packet as decode did with gopacket's layers.
func gopacketDecode(link pcapfile.LinkType, data []byte) (gopacketSegment, error) {
	var sg gopacketSegment
	et, off, err := linkPayload(link, data)
	if err != nil {
		return sg, err
	}
	data = data[off:]
	var ip4 layers.IPv4
	var ip6 layers.IPv6
	var tcp layers.TCP
	var tcpData []byte
	wire, tcpOff := 0, 0
	switch et {
	case etherTypeIPv4:
		if err := ip4.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return sg, err
		}
		if ip4.Protocol != layers.IPProtocolTCP {
			return sg, errNotTCP
		}
		if ip4.Flags&layers.IPv4MoreFragments != 0 || ip4.FragOffset != 0 {
			return sg, errFragment
		}
		wire, tcpOff = int(ip4.Length), int(ip4.IHL)*4
		sg.src.ip, sg.dst.ip = ip16(ip4.SrcIP), ip16(ip4.DstIP)
		tcpData = ip4.Payload
	case etherTypeIPv6:
		if err := ip6.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return sg, err
		}
		next, payload, err := skipIPv6Extensions(uint8(ip6.NextHeader), ip6.Payload)
		if err != nil {
			return sg, err
		}
		if next != protoTCP {
			return sg, errNotTCP
		}
		if ip6.Length != 0 {
			wire, tcpOff = int(ip6.Length)+40, 40+len(ip6.Payload)-len(payload)
		}
		copy(sg.src.ip[:], ip6.SrcIP.To16())
		copy(sg.dst.ip[:], ip6.DstIP.To16())
		tcpData = payload
	default:
		return sg, errNotTCP
	}
	if err := tcp.DecodeFromBytes(tcpData, gopacket.NilDecodeFeedback); err != nil {
		return sg, err
	}
	sg.src.port, sg.dst.port = uint16(tcp.SrcPort), uint16(tcp.DstPort)
	sg.seq, sg.fin, sg.syn, sg.rst, sg.ack = tcp.Seq, tcp.FIN, tcp.SYN, tcp.RST, tcp.ACK
	sg.payload = tcp.Payload
	if wire > 0 {
		if n := wire - tcpOff - int(tcp.DataOffset)*4 - len(tcp.Payload); n > 0 && n < 1<<17 {
			sg.cut = n
		}
	}
	return sg, nil
}

// hopByHop reports an IPv6 packet whose first extension is a hop-by-hop
// header: there the decoder departs from gopacket on purpose. gopacket
// strips the header from the payload but still names it as the next header
// (the walk after it then misreads the TCP header as one), and measures
// the payload length from after it; the decoder walks it as any other.
func hopByHop(link pcapfile.LinkType, data []byte) bool {
	et, off, err := linkPayload(link, data)
	return err == nil && et == etherTypeIPv6 && len(data) >= off+40 && data[off+6] == protoHopByHop
}

// checkParity decodes data with the decoder and with gopacket's layers and
// fails if they disagree: on whether it is a TCP segment (and why not, for
// errNotTCP and errFragment), and on every field the reassembly uses.
func checkParity(t *testing.T, link pcapfile.LinkType, data []byte) {
	t.Helper()
	if hopByHop(link, data) {
		return
	}
	var d decoder
	got, gotErr := d.decode(link, bytes.Clone(data))
	want, wantErr := gopacketDecode(link, bytes.Clone(data))
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("link %d, % x:\ndecoder error: %v\ngopacket error: %v", link, data, gotErr, wantErr)
	}
	for _, sentinel := range []error{errNotTCP, errFragment} {
		if errors.Is(gotErr, sentinel) != errors.Is(wantErr, sentinel) {
			t.Fatalf("link %d, % x:\ndecoder error: %v\ngopacket error: %v", link, data, gotErr, wantErr)
		}
	}
	if gotErr != nil {
		return
	}
	tcp := got.tcp
	if got.src != want.src || got.dst != want.dst || tcp.Seq != want.seq || tcp.FIN != want.fin || tcp.SYN != want.syn ||
		tcp.RST != want.rst || tcp.ACK != want.ack || !bytes.Equal(tcp.Payload, want.payload) || got.cut != want.cut {
		t.Fatalf("link %d, % x:\ndecoder  %+v %+v cut %d\ngopacket %+v", link, data, got, *tcp, got.cut, want)
	}
}

// TestDecodeParity holds the decoder to gopacket's layers on every packet
// of the committed captures, and on their headers damaged byte by byte.
func TestDecodeParity(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "corpus", "*", "capture.pcap*"))
	more, _ := filepath.Glob(filepath.Join("testdata", "*.pcap*"))
	paths = append(paths, more...)
	if len(paths) == 0 {
		t.Fatal("no captures under testdata")
	}
	packets := 0
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapfile.NewReader(f, pcapfile.Options{})
		if err != nil {
			f.Close()
			continue // not a capture this reader opens (compressed fixtures)
		}
		for n := 0; n < 2000; n++ {
			p, err := r.Next()
			if err != nil {
				break
			}
			packets++
			checkParity(t, p.LinkType, p.Data)
			if n%50 == 0 {
				// Damage each header byte in turn.
				for i := range min(len(p.Data), 80) {
					b := bytes.Clone(p.Data)
					for _, v := range []byte{0x00, 0xff, b[i] ^ 0x0f} {
						b[i] = v
						checkParity(t, p.LinkType, b)
					}
				}
			}
		}
		r.Close()
		f.Close()
	}
	if packets == 0 {
		t.Fatal("no packets read")
	}
	t.Logf("%d packets of %d captures", packets, len(paths))
}

// FuzzDecodeParity holds the decoder to gopacket's layers on any packet.
func FuzzDecodeParity(f *testing.F) {
	ip4 := []byte{0x45, 0, 0, 52, 0, 1, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
		0x1f, 0x41, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 2, 0x80, 0x18, 0xff, 0xff, 0, 0, 0, 0,
		1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 'h', 'i'}
	binary.BigEndian.PutUint16(ip4[2:], uint16(len(ip4)))
	ip6 := append([]byte{0x60, 0, 0, 0, 0, 22, 6, 64}, make([]byte, 32)...)
	ip6[23], ip6[39] = 1, 1
	ip6 = append(ip6, ip4[20:]...)
	ip6[5] = byte(len(ip6) - 40)
	for _, seed := range []struct {
		link pcapfile.LinkType
		data []byte
	}{
		{pcapfile.LinkRaw, ip4},
		{pcapfile.LinkRaw, ip6},
		{pcapfile.LinkNull, append([]byte{2, 0, 0, 0}, ip4...)},
		{pcapfile.LinkEthernet, append(append(make([]byte, 12), 0x08, 0x00), ip4...)},
		{pcapfile.LinkEthernet, append(append(make([]byte, 12), 0x86, 0xdd), ip6...)},
		{pcapfile.LinkLinuxSLL, append(append(make([]byte, 14), 0x08, 0x00), ip4...)},
	} {
		f.Add(uint16(seed.link), seed.data)
	}
	f.Fuzz(func(t *testing.T, link uint16, data []byte) {
		checkParity(t, pcapfile.LinkType(link), data)
	})
}

// TestDecodeIPv6HopByHop: a TCP segment behind a hop-by-hop options header
// (RFC 8200 §4.3) or in a jumbogram (RFC 2675) decodes to its own ports and
// payload; cut headers and bad jumbo options are errors.
func TestDecodeIPv6HopByHop(t *testing.T) {
	tcp := []byte{0x1f, 0x41, 0xc3, 0x50, 0, 0, 0, 9, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0, 'o', 'k'}
	packet := func(length int, hbh []byte) []byte {
		p := append([]byte{0x60, 0, 0, 0, byte(length >> 8), byte(length), 0, 64}, make([]byte, 32)...)
		p[23], p[39] = 1, 2
		return append(append(p, hbh...), tcp...)
	}
	routerAlert := []byte{6, 0, 5, 2, 0, 0, 1, 0}     // next TCP, 8 bytes, router alert option
	jumbo := []byte{6, 0, 0xc2, 4, 0, 1, 0, 0}        // jumbo payload length 65536
	shortJumbo := []byte{6, 0, 0xc2, 4, 0, 0, 0, 100} // jumbo length ≤ 65535
	cutOption := []byte{6, 0, 5, 9, 0, 0, 0, 0}       // option longer than the header
	for _, tc := range []struct {
		name    string
		data    []byte
		payload string
		wantErr bool
	}{
		{"router alert", packet(len(routerAlert)+len(tcp), routerAlert), "ok", false},
		{"jumbogram", packet(0, jumbo), "ok", false},
		{"jumbo option with a length", packet(len(jumbo)+len(tcp), jumbo), "", true},
		{"jumbo length too small", packet(0, shortJumbo), "", true},
		{"length 0 without jumbo option", packet(0, routerAlert), "", true},
		{"option cut", packet(len(cutOption)+len(tcp), cutOption), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d decoder
			sg, err := d.decode(pcapfile.LinkRaw, tc.data)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("decoded %+v; want an error", *sg.tcp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sg.src.port != 8001 || sg.dst.port != 50000 || sg.tcp.Seq != 9 || string(sg.tcp.Payload) != tc.payload || sg.cut != 0 {
				t.Fatalf("decoded ports %d→%d seq %d payload %q cut %d; want 8001→50000 seq 9 %q", sg.src.port, sg.dst.port, sg.tcp.Seq, sg.tcp.Payload, sg.cut, tc.payload)
			}
		})
	}
}
