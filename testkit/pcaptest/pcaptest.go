// Package pcaptest builds packet captures of TCP conversations for tests:
// handshakes, data cut into segments, FIN and RST, and the damage real
// captures show — segments out of order, retransmitted, overlapping,
// missing, or cut by the snap length.
//
// A Builder is not safe for concurrent use.
package pcaptest

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Start is the capture time of the first packet of every Builder.
var Start = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Packet is one TCP segment.
type Packet struct {
	Time     time.Time
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	SYN, ACK bool
	FIN, RST bool
	Payload  []byte
	// Snap, if > 0, cuts the captured bytes to this length (the snap
	// length), as tcpdump -s does.
	Snap int
}

// Builder accumulates packets.
type Builder struct {
	Packets []Packet
	now     time.Time
	// Step is how far the clock moves after each packet. Zero means 1µs.
	Step time.Duration
	// Emit, if set, receives each packet as it is added instead of
	// Packets (workloads too large to hold; see workload.go).
	Emit func(Packet)
}

// New returns an empty Builder whose clock is at Start.
func New() *Builder { return &Builder{now: Start} }

// Now returns the Builder's clock.
func (b *Builder) Now() time.Time { return b.now }

// SetNow sets the clock.
func (b *Builder) SetNow(t time.Time) { b.now = t }

// Advance moves the clock.
func (b *Builder) Advance(d time.Duration) { b.now = b.now.Add(d) }

func (b *Builder) add(p Packet) {
	p.Time = b.now
	if b.Emit != nil {
		b.Emit(p)
	} else {
		b.Packets = append(b.Packets, p)
	}
	step := b.Step
	if step == 0 {
		step = time.Microsecond
	}
	b.now = b.now.Add(step)
}

// Direction of a segment within a Conn.
const (
	ToServer = 0
	ToClient = 1
)

// Conn is one TCP connection being built.
type Conn struct {
	b    *Builder
	addr [2]netip.AddrPort // sender of each direction
	seq  [2]uint32
	// MSS bounds segment payloads. Zero means 65483 (loopback with GSO).
	MSS int
}

// Conn starts a connection from client to server ("127.0.0.1:40000"). With
// handshake, it writes SYN, SYN-ACK, ACK; without, the capture begins with
// the connection already open.
func (b *Builder) Conn(client, server string, handshake bool) *Conn {
	c := &Conn{b: b, seq: [2]uint32{1000, 5000}}
	c.addr[ToServer] = netip.MustParseAddrPort(client)
	c.addr[ToClient] = netip.MustParseAddrPort(server)
	if handshake {
		b.add(Packet{Src: c.addr[0], Dst: c.addr[1], Seq: c.seq[0] - 1, SYN: true})
		b.add(Packet{Src: c.addr[1], Dst: c.addr[0], Seq: c.seq[1] - 1, Ack: c.seq[0], SYN: true, ACK: true})
		b.add(Packet{Src: c.addr[0], Dst: c.addr[1], Seq: c.seq[0], Ack: c.seq[1], ACK: true})
	}
	return c
}

// Segments cuts data into segments of dir without adding them: the caller
// may reorder, drop or duplicate them before Add.
func (c *Conn) Segments(dir int, data []byte) []Packet {
	mss := c.MSS
	if mss <= 0 {
		mss = 65483
	}
	var out []Packet
	for len(data) > 0 {
		n := min(len(data), mss)
		out = append(out, Packet{Src: c.addr[dir], Dst: c.addr[1-dir], Seq: c.seq[dir], Ack: c.seq[1-dir], ACK: true, Payload: bytes.Clone(data[:n])})
		c.seq[dir] += uint32(n)
		data = data[n:]
	}
	return out
}

// Add appends packets (from Segments) at the Builder's clock.
func (c *Conn) Add(ps ...Packet) {
	for _, p := range ps {
		c.b.add(p)
	}
}

// Send writes data in dir as segments, in order.
func (c *Conn) Send(dir int, data []byte) { c.Add(c.Segments(dir, data)...) }

// Ack writes a bare ACK in dir.
func (c *Conn) Ack(dir int) {
	c.b.add(Packet{Src: c.addr[dir], Dst: c.addr[1-dir], Seq: c.seq[dir], Ack: c.seq[1-dir], ACK: true})
}

// FIN ends dir.
func (c *Conn) FIN(dir int) {
	c.b.add(Packet{Src: c.addr[dir], Dst: c.addr[1-dir], Seq: c.seq[dir], Ack: c.seq[1-dir], ACK: true, FIN: true})
	c.seq[dir]++
}

// RST resets the connection from dir.
func (c *Conn) RST(dir int) {
	c.b.add(Packet{Src: c.addr[dir], Dst: c.addr[1-dir], Seq: c.seq[dir], RST: true})
}

// Pcap encodes the packets as a classic pcap (nanosecond timestamps,
// Ethernet, IPv4 or IPv6 by address).
func (b *Builder) Pcap() []byte {
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		panic(err)
	}
	for _, p := range b.Packets {
		frame := Encode(p)
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(frame), Length: len(frame)}
		if p.Snap > 0 && p.Snap < len(frame) {
			frame = frame[:p.Snap]
			ci.CaptureLength = p.Snap
		}
		if err := w.WritePacket(ci, frame); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// Encode returns the Ethernet frame of a packet.
func Encode(p Packet) []byte {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6)}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(p.Src.Port()), DstPort: layers.TCPPort(p.Dst.Port()),
		Seq: p.Seq, Ack: p.Ack, SYN: p.SYN, ACK: p.ACK, FIN: p.FIN, RST: p.RST, PSH: len(p.Payload) > 0, Window: 65535}
	var ip gopacket.SerializableLayer
	if p.Src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: p.Src.Addr().AsSlice(), DstIP: p.Dst.Addr().AsSlice(), Flags: layers.IPv4DontFragment}
		tcp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: p.Src.Addr().AsSlice(), DstIP: p.Dst.Addr().AsSlice()}
		tcp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, tcp, gopacket.Payload(p.Payload)); err != nil {
		panic(err)
	}
	return bytes.Clone(buf.Bytes())
}
