package capture

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

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

// decoder turns link-layer frames into TCP segments (gopacket's layers
// decode IP and TCP). It reuses its layers: what it returns is valid until
// the next call.
type decoder struct {
	ip4 layers.IPv4
	ip6 layers.IPv6
	tcp layers.TCP
}

// segment is one decoded TCP segment.
type segment struct {
	src, dst endpointKey
	tcp      *layers.TCP // Payload aliases the packet's data
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
		if err := d.ip4.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return sg, fmt.Errorf("ipv4: %w", err)
		}
		if d.ip4.Protocol != layers.IPProtocolTCP {
			return sg, errNotTCP
		}
		if d.ip4.Flags&layers.IPv4MoreFragments != 0 || d.ip4.FragOffset != 0 {
			return sg, errFragment
		}
		wire, tcpOff = int(d.ip4.Length), int(d.ip4.IHL)*4
		sg.src.ip = ip16(d.ip4.SrcIP)
		sg.dst.ip = ip16(d.ip4.DstIP)
		tcpData = d.ip4.Payload
	case etherTypeIPv6:
		if err := d.ip6.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return sg, fmt.Errorf("ipv6: %w", err)
		}
		next, payload, err := skipIPv6Extensions(d.ip6.NextHeader, d.ip6.Payload)
		if err != nil {
			return sg, err
		}
		if next != layers.IPProtocolTCP {
			return sg, errNotTCP
		}
		if d.ip6.Length != 0 { // 0: a jumbogram (RFC 2675), length unknown here
			wire, tcpOff = int(d.ip6.Length)+40, 40+len(d.ip6.Payload)-len(payload)
		}
		copy(sg.src.ip[:], d.ip6.SrcIP.To16())
		copy(sg.dst.ip[:], d.ip6.DstIP.To16())
		tcpData = payload
	default:
		return sg, errNotTCP
	}
	if err := d.tcp.DecodeFromBytes(tcpData, gopacket.NilDecodeFeedback); err != nil {
		return sg, fmt.Errorf("tcp: %w", err)
	}
	sg.tcp = &d.tcp
	sg.src.port, sg.dst.port = uint16(d.tcp.SrcPort), uint16(d.tcp.DstPort)
	if wire > 0 {
		// Bytes of payload on the wire beyond those captured.
		if n := wire - tcpOff - int(d.tcp.DataOffset)*4 - len(d.tcp.Payload); n > 0 && n < 1<<17 {
			sg.cut = n
		}
	}
	return sg, nil
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
func skipIPv6Extensions(next layers.IPProtocol, p []byte) (layers.IPProtocol, []byte, error) {
	for range 16 {
		switch next {
		case layers.IPProtocolIPv6HopByHop, layers.IPProtocolIPv6Routing, layers.IPProtocolIPv6Destination:
			if len(p) < 8 {
				return 0, nil, errors.New("ipv6: truncated extension header")
			}
			l := (int(p[1]) + 1) * 8
			if l > len(p) {
				return 0, nil, errors.New("ipv6: truncated extension header")
			}
			next, p = layers.IPProtocol(p[0]), p[l:]
		case layers.IPProtocolIPv6Fragment:
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
