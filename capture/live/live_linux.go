//go:build linux

package live

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
)

// ARPHRD_ values (linux/if_arp.h) of the interfaces a Handle captures on:
// both carry Ethernet framing (loopback with all-zero addresses).
const (
	arphrdEther    = 1
	arphrdLoopback = 772
)

// Handle is a live capture on one network interface, through a Linux
// AF_PACKET socket with the Filter's BPF program attached (the kernel drops
// what does not match before copying it). Packets carry the kernel's
// receive timestamps. Not safe for concurrent use, except Close.
type Handle struct {
	fd       int
	iface    string
	filter   Filter
	loopback bool
	buf      []byte
	oob      []byte
	poll     time.Duration
	stats    Stats
}

// Open starts capturing on the named interface. Without CAP_NET_RAW it
// returns an error wrapping ErrPermission.
func Open(iface string, opts Options) (*Handle, error) {
	opts.defaults()
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("%w: %q%s", ErrNoInterface, iface, interfaceList())
	}
	loopback := ifi.Flags&net.FlagLoopback != 0
	if t, err := os.ReadFile("/sys/class/net/" + iface + "/type"); err == nil {
		n, _ := strconv.Atoi(strings.TrimSpace(string(t)))
		if n != arphrdEther && n != arphrdLoopback {
			return nil, fmt.Errorf("%w: %s has link type %d (ARPHRD)", ErrLinkType, iface, n)
		}
		loopback = loopback || n == arphrdLoopback
	}
	f := opts.Filter
	f.SkipOutgoing = loopback
	prog, err := f.Program(uint32(opts.SnapLen))
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("live: bpf: %w", err)
	}
	// Protocol 0: the socket receives nothing until bind, so no packet
	// slips in before the filter is attached.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w (opening a packet socket on %s: %v)", ErrPermission, iface, err)
		}
		return nil, fmt.Errorf("live: opening a packet socket: %w", err)
	}
	h := &Handle{fd: fd, iface: iface, filter: opts.Filter, loopback: loopback, poll: opts.PollInterval,
		buf: make([]byte, opts.SnapLen), oob: make([]byte, 256)}
	fail := func(what string, err error) (*Handle, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("live: %s on %s: %w", what, iface, err)
	}
	ins := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		ins[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}); err != nil {
		return fail("attaching the BPF filter", err)
	}
	// A large receive buffer rides out bursts; FORCE needs CAP_NET_ADMIN,
	// else the plain option (capped by net.core.rmem_max) is used.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, opts.BufferSize); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, opts.BufferSize)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return fail("enabling PACKET_AUXDATA", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("enabling SO_TIMESTAMPNS", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fail("binding the packet socket", err)
	}
	return h, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// interfaceList names the interfaces there are, for error messages.
func interfaceList() string {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		return ""
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return " (interfaces: " + strings.Join(names, ", ") + ")"
}

// Interface returns the name of the interface captured on.
func (h *Handle) Interface() string { return h.iface }

// Filter returns the filter the Handle was opened with.
func (h *Handle) Filter() Filter { return h.filter }

// LinkType returns the link type of the packets (Ethernet).
func (h *Handle) LinkType() pcapfile.LinkType { return pcapfile.LinkEthernet }

// SnapLen returns the most bytes kept of one packet.
func (h *Handle) SnapLen() int { return len(h.buf) }

// Next returns the next packet that passed the filter. Its Data is the
// Handle's buffer, valid until the next call. When no packet arrives
// within the poll interval it returns ErrTimeout, so the caller can look
// at its clock and its context.
func (h *Handle) Next() (capture.Packet, error) {
	if h.fd < 0 {
		return capture.Packet{}, ErrClosed
	}
	for {
		pfd := []unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(h.poll/time.Millisecond))
		if err == unix.EINTR || err == nil && n == 0 {
			return capture.Packet{}, ErrTimeout
		}
		if err != nil {
			return capture.Packet{}, fmt.Errorf("live: poll on %s: %w", h.iface, err)
		}
		// MSG_TRUNC: n is the packet's length even when the buffer cut it.
		n, oobn, _, from, err := unix.Recvmsg(h.fd, h.buf, h.oob, unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return capture.Packet{}, fmt.Errorf("live: reading from %s: %w", h.iface, err)
		}
		if sa, ok := from.(*unix.SockaddrLinklayer); ok && h.loopback && sa.Pkttype == unix.PACKET_OUTGOING {
			continue // seen again as incoming
		}
		p := capture.Packet{LinkType: uint16(pcapfile.LinkEthernet), Length: n}
		caplen := min(n, len(h.buf))
		h.control(h.oob[:oobn], &p)
		if p.Time == 0 {
			p.Time = time.Now().UnixNano()
		}
		p.Data = h.buf[:caplen]
		h.stats.Packets++
		return p, nil
	}
}

// control reads the timestamp and original length from the control
// messages of a received packet (socket(7) SO_TIMESTAMPNS, packet(7)
// PACKET_AUXDATA), without allocating.
func (h *Handle) control(oob []byte, p *capture.Packet) {
	hdrLen := unix.CmsgSpace(0)
	for len(oob) >= hdrLen {
		hdr := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(hdr.Len)
		if l < unix.CmsgLen(0) || l > len(oob) {
			return
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SO_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			p.Time = int64(ts.Sec)*1e9 + int64(ts.Nsec)
		case hdr.Level == unix.SOL_PACKET && hdr.Type == unix.PACKET_AUXDATA && len(data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})):
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&data[0]))
			if int(aux.Len) >= p.Length {
				p.Length = int(aux.Len)
			}
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next > len(oob) {
			return
		}
		oob = oob[next:]
	}
}

// Stats returns what the kernel counted for this socket so far: packets
// that passed the filter, and those it dropped because wtrace did not
// read them fast enough.
func (h *Handle) Stats() (Stats, error) {
	if h.fd < 0 {
		return h.stats, ErrClosed
	}
	// PACKET_STATISTICS resets the counters on each read.
	st, err := unix.GetsockoptTpacketStats(h.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return h.stats, fmt.Errorf("live: statistics of %s: %w", h.iface, err)
	}
	h.stats.Received += int64(st.Packets)
	h.stats.Dropped += int64(st.Drops)
	return h.stats, nil
}

// Close stops the capture. A second call does nothing.
func (h *Handle) Close() error {
	if h.fd < 0 {
		return nil
	}
	err := unix.Close(h.fd)
	h.fd = -1
	return err
}
