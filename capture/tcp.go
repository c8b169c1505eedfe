package capture

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// TCP reassembly, driven by capture time. The packets are decoded by
// capture's own decoder (decode.go: the IPv4, IPv6 and TCP headers, as
// gopacket's layers read them, without their cost; gopacket is used by
// tests only); the streams are put together here, not with gopacket's
// reassembly, because every byte must keep the capture time of the packet
// that completed it (gopacket's reassembly keeps one time per packet, and
// none for data released after a gap), and because the table of connections must stay bounded by what is
// open: a connection that ended frees its slot at once, flows that never
// carried data make room for new ones, and nothing is visited again as
// capture time passes unless it holds out-of-order data.
//
// Per direction the reassembler keeps the next sequence number it expects
// and the segments that arrived ahead of it (held, each with its own
// arrival time). A segment at or before the expected number is trimmed of
// what was already delivered (retransmissions, overlaps) and delivered
// with its packet's time; the held segments it makes contiguous are
// delivered with that same time, since that packet completed them. Held
// data waits for the missing bytes up to Options.ReorderWindow of capture
// time after it arrived; then the missing bytes are declared lost (a gap)
// and the held data is delivered with its own arrival times. A segment the
// snap length cut is delivered as far as it was captured, and the bytes it
// lost are a gap at once.

// endpointKey is one side of a connection: an IPv6 (or IPv4-mapped)
// address and a port.
type endpointKey struct {
	ip   [16]byte
	port uint16
}

func (e endpointKey) String() string {
	a := netip.AddrFrom16(e.ip)
	return netip.AddrPortFrom(a.Unmap(), e.port).String()
}

func (e endpointKey) less(o endpointKey) bool {
	if c := compareIP(e.ip, o.ip); c != 0 {
		return c < 0
	}
	return e.port < o.port
}

func compareIP(a, b [16]byte) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// connKey names a connection whichever way a packet goes: lo < hi.
type connKey struct{ lo, hi endpointKey }

func keyOf(src, dst endpointKey) connKey {
	if src.less(dst) {
		return connKey{src, dst}
	}
	return connKey{dst, src}
}

// heldSeg is a segment that arrived ahead of the bytes before it.
type heldSeg struct {
	seq  uint32
	data []byte // owned (copied from the packet)
	cut  uint32 // bytes after data the snap length cut
	fin  bool
	t    int64 // capture time of its packet
}

func (s *heldSeg) end() uint32 { return s.seq + uint32(len(s.data)) + s.cut }

// tcpHalf is one direction of a connection.
type tcpHalf struct {
	started bool
	fin     bool   // the FIN was delivered: no more bytes
	next    uint32 // sequence number of the next byte to deliver
	// held: the segments waiting for the bytes before them; nil while
	// there are none (an open connection's halves live for hours: their
	// size counts).
	held *heldList
}

// heldList is a direction's out-of-order segments, by sequence number,
// and their data bytes.
type heldList struct {
	segs  []heldSeg
	bytes int
}

// segs returns the segments h holds (nil if none).
func (h *tcpHalf) segs() []heldSeg {
	if h.held == nil {
		return nil
	}
	return h.held.segs
}

// heldBytes returns the data bytes h holds.
func (h *tcpHalf) heldBytes() int {
	if h.held == nil {
		return 0
	}
	return h.held.bytes
}

// seqDiff is a − b in sequence space (RFC 9293 §3.4: comparisons are
// modulo 2³²).
func seqDiff(a, b uint32) int64 { return int64(int32(a - b)) }

// reassembler holds a Recorder's connection table.
type reassembler struct {
	conns map[connKey]*tcpStream
	open  int // streams in conns that are not tombstones

	// idle lists the open streams that never carried data, oldest first:
	// the first to make room for new connections.
	idle streamList
	// halfClosed lists the open streams that carried data and whose one
	// direction ended (FIN), in the order they did: the next to make room,
	// since a peer that closed rarely speaks again.
	halfClosed streamList
	// active lists the other streams that carried data, the least
	// recently active first: the last to make room (what such a stream
	// sends later starts a connection captured from its middle).
	active streamList
	// tombs remembers connections that ended, for a reorder window, so
	// that their late packets start nothing: the capture time each ended,
	// and the same in order of ending (an entry whose time no longer
	// matches the map's was superseded).
	tombs     map[connKey]int64
	tombOrder []tomb
	tombHead  int
	// closing: closeAll is ending every connection; no packet comes
	// after, so no tombstone is needed.
	closing bool
	// holding lists the streams that hold out-of-order data; deadline is
	// the earliest capture time at which one of them must give up waiting.
	holding  []*tcpStream
	deadline int64
	buffered int // held bytes over all connections

	evicted               int64 // idle flows evicted to make room
	evictedHalf           int64 // half-closed connections ended to make room
	evictedActive         int64 // connections idle the longest ended to make room
	firstEvict, lastEvict int64
}

type tomb struct {
	key connKey
	at  int64
}

// streamList is an intrusive doubly linked list of streams.
type streamList struct{ head, tail *tcpStream }

func (l *streamList) push(st *tcpStream) {
	st.prev, st.nextInList = l.tail, nil
	if l.tail != nil {
		l.tail.nextInList = st
	} else {
		l.head = st
	}
	l.tail = st
}

func (l *streamList) remove(st *tcpStream) {
	if st.prev != nil {
		st.prev.nextInList = st.nextInList
	} else if l.head == st {
		l.head = st.nextInList
	}
	if st.nextInList != nil {
		st.nextInList.prev = st.prev
	} else if l.tail == st {
		l.tail = st.prev
	}
	st.prev, st.nextInList = nil, nil
}

// segment handles one TCP segment at capture time t.
func (r *Recorder) segment(sg segment, t int64) {
	tcp := sg.tcp
	key := keyOf(sg.src, sg.dst)
	st := r.tcp.conns[key]
	if st != nil && st.done {
		r.ended(st)
		st = nil
	}
	if st == nil {
		if _, ok := r.tcp.tombs[key]; ok {
			if !tcp.SYN || tcp.ACK {
				return // a late packet of a connection that ended
			}
			delete(r.tcp.tombs, key) // the 4-tuple is used again
		}
		// A connection starts with its SYN, or — begun before the capture
		// — with data; anything else (an ACK, a FIN or RST of a connection
		// we never saw) starts nothing.
		if !tcp.SYN && len(tcp.Payload) == 0 {
			return
		}
		if st = r.newStream(key, sg, t); st == nil {
			return
		}
	}
	dir := 0
	if sg.src != st.src0 {
		dir = 1
	}
	if t > st.last {
		st.last = t
	}
	if tcp.SYN {
		st.syn = true
	}
	if len(tcp.Payload) > 0 {
		if !st.hasData {
			st.hasData = true
			r.tcp.idle.remove(st)
			if st.half[0].fin || st.half[1].fin {
				st.inHalf = true
				r.tcp.halfClosed.push(st)
			} else {
				r.tcp.active.push(st)
			}
		} else if !st.inHalf && r.tcp.active.tail != st {
			r.tcp.active.remove(st) // the most recently active goes last
			r.tcp.active.push(st)
		}
	}
	h := &st.half[dir]
	if tcp.RST {
		st.rst = true
		r.release(st, t, true)
		st.end(dir, t)
		r.ended(st)
		return
	}
	seq := tcp.Seq
	if tcp.SYN {
		seq++ // the SYN takes one sequence number; data follows it
	}
	if !h.started {
		// A direction whose SYN was not captured starts at its first
		// segment that carries data (or ends it): a bare ACK or a
		// keep-alive probe (one below the next byte) would start it early.
		if !tcp.SYN && len(tcp.Payload) == 0 && !tcp.FIN {
			return
		}
		h.started, h.next = true, seq
	}
	if h.fin || len(tcp.Payload) == 0 && !tcp.FIN && sg.cut == 0 {
		return
	}
	if seqDiff(seq, h.next) > 0 {
		r.hold(st, dir, heldSeg{seq: seq, data: tcp.Payload, cut: uint32(sg.cut), fin: tcp.FIN, t: t})
		return
	}
	st.deliver(dir, seq, tcp.Payload, uint32(sg.cut), tcp.FIN, t)
	if h.held != nil {
		st.drain(dir, t)
		r.holdChanged(st)
	}
	r.maybeEnded(st)
}

// newStream starts tracking a connection, making room if the table is
// full; it returns nil when there is none.
func (r *Recorder) newStream(key connKey, sg segment, t int64) *tcpStream {
	a := &r.tcp
	if a.open >= r.opts.MaxConns {
		if victim := a.idle.head; victim != nil {
			a.evicted++
			if a.firstEvict == 0 {
				a.firstEvict = t
			}
			a.lastEvict = t
			r.forget(victim)
		} else {
			victim := a.halfClosed.head
			a.evictedHalf++
			if victim == nil {
				victim = a.active.head
				a.evictedHalf--
				a.evictedActive++
			}
			if victim == nil {
				return nil // (MaxConns < 1)
			}
			r.release(victim, t, true)
			victim.finish(formats.ConnCaptureEnd, formats.EndTruncated, victim.last)
			r.ended(victim)
			delete(a.tombs, victim.key) // what it sends later starts anew
		}
	}
	for len(a.tombs) >= r.opts.MaxConns {
		r.dropTomb() // bound the tombstones too
	}
	r.streams++
	st := &tcpStream{r: r, first: t, last: t, src0: sg.src, seqNo: r.streams}
	if r.par == nil {
		st.c.s = r.s // with workers, each connection gets a session of its own (par.go)
	}
	st.port[0], st.port[1] = sg.src.port, sg.dst.port
	a.conns[key] = st
	st.key = key
	a.open++
	a.idle.push(st)
	return st
}

// forget removes an open stream from the table.
func (r *Recorder) forget(st *tcpStream) {
	a := &r.tcp
	a.open--
	switch {
	case !st.hasData:
		a.idle.remove(st)
	case st.inHalf:
		a.halfClosed.remove(st)
	default:
		a.active.remove(st)
	}
	delete(a.conns, st.key)
}

// ended is called once a stream has finished: it leaves the table, which
// frees its slot and its state, and a tombstone takes its place for a
// reorder window.
func (r *Recorder) ended(st *tcpStream) {
	a := &r.tcp
	if a.conns[st.key] != st {
		return
	}
	if st.holding {
		r.release(st, st.last, true)
		// What a finished stream still holds is dropped.
		for i := range st.half {
			a.buffered -= st.half[i].heldBytes()
			st.half[i].held = nil
		}
		r.holdChanged(st)
	}
	r.forget(st)
	if a.closing {
		return
	}
	a.tombs[st.key] = st.last
	a.tombOrder = append(a.tombOrder, tomb{st.key, st.last})
}

// dropTomb forgets the oldest tombstone.
func (r *Recorder) dropTomb() {
	a := &r.tcp
	tb := a.tombOrder[a.tombHead]
	a.tombOrder[a.tombHead] = tomb{}
	a.tombHead++
	if at, ok := a.tombs[tb.key]; ok && at == tb.at {
		delete(a.tombs, tb.key)
	}
	if a.tombHead > 1024 && a.tombHead*2 > len(a.tombOrder) {
		a.tombOrder = append(a.tombOrder[:0], a.tombOrder[a.tombHead:]...)
		a.tombHead = 0
	}
}

// maybeEnded finishes a stream whose both directions ended and hold
// nothing.
func (r *Recorder) maybeEnded(st *tcpStream) {
	if st.done {
		r.ended(st)
		return
	}
	if st.half[0].fin && st.half[1].fin && st.half[0].held == nil && st.half[1].held == nil {
		st.finish(formats.ConnFIN, formats.EndComplete, st.last)
		r.ended(st)
	}
}

// hold keeps a segment that arrived ahead of the bytes before it.
func (r *Recorder) hold(st *tcpStream, dir int, s heldSeg) {
	h := &st.half[dir]
	if h.held == nil {
		h.held = new(heldList)
	}
	l := h.held
	s.data = slices.Clone(s.data)
	i, _ := slices.BinarySearchFunc(l.segs, s.seq, func(e heldSeg, seq uint32) int { return int(seqDiff(e.seq, seq)) })
	l.segs = slices.Insert(l.segs, i, s)
	l.bytes += len(s.data)
	r.tcp.buffered += len(s.data)
	switch {
	case l.bytes > r.opts.MaxBufferedPerConn:
		r.releaseDir(st, dir, s.t, true)
	case r.tcp.buffered > r.opts.MaxBuffered:
		// Over the total: every connection gives up what it waits for.
		for _, o := range slices.Clone(r.tcp.holding) {
			r.release(o, s.t, true)
		}
		r.release(st, s.t, true)
	}
	r.holdChanged(st)
	r.maybeEnded(st)
}

// holdChanged keeps st's place in the holding list and the deadline.
func (r *Recorder) holdChanged(st *tcpStream) {
	a := &r.tcp
	holds := st.half[0].held != nil || st.half[1].held != nil
	if holds == st.holding {
		if holds {
			a.deadline = min(a.deadline, st.deadline(r.opts.ReorderWindow.Nanoseconds()))
		}
		return
	}
	st.holding = holds
	if holds {
		a.holding = append(a.holding, st)
		d := st.deadline(r.opts.ReorderWindow.Nanoseconds())
		if len(a.holding) == 1 || d < a.deadline {
			a.deadline = d
		}
		return
	}
	if i := slices.Index(a.holding, st); i >= 0 {
		a.holding = slices.Delete(a.holding, i, i+1)
	}
}

// deadline is when the oldest data st holds stops waiting.
func (st *tcpStream) deadline(window int64) int64 {
	d := int64(1<<63 - 1)
	for i := range st.half {
		for _, s := range st.half[i].segs() {
			d = min(d, s.t+window)
		}
	}
	return d
}

// expire gives up waiting for missing bytes whose reorder window has
// passed at capture time now, and forgets tombstones a window old.
func (r *Recorder) expire(now int64) {
	a := &r.tcp
	w := r.opts.ReorderWindow.Nanoseconds()
	for a.tombHead < len(a.tombOrder) && a.tombOrder[a.tombHead].at+w <= now {
		r.dropTomb()
	}
	if len(a.holding) == 0 || now < a.deadline {
		return
	}
	for _, st := range slices.Clone(a.holding) {
		if st.deadline(w) <= now {
			r.release(st, now, false)
			r.maybeEnded(st)
		}
	}
	a.deadline = int64(1<<63 - 1)
	for _, st := range a.holding {
		a.deadline = min(a.deadline, st.deadline(w))
	}
}

// release gives up on the missing bytes of both directions of st: those
// whose reorder window has passed at now, or all of them (force).
func (r *Recorder) release(st *tcpStream, now int64, force bool) {
	for dir := range st.half {
		r.releaseDir(st, dir, now, force)
	}
	r.holdChanged(st)
}

func (r *Recorder) releaseDir(st *tcpStream, dir int, now int64, force bool) {
	h := &st.half[dir]
	l := h.held
	if l == nil {
		return
	}
	w := r.opts.ReorderWindow.Nanoseconds()
	// oldest[i] is the earliest arrival among segs[i:]: a hole gives way
	// when the data waiting behind it has waited a whole window.
	oldest := make([]int64, len(l.segs))
	for i := len(l.segs) - 1; i >= 0; i-- {
		oldest[i] = l.segs[i].t
		if i+1 < len(l.segs) {
			oldest[i] = min(oldest[i], oldest[i+1])
		}
	}
	var t int64 // the time of the data now being delivered
	i := 0
	for ; i < len(l.segs) && !st.done && h.held == l; i++ {
		s := &l.segs[i]
		if d := seqDiff(s.seq, h.next); d > 0 {
			if !force && oldest[i]+w > now {
				break
			}
			// The bytes before s are lost; what follows them is delivered
			// with the time its own packets were captured.
			h.next = s.seq
			t = s.t
			st.gap(dir, d, t)
		}
		t = max(t, s.t)
		r.tcp.buffered -= len(s.data)
		l.bytes -= len(s.data)
		st.deliver(dir, s.seq, s.data, s.cut, s.fin, t)
	}
	l.shift(i)
	if len(l.segs) == 0 && h.held == l {
		h.held = nil
	}
}

// shift forgets the first n segments.
func (l *heldList) shift(n int) {
	clear(l.segs[:n])
	l.segs = l.segs[n:]
}

// deliver hands the part of a segment after the bytes already delivered
// to the stream, with time t, then the gap of bytes the snap length cut,
// then the FIN.
func (st *tcpStream) deliver(dir int, seq uint32, p []byte, cut uint32, fin bool, t int64) {
	h := &st.half[dir]
	finAt := seq + uint32(len(p)) + cut
	if skip := seqDiff(h.next, seq); skip < int64(len(p)) {
		p = p[max(skip, 0):]
		h.next += uint32(len(p))
		st.data(dir, p, t)
	}
	if cut > 0 && seqDiff(finAt, h.next) > 0 {
		n := seqDiff(finAt, h.next)
		h.next = finAt
		st.gap(dir, n, t)
	}
	if fin && !h.fin && seqDiff(h.next, finAt) >= 0 {
		h.fin = true
		if st.hasData && !st.inHalf && !st.done {
			st.inHalf = true
			st.r.tcp.active.remove(st)
			st.r.tcp.halfClosed.push(st)
		}
		st.end(dir, t)
	}
}

// drain delivers the held segments that the bytes just delivered made
// contiguous: the packet of time t completed them.
func (st *tcpStream) drain(dir int, t int64) {
	h := &st.half[dir]
	l := h.held
	i := 0
	for ; i < len(l.segs) && h.held == l && seqDiff(l.segs[i].seq, h.next) <= 0; i++ {
		s := &l.segs[i]
		st.r.tcp.buffered -= len(s.data)
		l.bytes -= len(s.data)
		st.deliver(dir, s.seq, s.data, s.cut, s.fin, t)
	}
	l.shift(i)
	if len(l.segs) == 0 && h.held == l {
		h.held = nil
	}
}

// closeAll ends every connection still tracked, at the end of the capture:
// missing bytes are given up, and what is open ends as cut by the capture.
func (r *Recorder) closeAll() {
	a := &r.tcp
	var open []*tcpStream
	for _, st := range a.conns {
		open = append(open, st)
	}
	// In the order they began, so that records come out the same every run.
	slices.SortFunc(open, func(x, y *tcpStream) int {
		if c := cmp.Compare(x.first, y.first); c != 0 {
			return c
		}
		return cmp.Compare(x.seqNo, y.seqNo)
	})
	a.closing = true
	for i, st := range open {
		open[i] = nil // what the stream holds goes once it has ended
		r.release(st, st.last, true)
		if !st.done {
			switch {
			case st.rst:
				st.finish(formats.ConnRST, formats.EndReset, st.last)
			case st.half[0].fin && st.half[1].fin:
				st.finish(formats.ConnFIN, formats.EndComplete, st.last)
			default:
				st.finish(formats.ConnCaptureEnd, formats.EndTruncated, st.last)
			}
		}
		r.ended(st)
	}
	if a.evicted > 0 {
		r.anomaly(0, formats.NoExchange, 0, a.firstEvict, formats.AnomalyLimit, 0, a.evicted,
			fmt.Sprintf("%d connections that never carried data (a SYN flood or a port scan?) were dropped, oldest first, between %s and %s, to stay within %d open connections",
				a.evicted, timeString(a.firstEvict), timeString(a.lastEvict), r.opts.MaxConns))
	}
	if a.evictedHalf > 0 {
		r.anomaly(0, formats.NoExchange, 0, r.now, formats.AnomalyLimit, 0, a.evictedHalf,
			fmt.Sprintf("%d half-closed connections (one side had sent its FIN) were ended as cut by the capture, oldest first, to stay within %d open connections", a.evictedHalf, r.opts.MaxConns))
	}
	if a.evictedActive > 0 {
		r.anomaly(0, formats.NoExchange, 0, r.now, formats.AnomalyLimit, 0, a.evictedActive,
			fmt.Sprintf("%d connections, idle the longest, were ended as cut by the capture to stay within %d open connections; what they sent later is recorded as connections captured from their middle (raise --max-conns)", a.evictedActive, r.opts.MaxConns))
	}
}

func timeString(t int64) string { return time.Unix(0, t).UTC().Format(time.RFC3339Nano) }
