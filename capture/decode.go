package capture

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wtrace/wtrace/capture/pcapfile"
)

// errNotTCP marks packets that are not TCP over IPv4/IPv6; they are counted
// and skipped.
var errNotTCP = errors.New("not TCP")

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
)

// IP protocol numbers (https://www.iana.org/assignments/protocol-numbers).
const (
	protoHopByHop    = 0
	protoTCP         = 6
	protoIPv6Routing = 43
	protoIPv6Frag    = 44
	protoIPv6Opts    = 60
)

// decoder turns link-layer frames into TCP segments. It parses the IPv4,
// IPv6 and TCP headers itself, accepting and refusing what gopacket's
// layers do (FuzzDecodeParity holds it to them) without their cost: no
// allocation, and none of the 27 ms their package init adds to every
// command. What it returns is valid until the next call.
type decoder struct {
	tcp tcpHeader
}

// tcpHeader is what the reassembly needs of a TCP header.
type tcpHeader struct {
	SrcPort, DstPort   uint16
	Seq                uint32
	DataOffset         uint8 // header length in 32-bit words
	FIN, SYN, RST, ACK bool
	Payload            []byte // aliases the packet's data
}

// segment is one decoded TCP segment.
type segment struct {
	src, dst endpointKey
	tcp      *tcpHeader
	// cut counts the payload bytes the capture did not keep (the snap
	// length cut the packet): they follow Payload on the wire.
	cut int
}

// decode parses one packet.
func (d *decoder) decode(link pcapfile.LinkType, data []byte) (segment, error) {
	var sg segment
	et, off, err := linkPayload(link, data)
	if err != nil {
		return sg, err
	}
	data = data[off:]
	var tcpData []byte
	wire := 0 // the IP packet's length on the wire, 0 if unknown
	tcpOff := 0
	switch et {
	case etherTypeIPv4:
		h, err := parseIPv4(data)
		if err != nil {
			return sg, fmt.Errorf("ipv4: %w", err)
		}
		if h.protocol != protoTCP {
			return sg, errNotTCP
		}
		if h.fragment {
			return sg, errFragment
		}
		wire, tcpOff = h.length, h.headerLen
		sg.src.ip = ip16(data[12:16])
		sg.dst.ip = ip16(data[16:20])
		tcpData = h.payload
	case etherTypeIPv6:
		h, err := parseIPv6(data)
		if err != nil {
			return sg, fmt.Errorf("ipv6: %w", err)
		}
		next, payload, err := skipIPv6Extensions(h.next, h.payload)
		if err != nil {
			return sg, err
		}
		if next != protoTCP {
			return sg, errNotTCP
		}
		if !h.jumbo {
			wire, tcpOff = h.length+40, 40+len(h.payload)-len(payload)
		}
		copy(sg.src.ip[:], data[8:24])
		copy(sg.dst.ip[:], data[24:40])
		tcpData = payload
	default:
		return sg, errNotTCP
	}
	if err := d.tcp.parse(tcpData); err != nil {
		return sg, fmt.Errorf("tcp: %w", err)
	}
	sg.tcp = &d.tcp
	sg.src.port, sg.dst.port = d.tcp.SrcPort, d.tcp.DstPort
	if wire > 0 {
		// Bytes of payload on the wire beyond those captured.
		if n := wire - tcpOff - int(d.tcp.DataOffset)*4 - len(d.tcp.Payload); n > 0 && n < 1<<17 {
			sg.cut = n
		}
	}
	return sg, nil
}

// ipv4Header is what decode needs of an IPv4 header (RFC 791 §3.1).
type ipv4Header struct {
	protocol  uint8
	fragment  bool // more fragments follow, or a fragment offset
	length    int  // total length: header and payload, on the wire
	headerLen int
	payload   []byte // what the capture kept of the payload
}

// parseIPv4 parses an IPv4 header. A total length of 0 (TCP segmentation
// offload: the capturing host's stack had not set it) means the packet's
// captured length. A packet the capture cut keeps what it has.
func parseIPv4(data []byte) (ipv4Header, error) {
	var h ipv4Header
	if len(data) < 20 {
		return h, fmt.Errorf("header of %d bytes, less than 20", len(data))
	}
	ihl := int(data[0] & 0x0f)
	length := int(binary.BigEndian.Uint16(data[2:4]))
	if length == 0 {
		length = int(uint16(len(data)))
	}
	switch {
	case length < 20:
		return h, fmt.Errorf("total length %d, less than 20", length)
	case ihl < 5:
		return h, fmt.Errorf("header length %d words, less than 5", ihl)
	case ihl*4 > length:
		return h, fmt.Errorf("header length %d bytes, more than the total length %d", ihl*4, length)
	}
	if len(data) > length {
		data = data[:length]
	} else if ihl*4 > len(data) {
		return h, fmt.Errorf("header of %d bytes, only %d captured", ihl*4, len(data))
	}
	if err := checkIPv4Options(data[20 : ihl*4]); err != nil {
		return h, err
	}
	flagsFrag := binary.BigEndian.Uint16(data[6:8])
	h.protocol = data[9]
	h.fragment = flagsFrag&0x2000 != 0 || flagsFrag&0x1fff != 0
	h.length, h.headerLen = length, ihl*4
	h.payload = data[ihl*4:]
	return h, nil
}

// checkIPv4Options checks the option list of an IPv4 header (RFC 791 §3.1):
// each option is one byte (0 ends the list, 1 is padding) or a type, a
// length of 3 or more, and data.
func checkIPv4Options(opts []byte) error {
	for len(opts) > 0 {
		switch opts[0] {
		case 0:
			return nil
		case 1:
			opts = opts[1:]
		default:
			if len(opts) < 2 {
				return errors.New("option cut after its type")
			}
			n := int(opts[1])
			if n > len(opts) {
				return fmt.Errorf("option %d of %d bytes, more than the %d left in the header", opts[0], n, len(opts))
			}
			if n <= 2 {
				return fmt.Errorf("option %d of length %d, less than 3", opts[0], n)
			}
			opts = opts[n:]
		}
	}
	return nil
}

// ipv6Header is what decode needs of an IPv6 header (RFC 8200 §3).
type ipv6Header struct {
	next    uint8 // the next header after the fixed header
	length  int   // payload length, from the header (0 for a jumbogram)
	jumbo   bool  // a jumbogram (RFC 2675): its length is not in this header
	payload []byte
}

// parseIPv6 parses the fixed IPv6 header; payload is what follows it, up
// to the payload length (or the jumbo payload length of a hop-by-hop
// option, RFC 2675), as far as the capture kept it.
func parseIPv6(data []byte) (ipv6Header, error) {
	var h ipv6Header
	if len(data) < 40 {
		return h, fmt.Errorf("header of %d bytes, less than 40", len(data))
	}
	h.next = data[6]
	h.length = int(binary.BigEndian.Uint16(data[4:6]))
	payload := data[40:]
	end := h.length
	if h.length == 0 {
		if h.next != protoHopByHop {
			return h, fmt.Errorf("payload length 0 without a hop-by-hop header (next header %d)", h.next)
		}
		n, ok, err := jumboLength(payload)
		if err != nil {
			return h, err
		}
		if !ok {
			return h, errors.New("payload length 0, but the hop-by-hop header has no jumbo payload option")
		}
		h.jumbo, end = true, n
	} else if h.next == protoHopByHop {
		if _, ok, err := jumboLength(payload); err != nil {
			return h, err
		} else if ok {
			return h, errors.New("a jumbo payload option with a payload length that is not 0")
		}
	}
	h.payload = payload[:min(end, len(payload))]
	return h, nil
}

// jumboLength looks for the jumbo payload option (type 0xC2, RFC 2675) in
// the hop-by-hop options header at the start of p, and checks the header's
// options (RFC 8200 §4.2).
func jumboLength(p []byte) (n int, ok bool, err error) {
	if len(p) < 2 {
		return 0, false, errors.New("hop-by-hop header cut")
	}
	l := (int(p[1]) + 1) * 8
	if l > len(p) {
		return 0, false, fmt.Errorf("hop-by-hop header of %d bytes, only %d captured", l, len(p))
	}
	opts := p[2:l]
	for len(opts) > 0 {
		if opts[0] == 0 { // Pad1
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || 2+int(opts[1]) > len(opts) {
			return 0, false, errors.New("hop-by-hop option cut")
		}
		data := opts[2 : 2+int(opts[1])]
		if opts[0] == 0xc2 && !ok {
			if len(data) != 4 {
				return 0, false, fmt.Errorf("jumbo payload option of %d bytes, not 4", len(data))
			}
			v := binary.BigEndian.Uint32(data)
			if v <= 0xffff {
				return 0, false, fmt.Errorf("jumbo payload length %d, not more than 65535", v)
			}
			n, ok = int(v), true
		}
		opts = opts[2+len(data):]
	}
	return n, ok, nil
}

// parse parses a TCP header (RFC 9293 §3.1) and checks its options.
func (t *tcpHeader) parse(data []byte) error {
	if len(data) < 20 {
		return fmt.Errorf("header of %d bytes, less than 20", len(data))
	}
	t.SrcPort = binary.BigEndian.Uint16(data[0:2])
	t.DstPort = binary.BigEndian.Uint16(data[2:4])
	t.Seq = binary.BigEndian.Uint32(data[4:8])
	t.DataOffset = data[12] >> 4
	flags := data[13]
	t.FIN, t.SYN, t.RST, t.ACK = flags&0x01 != 0, flags&0x02 != 0, flags&0x04 != 0, flags&0x10 != 0
	t.Payload = nil
	if t.DataOffset < 5 {
		return fmt.Errorf("data offset %d words, less than 5", t.DataOffset)
	}
	start := int(t.DataOffset) * 4
	if start > len(data) {
		return fmt.Errorf("data offset %d bytes, only %d captured", start, len(data))
	}
	for opts := data[20:start]; len(opts) > 0; {
		switch opts[0] {
		case 0: // end of the option list
			opts = nil
		case 1: // no-operation
			opts = opts[1:]
		default:
			if len(opts) < 2 {
				return errors.New("option cut after its kind")
			}
			n := int(opts[1])
			if n < 2 {
				return fmt.Errorf("option %d of length %d, less than 2", opts[0], n)
			}
			if n > len(opts) {
				return fmt.Errorf("option %d of %d bytes, more than the %d left in the header", opts[0], n, len(opts))
			}
			opts = opts[n:]
		}
	}
	t.Payload = data[start:]
	return nil
}

// ip16 returns an IPv4 address in its IPv4-mapped IPv6 form.
func ip16(ip []byte) [16]byte {
	var a [16]byte
	a[10], a[11] = 0xff, 0xff
	copy(a[12:], ip)
	return a
}

var errFragment = errors.New("IP fragment")

// skipIPv6Extensions walks IPv6 extension headers (RFC 8200 §4) to the
// upper-layer protocol.
func skipIPv6Extensions(next uint8, p []byte) (uint8, []byte, error) {
	for range 16 {
		switch next {
		case protoHopByHop, protoIPv6Routing, protoIPv6Opts:
			if len(p) < 8 {
				return 0, nil, errors.New("ipv6: truncated extension header")
			}
			l := (int(p[1]) + 1) * 8
			if l > len(p) {
				return 0, nil, errors.New("ipv6: truncated extension header")
			}
			next, p = p[0], p[l:]
		case protoIPv6Frag:
			return 0, nil, errFragment
		default:
			return next, p, nil
		}
	}
	return 0, nil, errors.New("ipv6: too many extension headers")
}

// linkPayload returns the EtherType of the network-layer packet and its
// offset in data.
func linkPayload(link pcapfile.LinkType, data []byte) (uint16, int, error) {
	switch link {
	case pcapfile.LinkEthernet:
		if len(data) < 14 {
			return 0, 0, errors.New("ethernet: short frame")
		}
		et, off := binary.BigEndian.Uint16(data[12:14]), 14
		for et == etherTypeVLAN || et == etherTypeQinQ {
			if len(data) < off+4 {
				return 0, 0, errors.New("ethernet: short VLAN tag")
			}
			et = binary.BigEndian.Uint16(data[off+2 : off+4])
			off += 4
		}
		return et, off, nil
	case pcapfile.LinkLinuxSLL:
		// https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL.html
		if len(data) < 16 {
			return 0, 0, errors.New("linux sll: short header")
		}
		return binary.BigEndian.Uint16(data[14:16]), 16, nil
	case pcapfile.LinkSLL2:
		// https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL2.html
		if len(data) < 20 {
			return 0, 0, errors.New("linux sll2: short header")
		}
		return binary.BigEndian.Uint16(data[0:2]), 20, nil
	case pcapfile.LinkNull, pcapfile.LinkLoop:
		if len(data) < 4 {
			return 0, 0, errors.New("loopback: short header")
		}
		// The address family is in host byte order (NULL) or network byte
		// order (LOOP); values are small, so look at both ends.
		af := binary.LittleEndian.Uint32(data[0:4])
		if af > 0xffff {
			af = binary.BigEndian.Uint32(data[0:4])
		}
		switch af {
		case 2:
			return etherTypeIPv4, 4, nil
		case 10, 24, 28, 30: // AF_INET6 on Linux, NetBSD/OpenBSD, FreeBSD, macOS
			return etherTypeIPv6, 4, nil
		}
		return 0, 0, errNotTCP
	case pcapfile.LinkRaw, 12, 14, pcapfile.LinkIPv4, pcapfile.LinkIPv6:
		if len(data) < 1 {
			return 0, 0, errors.New("raw ip: empty packet")
		}
		switch data[0] >> 4 {
		case 4:
			return etherTypeIPv4, 0, nil
		case 6:
			return etherTypeIPv6, 0, nil
		}
		return 0, 0, errNotTCP
	}
	return 0, 0, fmt.Errorf("unsupported link type %d", link)
}
