package live

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"

	"github.com/wtrace/wtrace/capture/pcapfile"
)

// match is the reference the BPF programs are checked against: the same
// rule written as plain Go over an Ethernet frame. A field beyond the end
// of the frame rejects the packet, as a BPF load out of bounds does.
func match(f Filter, b []byte) bool {
	u8 := func(off int) (int, bool) {
		if off+1 > len(b) {
			return 0, false
		}
		return int(b[off]), true
	}
	u16 := func(off int) (int, bool) {
		if off+2 > len(b) {
			return 0, false
		}
		return int(binary.BigEndian.Uint16(b[off:])), true
	}
	addr := func(off, n int) (netip.Addr, bool) {
		if off+n > len(b) {
			return netip.Addr{}, false
		}
		a, _ := netip.AddrFromSlice(b[off : off+n])
		return a, true
	}
	et, ok := u16(12)
	if !ok {
		return false
	}
	var src, dst netip.Addr
	var portOff int
	switch et {
	case 0x0800:
		if p, ok := u8(23); !ok || p != 6 {
			return false
		}
		if f.Port != 0 {
			frag, ok := u16(20)
			if !ok || frag&0x1fff != 0 {
				return false
			}
		}
		if len(f.Hosts) > 0 {
			var ok1, ok2 bool
			src, ok1 = addr(26, 4)
			if !ok1 {
				return false
			}
			// The program loads the destination only when the source
			// did not match.
			if !hostIn(f.Hosts, src) {
				dst, ok2 = addr(30, 4)
				if !ok2 || !hostIn(f.Hosts, dst) {
					return false
				}
			}
		}
		ihl, ok := u8(14)
		if f.Port != 0 && !ok {
			return false
		}
		portOff = 14 + 4*(ihl&0xf)
	case 0x86dd:
		if p, ok := u8(20); !ok || p != 6 {
			return false
		}
		if len(f.Hosts) > 0 {
			if !v6HostMatch(f.Hosts, b) {
				return false
			}
		}
		portOff = 54
	default:
		return false
	}
	if f.Port == 0 {
		return true
	}
	sp, ok := u16(portOff)
	if !ok {
		return false
	}
	if sp == f.Port {
		return true
	}
	dp, ok := u16(portOff + 2)
	return ok && dp == f.Port
}

func hostIn(hosts []netip.Addr, a netip.Addr) bool {
	for _, h := range hosts {
		if h.Unmap() == a {
			return true
		}
	}
	return false
}

// v6HostMatch mirrors the program's word-by-word comparison: a packet
// too short for a word that would be compared is rejected.
func v6HostMatch(hosts []netip.Addr, b []byte) bool {
	for _, off := range []int{22, 38} {
		for _, h := range hosts {
			if h.Is4() || h.Is4In6() {
				continue
			}
			want := h.As16()
			eq := true
			for w := range 4 {
				if off+4*w+4 > len(b) {
					return false
				}
				if string(b[off+4*w:off+4*w+4]) != string(want[4*w:4*w+4]) {
					eq = false
					break
				}
			}
			if eq {
				return true
			}
		}
	}
	return false
}

func runVM(t testing.TB, f Filter) func([]byte) bool {
	t.Helper()
	prog, err := f.Program(DefaultSnapLen)
	if err != nil {
		t.Fatalf("Program(%v): %v", f, err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("NewVM(%v): %v", f, err)
	}
	return func(b []byte) bool {
		n, err := vm.Run(b)
		if err != nil {
			t.Fatalf("VM.Run: %v", err)
		}
		if n != 0 && n != DefaultSnapLen {
			t.Fatalf("VM.Run = %d; want 0 or the snap length", n)
		}
		return n != 0
	}
}

var testFilters = []Filter{
	{},
	{Port: 8001},
	{Port: 6443},
	{Port: 34988},
	{Hosts: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
	{Port: 8001, Hosts: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
	{Port: 8001, Hosts: []netip.Addr{netip.MustParseAddr("10.0.0.1")}},
	{Port: 8001, Hosts: []netip.Addr{netip.MustParseAddr("::1")}},
	{Port: 443, Hosts: []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.2")}},
}

// synthetic builds frames the corpus lacks: IPv6, fragments, UDP, VLAN,
// options, truncated frames.
func synthetic(t testing.TB) [][]byte {
	t.Helper()
	ser := func(ls ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	eth := func(et layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: net.HardwareAddr{0, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0, 0, 0, 0, 0, 2}, EthernetType: et}
	}
	var out [][]byte
	for _, a := range []struct{ src, dst string }{{"127.0.0.1", "127.0.0.1"}, {"10.0.0.1", "10.0.0.9"}, {"10.0.0.9", "10.0.0.2"}, {"192.168.1.1", "192.168.1.2"}} {
		for _, ports := range [][2]int{{8001, 40000}, {40000, 8001}, {443, 1}, {1, 443}, {6443, 6443}, {5, 6}} {
			ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.ParseIP(a.src), DstIP: net.ParseIP(a.dst)}
			tcp := &layers.TCP{SrcPort: layers.TCPPort(ports[0]), DstPort: layers.TCPPort(ports[1]), Seq: 1, ACK: true, Window: 100}
			tcp.SetNetworkLayerForChecksum(ip)
			out = append(out, ser(eth(layers.EthernetTypeIPv4), ip, tcp, gopacket.Payload("hello")))
			// With IP options (IHL 6): ports move.
			ipo := *ip
			ipo.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
			tcp.SetNetworkLayerForChecksum(&ipo)
			out = append(out, ser(eth(layers.EthernetTypeIPv4), &ipo, tcp))
			// A later fragment: no ports.
			ipf := *ip
			ipf.FragOffset = 100
			out = append(out, ser(eth(layers.EthernetTypeIPv4), &ipf, gopacket.Payload("\x1f\x41\x1f\x41xxxxxxxxxxxxxxxx")))
			// The first fragment keeps its ports.
			ipm := *ip
			ipm.Flags = layers.IPv4MoreFragments
			tcp.SetNetworkLayerForChecksum(&ipm)
			out = append(out, ser(eth(layers.EthernetTypeIPv4), &ipm, tcp))
			// UDP on the same ports.
			udp := &layers.UDP{SrcPort: layers.UDPPort(ports[0]), DstPort: layers.UDPPort(ports[1])}
			ipu := *ip
			ipu.Protocol = layers.IPProtocolUDP
			udp.SetNetworkLayerForChecksum(&ipu)
			out = append(out, ser(eth(layers.EthernetTypeIPv4), &ipu, udp))
			// VLAN-tagged (the kernel usually strips tags; when it does
			// not, the frame is not matched).
			tcp.SetNetworkLayerForChecksum(ip)
			out = append(out, ser(eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 5, Type: layers.EthernetTypeIPv4}, ip, tcp))
		}
	}
	for _, a := range []struct{ src, dst string }{{"::1", "::1"}, {"2001:db8::1", "2001:db8::2"}, {"2001:db8::2", "2001:db8::1"}, {"2001:db8::1:0:0:1", "fe80::1"}} {
		for _, ports := range [][2]int{{8001, 40000}, {40000, 8001}, {443, 1}, {1, 443}, {5, 6}} {
			ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: net.ParseIP(a.src), DstIP: net.ParseIP(a.dst)}
			tcp := &layers.TCP{SrcPort: layers.TCPPort(ports[0]), DstPort: layers.TCPPort(ports[1]), Seq: 1, ACK: true, Window: 100}
			tcp.SetNetworkLayerForChecksum(ip)
			out = append(out, ser(eth(layers.EthernetTypeIPv6), ip, tcp, gopacket.Payload("hi")))
			ipu := *ip
			ipu.NextHeader = layers.IPProtocolUDP
			udp := &layers.UDP{SrcPort: layers.UDPPort(ports[0]), DstPort: layers.UDPPort(ports[1])}
			udp.SetNetworkLayerForChecksum(&ipu)
			out = append(out, ser(eth(layers.EthernetTypeIPv6), &ipu, udp))
		}
	}
	// Every prefix of a few frames: truncated packets.
	n := len(out)
	for _, b := range []int{0, 6, n - 10, n - 1} {
		for i := range len(out[b]) {
			out = append(out, out[b][:i])
		}
	}
	return out
}

// corpusFrames reads the Ethernet frames of the repository's corpus copies.
func corpusFrames(t testing.TB) [][]byte {
	t.Helper()
	paths, _ := filepath.Glob("../../testdata/corpus/*/capture.pcap")
	if len(paths) == 0 {
		t.Skip("no corpus captures in ../../testdata/corpus")
	}
	var out [][]byte
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapfile.NewReader(f, pcapfile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			pk, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if pk.LinkType == pcapfile.LinkEthernet {
				out = append(out, append([]byte(nil), pk.Data...))
			}
		}
		r.Close()
		f.Close()
	}
	return out
}

// TestFilterProgram runs each generated program in x/net/bpf's VM over the
// corpus and synthetic frames and compares with the reference.
func TestFilterProgram(t *testing.T) {
	frames := append(corpusFrames(t), synthetic(t)...)
	for _, f := range testFilters {
		t.Run(f.String(), func(t *testing.T) {
			run := runVM(t, f)
			kept := 0
			for i, b := range frames {
				got, want := run(b), match(f, b)
				if got != want {
					t.Fatalf("frame %d (%d bytes): program says %v, reference %v\n% x", i, len(b), got, want, b[:min(len(b), 80)])
				}
				if got {
					kept++
				}
			}
			if kept == 0 {
				t.Errorf("no frame passes %v", f)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	many := make([]netip.Addr, MaxHosts+1)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
	}
	for _, f := range []Filter{{Port: -1}, {Port: 65536}, {Hosts: many}, {Hosts: []netip.Addr{{}}}} {
		if _, err := f.Program(DefaultSnapLen); err == nil {
			t.Errorf("Program(%+v): no error", f)
		}
	}
	// The most hosts, all IPv6: the jumps must still fit.
	v6 := make([]netip.Addr, MaxHosts)
	for i := range v6 {
		v6[i] = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(i)})
	}
	prog, err := Filter{Port: 1, Hosts: v6, SkipOutgoing: true}.Program(DefaultSnapLen)
	if err != nil {
		t.Fatalf("Program(%d IPv6 hosts): %v", MaxHosts, err)
	}
	if _, err := bpf.Assemble(prog); err != nil {
		t.Errorf("Assemble: %v", err)
	}
	if prog[0] != (bpf.LoadExtension{Num: bpf.ExtType}) {
		t.Errorf("SkipOutgoing program starts with %v; want the packet type load", prog[0])
	}
}

func TestFilterString(t *testing.T) {
	f := Filter{Port: 8001, Hosts: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}}
	if got, want := f.String(), "tcp and port 8001 and (host 127.0.0.1 or host ::1)"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

// FuzzFilter: on any frame, the program and the reference agree.
func FuzzFilter(f *testing.F) {
	for _, b := range synthetic(f)[:40] {
		f.Add(b, uint16(8001), uint8(0))
	}
	f.Add([]byte{}, uint16(0), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, port uint16, hostSel uint8) {
		hosts := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")}
		var fl Filter
		fl.Port = int(port)
		for i, h := range hosts {
			if hostSel&(1<<i) != 0 {
				fl.Hosts = append(fl.Hosts, h)
			}
		}
		if got, want := runVM(t, fl)(b), match(fl, b); got != want {
			t.Fatalf("%v on % x: program %v, reference %v", fl, b, got, want)
		}
	})
}
