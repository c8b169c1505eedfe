package export

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"net/netip"

	"golang.org/x/net/http2"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
)

// PcapOptions configure Pcap. The zero value is ready to use.
type PcapOptions struct {
	// MaxSegment bounds the payload of one TCP segment. 0 means
	// DefaultMaxSegment.
	MaxSegment int
}

// DefaultMaxSegment is the TCP payload of a full segment on Linux
// loopback (MTU 65536 less the IPv4 and TCP headers and timestamps), the
// interface most recordings of a local apiserver are made on.
const DefaultMaxSegment = 65483

// maxSegment is the largest TCP payload an IPv4 packet can carry.
const maxSegment = 65535 - 20 - 40

// Pcap writes the session f as a classic pcap file (Ethernet, nanosecond
// times) of synthesized packets: for each connection, IPv4 or IPv6 and TCP
// between its recorded addresses, a handshake at its recorded start (none
// for a connection captured from its middle), the bytes each side sent at
// the times the session recorded them, with sequence and acknowledgment
// numbers that follow, an ACK from the other side after each run of bytes,
// and FIN or RST as the connection ended (nothing for one still open at
// the end of the capture). Packets are in time order. Wireshark and tshark
// reassemble the HTTP of every exchange from it, and `wtrace record
// --pcap` reads the session back.
//
// The bytes are what the session holds, in their recorded framing:
//   - HTTP/1.1: request and response heads as recorded (a redacted header
//     is sent with an empty value: the session does not hold it); bodies
//     with their Content-Length, or chunked with each chunk's recorded
//     size and extension (lower-case hex, as Go servers write it), or
//     until the connection closed. A Content-Length that a body stored
//     re-encoded after redaction no longer has says the stored length.
//   - HTTP/2 (over TLS or not) is exported as h2c, HTTP/2 over plain TCP
//     with the client preface: each exchange's HEADERS (HPACK without the
//     dynamic table, so each block decodes alone), a DATA frame per
//     recorded DATA frame, END_STREAM or RST_STREAM as its stream ended.
//     The connection's SETTINGS and WINDOW_UPDATEs are not recorded; the
//     export sends its own, allowing the largest frames and windows.
//   - TLS is exported decrypted (the session holds plaintext); a
//     connection the recorder could not decrypt has no bytes, only its
//     handshake and end.
//   - Bytes the capture lost are not invented: the sequence numbers skip
//     over them, as in a capture with lost packets.
//   - A watch body the session keeps decoded from a Content-Encoding
//     (gzip) is encoded again, a chunk per event (Result.Notes).
//
// Secrets stay as the session holds them: an export never adds what the
// session does not hold.
//
// Memory: the index, and for each exchange in progress its place in the
// file and the bytes of one chunk at most (normally one event). Damage is
// skipped and listed in the Result.
func Pcap(w io.Writer, f *formats.File, opts PcapOptions) (Result, error) {
	seg := opts.MaxSegment
	if seg <= 0 {
		seg = DefaultMaxSegment
	}
	seg = min(seg, maxSegment)
	bw := bufio.NewWriterSize(w, 256<<10)
	pw, err := pcapfile.NewWriter(bw, pcapfile.LinkEthernet, pcapfile.MaxPacketSize)
	if err != nil {
		return Result{}, err
	}
	p := &pcapExport{f: f, pw: pw, seg: seg}
	err = p.run()
	p.dmg.AddFound(f)
	p.res.Damage = append(p.dmg.Errors(), p.res.Damage...) // the regions, then a read's error
	if err != nil {
		return p.res, err
	}
	return p.res, bw.Flush()
}

type pcapExport struct {
	f   *formats.File
	pw  *pcapfile.Writer
	seg int
	res Result

	events  eventHeap
	order   int64
	now     int64
	buf     []byte // a packet
	runBuf  []byte // a run of pieces sent together
	err     error
	dmg     formats.Damages
	readErr bool // a read's error (not damage) is in res.Damage
}

// Scheduled work, in time order.
const (
	evOpen  = iota // a connection opens
	evStart        // an exchange begins
	evPiece        // an exchange's next piece of bytes
	evClose        // a connection closes
)

type event struct {
	t     int64
	order int64
	kind  int
	c     *pconn
	x     *pexchange
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].order < h[j].order
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func (p *pcapExport) schedule(t int64, kind int, c *pconn, x *pexchange) {
	p.order++
	heap.Push(&p.events, &event{t: t, order: p.order, kind: kind, c: c, x: x})
}

// pconn is a connection being exported.
type pconn struct {
	info    *formats.ConnInfo
	h2      bool
	ends    [2]endpoint // client, server
	seq     [2]uint32   // next sequence number per direction
	ipID    [2]uint16
	exs     []*formats.ExchangeInfo
	started int  // exchanges started
	queued  bool // the next exchange's start is scheduled
	active  int  // exchanges started and not finished
	opened  bool
	closing bool // close scheduled
	closed  bool
}

type endpoint struct {
	mac  [6]byte
	ip   netip.Addr
	port uint16
}

// pexchange is an exchange being exported: its pieces, pulled one at a
// time.
type pexchange struct {
	c    *pconn
	next func() (piece, bool)
	stop func()
	cur  piece
	held bool // cur was pulled and not sent yet
	done bool // the pieces are all pulled
}

func (p *pcapExport) run() error {
	idx := p.f.Index()
	linked := 0
	for i := range idx.Conns {
		ci := &idx.Conns[i]
		c := &pconn{info: ci}
		for _, id := range ci.Exchanges {
			if x := p.f.Exchange(id); x != nil {
				c.exs = append(c.exs, x)
			}
		}
		linked += len(c.exs)
		c.h2 = isH2(ci, c.exs)
		if err := p.addresses(c); err != nil {
			return err
		}
		t := ci.Conn.Time
		if t == 0 && len(c.exs) > 0 {
			t = startTime(c.exs[0])
		}
		if t == 0 && ci.End != nil {
			t = ci.End.Time
		}
		p.schedule(t, evOpen, c, nil)
	}
	if n := len(idx.Exchanges) - linked; n > 0 {
		p.note(fmt.Sprintf("%d exchanges belong to no connection the session names; they are not exported", n))
	}
	for p.events.Len() > 0 && p.err == nil {
		e := heap.Pop(&p.events).(*event)
		p.now = max(p.now, e.t)
		switch e.kind {
		case evOpen:
			p.open(e.c)
		case evStart:
			p.start(e.c)
		case evPiece:
			p.piece(e.x)
		case evClose:
			p.close(e.c)
		}
	}
	// Exchanges still pulled when an error stopped the export.
	for _, e := range p.events {
		if e.x != nil {
			e.x.stop()
		}
	}
	return p.err
}

func (p *pcapExport) note(s string) { p.res.Notes = append(p.res.Notes, s) }

func (p *pcapExport) damage(err error) {
	if de, ok := err.(*formats.DamageError); ok {
		p.dmg.Add(de)
		return
	}
	if !p.readErr {
		p.readErr = true
		p.res.Damage = append(p.res.Damage, err)
	}
}
func startTime(x *formats.ExchangeInfo) int64 {
	if !x.Request.Missing && x.Request.Time != 0 {
		return x.Request.Time
	}
	return x.First
}

// isH2 reports whether a connection speaks HTTP/2.
func isH2(ci *formats.ConnInfo, exs []*formats.ExchangeInfo) bool {
	switch ci.Conn.Proto {
	case "h2", "h2c":
		return true
	}
	if ci.TLS != nil && ci.TLS.Decrypted && ci.TLS.ALPN == "h2" {
		return true
	}
	for _, x := range exs {
		if x.Request.Stream != 0 {
			return true
		}
	}
	return false
}

// addresses sets the connection's endpoints from its recorded addresses,
// or from documentation addresses (RFC 5737) when they are not IP
// addresses.
func (p *pcapExport) addresses(c *pconn) error {
	cl, err1 := netip.ParseAddrPort(c.info.Conn.Client)
	sv, err2 := netip.ParseAddrPort(c.info.Conn.Server)
	if err1 != nil || err2 != nil {
		id := c.info.Conn.ID
		cl = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1}), uint16(1024+id%60000))
		sv = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 2}), 80)
		p.note(fmt.Sprintf("connection %d: addresses %q and %q are not IP addresses; exported as %v and %v", id, c.info.Conn.Client, c.info.Conn.Server, cl, sv))
	}
	ca, sa := cl.Addr().Unmap(), sv.Addr().Unmap()
	if ca.Is4() != sa.Is4() { // one of each: both as IPv6
		ca, sa = netip.AddrFrom16(ca.As16()), netip.AddrFrom16(sa.As16())
	}
	c.ends[0] = endpoint{mac: [6]byte{0x02, 0, 0, 0, 0, 1}, ip: ca, port: cl.Port()}
	c.ends[1] = endpoint{mac: [6]byte{0x02, 0, 0, 0, 0, 2}, ip: sa, port: sv.Port()}
	// Initial sequence numbers: fixed, distinct per connection.
	c.seq[0] = uint32(0x10000000 + c.info.Conn.ID*0x1000)
	c.seq[1] = uint32(0x70000000 + c.info.Conn.ID*0x1000)
	return nil
}

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

func (p *pcapExport) open(c *pconn) {
	if c.opened {
		return
	}
	c.opened = true
	if !c.info.Conn.Midstream {
		p.packet(c, 0, tcpSYN, nil, true)
		c.seq[0]++
		p.packet(c, 1, tcpSYN|tcpACK, nil, true)
		c.seq[1]++
		p.packet(c, 0, tcpACK, nil, false)
	}
	if c.h2 {
		p.h2Preface(c)
	}
	p.next(c)
}

// next starts the connection's next exchange when it may (HTTP/2: any
// time; HTTP/1.1: after the one before it), or closes the connection
// after its last.
func (p *pcapExport) next(c *pconn) {
	if c.started < len(c.exs) {
		if (c.h2 || c.active == 0) && !c.queued {
			c.queued = true
			p.schedule(max(startTime(c.exs[c.started]), p.now), evStart, c, nil)
		}
		return
	}
	if c.active == 0 && !c.closing {
		c.closing = true
		t := p.now
		if e := c.info.End; e != nil {
			t = max(t, e.Time)
		}
		p.schedule(t, evClose, c, nil)
	}
}

func (p *pcapExport) start(c *pconn) {
	x := c.exs[c.started]
	c.queued = false
	c.started++
	c.active++
	seq := exchangeWire(p.f, x, wireOptions{h2: c.h2, notes: p.note, damage: p.damage})
	next, stop := iter.Pull(seq)
	px := &pexchange{c: c, next: next, stop: stop}
	if c.h2 {
		p.next(c) // the next stream may start while this one runs
	}
	p.advance(px)
}

// advance pulls the exchange's next piece and schedules it, or finishes
// the exchange.
func (p *pcapExport) advance(x *pexchange) {
	pc, ok := x.cur, x.held
	x.held = false
	if !ok && !x.done {
		pc, ok = x.next()
	}
	if !ok {
		x.stop()
		x.c.active--
		p.next(x.c)
		return
	}
	x.cur = pc
	p.schedule(max(pc.t, p.now), evPiece, x.c, x)
}

// piece sends the exchange's current piece, with the pieces that follow
// it from the same side at the same time (a chunk's size line, bytes and
// CRLF go out in one segment, as a server writes them), then schedules
// the next.
func (p *pcapExport) piece(x *pexchange) {
	c, pc := x.c, x.cur
	d := 0
	if pc.dir == formats.ServerToClient {
		d = 1
	}
	c.seq[d] += uint32(pc.lost)
	b := append(p.runBuf[:0], pc.data...)
	for {
		next, ok := x.next()
		if !ok {
			x.done = true
			break
		}
		if next.dir != pc.dir || next.lost != 0 || next.t > p.now || len(b)+len(next.data) > p.seg {
			x.cur, x.held = next, true
			break
		}
		b = append(b, next.data...)
	}
	p.runBuf = b
	for len(b) > 0 {
		n := min(len(b), p.seg)
		flags := tcpACK
		if n == len(b) {
			flags |= tcpPSH
		}
		p.packet(c, d, flags, b[:n], false)
		c.seq[d] += uint32(n)
		b = b[n:]
	}
	if len(p.runBuf) > 0 {
		p.packet(c, 1-d, tcpACK, nil, false)
	}
	p.advance(x)
}

func (p *pcapExport) close(c *pconn) {
	if c.closed {
		return
	}
	c.closed = true
	e := c.info.End
	if e == nil {
		return // the file ended with the connection open
	}
	switch e.Reason {
	case formats.ConnFIN, formats.ConnClosed:
		p.packet(c, 0, tcpFIN|tcpACK, nil, false)
		c.seq[0]++
		p.packet(c, 1, tcpFIN|tcpACK, nil, false)
		c.seq[1]++
		p.packet(c, 0, tcpACK, nil, false)
	case formats.ConnRST:
		p.packet(c, 0, tcpRST|tcpACK, nil, false)
	}
	// capture-end, idle: still open when the capture stopped looking.
}

// h2Preface sends what opens an HTTP/2 connection (RFC 9113 §3.4): the
// client preface and SETTINGS, the server's SETTINGS, both acknowledged,
// with the largest frame size and flow-control windows, so that every
// recorded frame fits.
func (p *pcapExport) h2Preface(c *pconn) {
	settings := func(extra ...http2.Setting) []byte {
		var b []byte
		for _, s := range append([]http2.Setting{
			{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1},
			{ID: http2.SettingMaxFrameSize, Val: h2MaxFrame},
		}, extra...) {
			b = binary.BigEndian.AppendUint16(b, uint16(s.ID))
			b = binary.BigEndian.AppendUint32(b, s.Val)
		}
		return h2Frame(nil, http2.FrameSettings, 0, 0, b)
	}
	window := h2Frame(nil, http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, 1<<31-1-65535))
	ack := h2Frame(nil, http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
	cli := append([]byte(http2.ClientPreface), settings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})...)
	cli = append(cli, window...)
	srv := append(settings(), window...)
	srv = append(srv, ack...)
	p.piece0(c, 0, cli)
	p.piece0(c, 1, srv)
	p.piece0(c, 0, ack)
}

// piece0 sends bytes outside any exchange.
func (p *pcapExport) piece0(c *pconn, d int, b []byte) {
	p.packet(c, d, tcpACK|tcpPSH, b, false)
	c.seq[d] += uint32(len(b))
}

// packet writes one TCP segment from side d (0 client, 1 server) at the
// current time.
func (p *pcapExport) packet(c *pconn, d, flags int, payload []byte, syn bool) {
	if p.err != nil {
		return
	}
	src, dst := &c.ends[d], &c.ends[1-d]
	var opts []byte
	if syn {
		// MSS 65495 and window scale 7, as Linux loopback.
		opts = []byte{2, 4, 0xff, 0xd7, 1, 3, 3, 7}
	}
	tcpLen := 20 + len(opts)
	ipLen := 20
	if !src.ip.Is4() {
		ipLen = 40
	}
	total := 14 + ipLen + tcpLen + len(payload)
	b := p.buf[:0]
	b = append(b, dst.mac[:]...)
	b = append(b, src.mac[:]...)
	// IP
	ipStart := len(b) + 2
	if src.ip.Is4() {
		b = append(b, 0x08, 0x00)
		c.ipID[d]++
		b = append(b, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(ipLen+tcpLen+len(payload)))
		b = binary.BigEndian.AppendUint16(b, c.ipID[d])
		b = append(b, 0x40, 0, 64, 6, 0, 0) // DF, TTL 64, TCP, checksum
		s4, d4 := src.ip.As4(), dst.ip.As4()
		b = append(append(b, s4[:]...), d4[:]...)
		binary.BigEndian.PutUint16(b[ipStart+10:], ^fold(sumWords(0, b[ipStart:ipStart+20])))
	} else {
		b = append(b, 0x86, 0xdd)
		b = append(b, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(tcpLen+len(payload)))
		b = append(b, 6, 64)
		s16, d16 := src.ip.As16(), dst.ip.As16()
		b = append(append(b, s16[:]...), d16[:]...)
	}
	// TCP
	tcpStart := len(b)
	b = binary.BigEndian.AppendUint16(b, src.port)
	b = binary.BigEndian.AppendUint16(b, dst.port)
	b = binary.BigEndian.AppendUint32(b, c.seq[d])
	var ack uint32
	if flags&tcpACK != 0 {
		ack = c.seq[1-d]
	}
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, byte(tcpLen/4)<<4, byte(flags))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // window
	b = append(b, 0, 0, 0, 0)                    // checksum, urgent pointer
	b = append(b, opts...)
	b = append(b, payload...)
	// TCP checksum over the pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1).
	var s uint32
	if src.ip.Is4() {
		s = sumWords(s, b[ipStart+12:ipStart+20])
	} else {
		s = sumWords(s, b[ipStart+8:ipStart+40])
	}
	s += 6 + uint32(tcpLen+len(payload))
	s = sumWords(s, b[tcpStart:])
	binary.BigEndian.PutUint16(b[tcpStart+16:], ^fold(s))
	p.buf = b
	if err := p.pw.WritePacket(pcapfile.Packet{Data: b[:total], Time: p.now, Length: total}); err != nil {
		p.err = err
	}
}

// sumWords adds b as big-endian 16-bit words to the one's-complement sum
// s (RFC 1071); fold folds the sum to 16 bits.
func sumWords(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
		if s > 0xffff0000 {
			s = s&0xffff + s>>16
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
