package live

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/bpf"
)

// MaxHosts bounds Filter.Hosts: each host adds up to 16 instructions,
// and classic BPF jumps reach at most 255 instructions ahead.
const MaxHosts = 8

// Ethernet frame offsets (IEEE 802.3; IPv4 RFC 791 §3.1; IPv6 RFC 8200 §3;
// TCP RFC 9293 §3.1).
const (
	offEtherType = 12
	ethLen       = 14

	offIP4Proto = ethLen + 9
	offIP4Frag  = ethLen + 6 // flags and fragment offset
	offIP4Src   = ethLen + 12
	offIP4Dst   = ethLen + 16

	offIP6Next = ethLen + 6
	offIP6Src  = ethLen + 8
	offIP6Dst  = ethLen + 24
	offIP6TCP  = ethLen + 40

	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	protoTCP  = 6

	// packetOutgoing is PACKET_OUTGOING (linux/if_packet.h): on loopback
	// every packet is seen twice, going out and coming in.
	packetOutgoing = 4
)

// Filter says which packets a live capture keeps: TCP over IPv4 or IPv6
// on Ethernet framing, to or from Port (0: any port) and to or from one of
// Hosts (none: any host) — tcpdump's "tcp and port P and (host A or host B)".
// IPv4 fragments after the first carry no ports: with a Port they are
// dropped (wtrace does not reassemble IP fragments). IPv6 packets whose
// first next header is not TCP (extension headers) are dropped.
type Filter struct {
	Port  int
	Hosts []netip.Addr
	// SkipOutgoing drops packets the kernel marks as outgoing; a capture on
	// a loopback interface sets it, so each packet is kept once (as
	// libpcap does).
	SkipOutgoing bool
}

func (f Filter) String() string {
	parts := []string{"tcp"}
	if f.Port != 0 {
		parts = append(parts, fmt.Sprintf("port %d", f.Port))
	}
	if len(f.Hosts) > 0 {
		var hs []string
		for _, h := range f.Hosts {
			hs = append(hs, "host "+h.String())
		}
		parts = append(parts, "("+strings.Join(hs, " or ")+")")
	}
	return strings.Join(parts, " and ")
}

// Program returns the classic BPF program of the filter for Ethernet
// frames; packets that pass are cut to snapLen bytes.
func (f Filter) Program(snapLen uint32) ([]bpf.Instruction, error) {
	if f.Port < 0 || f.Port > 65535 {
		return nil, fmt.Errorf("live: port %d out of range", f.Port)
	}
	if len(f.Hosts) > MaxHosts {
		return nil, fmt.Errorf("live: %d hosts; at most %d", len(f.Hosts), MaxHosts)
	}
	var v4, v6 []netip.Addr
	for _, h := range f.Hosts {
		switch {
		case !h.IsValid():
			return nil, errors.New("live: invalid host address")
		case h.Is4() || h.Is4In6():
			v4 = append(v4, h.Unmap())
		default:
			v6 = append(v6, h)
		}
	}
	hosts := len(f.Hosts) > 0
	a := &asm{labels: map[string]int{}}
	if f.SkipOutgoing {
		a.op(bpf.LoadExtension{Num: bpf.ExtType})
		a.jeq(packetOutgoing, "reject", "")
	}
	a.op(bpf.LoadAbsolute{Off: offEtherType, Size: 2})
	a.jeq(etherIPv4, "ip4", "")
	a.jeq(etherIPv6, "ip6", "reject")

	a.label("ip4")
	a.op(bpf.LoadAbsolute{Off: offIP4Proto, Size: 1})
	a.jeq(protoTCP, "", "reject")
	if f.Port != 0 {
		a.op(bpf.LoadAbsolute{Off: offIP4Frag, Size: 2})
		a.jset(0x1fff, "reject", "")
	}
	if hosts {
		for _, off := range []uint32{offIP4Src, offIP4Dst} {
			if len(v4) == 0 {
				break
			}
			a.op(bpf.LoadAbsolute{Off: off, Size: 4})
			for _, h := range v4 {
				b := h.As4()
				a.jeq(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]), "ip4port", "")
			}
		}
		a.jump("reject")
	}
	a.label("ip4port")
	if f.Port != 0 {
		// X = IPv4 header length (RFC 791: IHL in 32-bit words).
		a.op(bpf.LoadMemShift{Off: ethLen})
		a.op(bpf.LoadIndirect{Off: ethLen, Size: 2})
		a.jeq(uint32(f.Port), "accept", "")
		a.op(bpf.LoadIndirect{Off: ethLen + 2, Size: 2})
		a.jeq(uint32(f.Port), "accept", "reject")
	} else {
		a.jump("accept")
	}

	a.label("ip6")
	a.op(bpf.LoadAbsolute{Off: offIP6Next, Size: 1})
	a.jeq(protoTCP, "", "reject")
	if hosts {
		n := 0
		for _, off := range []uint32{offIP6Src, offIP6Dst} {
			for _, h := range v6 {
				b := h.As16()
				miss := fmt.Sprintf("ip6miss%d", n)
				n++
				for w := range 4 {
					a.op(bpf.LoadAbsolute{Off: off + uint32(4*w), Size: 4})
					v := uint32(b[4*w])<<24 | uint32(b[4*w+1])<<16 | uint32(b[4*w+2])<<8 | uint32(b[4*w+3])
					if w < 3 {
						a.jeq(v, "", miss)
					} else {
						a.jeq(v, "ip6port", miss)
					}
				}
				a.label(miss)
			}
		}
		a.jump("reject")
	}
	a.label("ip6port")
	if f.Port != 0 {
		a.op(bpf.LoadAbsolute{Off: offIP6TCP, Size: 2})
		a.jeq(uint32(f.Port), "accept", "")
		a.op(bpf.LoadAbsolute{Off: offIP6TCP + 2, Size: 2})
		a.jeq(uint32(f.Port), "accept", "reject")
	} else {
		a.jump("accept")
	}

	a.label("accept")
	a.op(bpf.RetConstant{Val: snapLen})
	a.label("reject")
	a.op(bpf.RetConstant{Val: 0})
	return a.resolve()
}

// asm assembles a program with symbolic jump targets ("" is the next
// instruction).
type asm struct {
	ins    []bpf.Instruction
	jumps  map[int][2]string // instruction → true, false targets
	labels map[string]int
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

func (a *asm) jeq(v uint32, t, f string) {
	a.branch(bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, t, f)
}

func (a *asm) jset(v uint32, t, f string) {
	a.branch(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: v}, t, f)
}

func (a *asm) jump(t string) { a.branch(bpf.Jump{}, t, "") }

func (a *asm) branch(i bpf.Instruction, t, f string) {
	if a.jumps == nil {
		a.jumps = map[int][2]string{}
	}
	a.jumps[len(a.ins)] = [2]string{t, f}
	a.ins = append(a.ins, i)
}

// resolve replaces the symbolic targets by skip counts.
func (a *asm) resolve() ([]bpf.Instruction, error) {
	skip := func(at int, label string) (uint32, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok {
			return 0, fmt.Errorf("live: bpf: undefined label %q", label)
		}
		d := to - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("live: bpf: jump from %d to %s (%d) out of range", at, label, to)
		}
		return uint32(d), nil
	}
	for at, tg := range a.jumps {
		t, err := skip(at, tg[0])
		if err != nil {
			return nil, err
		}
		f, err := skip(at, tg[1])
		if err != nil {
			return nil, err
		}
		switch i := a.ins[at].(type) {
		case bpf.JumpIf:
			i.SkipTrue, i.SkipFalse = uint8(t), uint8(f)
			a.ins[at] = i
		case bpf.Jump:
			i.Skip = t
			a.ins[at] = i
		}
	}
	return a.ins, nil
}
