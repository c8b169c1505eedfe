package capture

// HTTP/1.1 connections: both directions' state machines, requests paired
// with responses, bodies framed (the head parser is http1_head.go, damage
// http1_resync.go).

import (
	"fmt"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
)

type h1State uint8

const (
	h1Head        h1State = iota // reading a message head
	h1Length                     // body with Content-Length
	h1Chunked                    // chunked body
	h1Close                      // body until the connection closes
	h1Resync                     // looking for the next message head
	h1ChunkResync                // chunked body that lost its framing; looking for a chunk-size line
	h1Midstream                  // response direction captured from its middle
	h1Raw                        // protocol switched (101, CONNECT): bytes are counted, not parsed
)

// h1Conn parses both directions of an HTTP/1.1 connection and pairs
// requests with responses (keep-alive, pipelining: responses come in request
// order, RFC 9112 §9.3.2).
type h1Conn struct {
	s     *session
	id    uint64
	d     [2]h1Dir
	queue []queued  // requests waiting for their response
	sw    *h1Switch // the protocol switch (101, CONNECT), if any
}

// h1Switch counts the bytes after a protocol switch, which are not
// parsed.
type h1Switch struct {
	raw  int64
	note string // what the switch was
}

// answerNoter is a protoHandler that takes a note about how its newest
// request is answered (TeeConn.Note).
type answerNoter interface{ noteAnswer(msg string) }

// noteAnswer adds msg to the End note of the response in progress, or of
// the newest request waiting for its response.
func (c *h1Conn) noteAnswer(msg string) {
	x := c.d[formats.ServerToClient].x
	if n := len(c.queue); x == nil && n > 0 {
		x = c.queue[n-1].exchange()
	}
	if x != nil && !x.ended {
		a := x.more()
		a.answer = joinNote(a.answer, msg)
	}
}

// popQueue takes the oldest request waiting for its response.
func (c *h1Conn) popQueue() *exchange {
	x := c.queue[0].exchange()
	c.queue[0] = queued{} // the array outlives the slot: let x go when it ends
	c.queue = c.queue[1:]
	if len(c.queue) == 0 {
		c.queue = nil // nor keep the array of a connection that waits (a watch)
	}
	return x
}

// endQueue ends every request still waiting for its response. A parked
// one is resumed only for its end, and let go: the queue may hold
// hundreds of thousands.
func (c *h1Conn) endQueue(st formats.EndStatus, t int64, note string) {
	for i := range c.queue {
		x := c.queue[i].exchange()
		c.queue[i] = queued{}
		x.end(st, t, nil, note)
	}
	c.queue = nil
}

// queued is a request waiting for its response: the exchange, or, behind
// another one (pipelining), its parked form.
type queued struct {
	x *exchange
	p parkedExchange
}

func (q *queued) exchange() *exchange {
	if q.x == nil {
		q.x = q.p.resume()
	}
	return q.x
}

// bufMark says that the bytes of a resync buffer before end arrived by
// capture time t: bytes parsed again once the resync finds its point keep
// the time they arrived.
type bufMark struct {
	end int
	t   int64
}

// h1Dir is one direction's parser state.
type h1Dir struct {
	c      *h1Conn
	x      *exchange
	remain int64
	ch     *chunked.Decoder
	a      *h1Aux // allocated at the first resync, trailer field or head cut by a packet's end
	off    int64  // stream offset of the next byte
	dir    formats.Direction
	st     h1State
	// lostHead: a gap took the start of the oldest waiting request's
	// response (h1Midstream finds what follows).
	lostHead bool
	fin      bool
}

// h1Aux is the state a direction needs only while it resynchronizes,
// reads a trailer section or a head cut across packets: kept apart, since
// an open watch's connection may live for hours and its size counts.
type h1Aux struct {
	head    []byte // a head cut across packets: its bytes so far
	scan    int    // how far head was scanned for its end
	trailer []formats.Header
	buf     []byte    // resync buffer
	bufAt   []bufMark // when the bytes of buf arrived
	skipped int64     // bytes skipped by the current resync
}

// aux returns d's auxiliary state, allocating it at the first need.
func (d *h1Dir) aux() *h1Aux {
	if d.a == nil {
		d.a = new(h1Aux)
	}
	return d.a
}

// headLen returns the bytes of a head cut across packets held so far.
func (d *h1Dir) headLen() int {
	if d.a == nil {
		return 0
	}
	return len(d.a.head)
}

// clearHead forgets the bytes of a cut head, keeping the buffer unless it
// grew large (it may hold the rest of a packet too).
func (d *h1Dir) clearHead() {
	if d.a == nil {
		return
	}
	if cap(d.a.head) > maxKeptHead {
		d.a.head = nil
	} else {
		d.a.head = d.a.head[:0]
	}
	d.a.scan = 0
}

// trailer returns the trailer fields read so far (nil if none).
func (d *h1Dir) trailer() []formats.Header {
	if d.a == nil {
		return nil
	}
	return d.a.trailer
}

// clearTrailer forgets the trailer fields.
func (d *h1Dir) clearTrailer() {
	if d.a != nil {
		d.a.trailer = nil
	}
}

// clearBuf empties the resync buffer, keeping its storage.
func (d *h1Dir) clearBuf() {
	if d.a != nil {
		d.a.buf, d.a.bufAt = d.a.buf[:0], d.a.bufAt[:0]
	}
}

// resyncPending returns the bytes skipped and buffered by the resync in
// progress.
func (d *h1Dir) resyncPending() int64 {
	if d.a == nil {
		return 0
	}
	return d.a.skipped + int64(len(d.a.buf))
}

func newH1Conn(s *session, id uint64, midstream [2]bool) *h1Conn {
	c := &h1Conn{s: s, id: id}
	for i := range c.d {
		c.d[i] = h1Dir{c: c, dir: formats.Direction(i)}
	}
	if midstream[formats.ClientToServer] {
		c.d[formats.ClientToServer].st = h1Resync
	}
	if midstream[formats.ServerToClient] {
		c.d[formats.ServerToClient].st = h1Midstream
	}
	return c
}

func (c *h1Conn) data(dir formats.Direction, p []byte, t int64) {
	c.d[dir].feed(p, t)
}

// feed parses p, all of it.
func (d *h1Dir) feed(p []byte, t int64) {
	for len(p) > 0 && d.c.s.err == nil {
		n := d.step(p, t)
		d.off += int64(n)
		p = p[n:]
	}
}

// step consumes a prefix of p according to the state and returns its length.
func (d *h1Dir) step(p []byte, t int64) int {
	switch d.st {
	case h1Head:
		return d.readHead(p, t)
	case h1Length:
		n := int(min(int64(len(p)), d.remain))
		d.bodyData(p[:n], t)
		d.remain -= int64(n)
		if d.remain == 0 {
			d.bodyEnd(formats.EndComplete, t, "")
		}
		return n
	case h1Chunked:
		return d.readChunked(p, t)
	case h1Close:
		d.bodyData(p, t)
		return len(p)
	case h1Resync, h1Midstream, h1ChunkResync:
		return d.resync(p, t)
	case h1Raw:
		d.c.sw.raw += int64(len(p))
		return len(p)
	}
	return len(p)
}

func (d *h1Dir) readHead(p []byte, t int64) int {
	if d.headLen() == 0 {
		// Empty lines before a message are ignored (RFC 9112 §2.2).
		i := 0
		for i < len(p) && (p[i] == '\r' || p[i] == '\n') {
			i++
		}
		if i > 0 {
			return i
		}
		// Most heads arrive whole: parsed where they are, not copied, so
		// that an open connection keeps no copy of its last head (nor of
		// the packet that carried it).
		if end := headEnd(p, 0); end >= 0 && end <= MaxHeadSize {
			m, err := parseHead(p[:end], d.dir == formats.ClientToServer)
			if err != nil {
				d.malformedAt(t, err, int64(end))
				return end
			}
			d.message(m, t)
			return end
		}
	}
	a := d.aux()
	old := len(a.head)
	a.head = append(a.head, p...)
	end := headEnd(a.head, a.scan-3) // the empty line may begin in earlier bytes
	if end < 0 {
		if len(a.head) > MaxHeadSize {
			d.malformed(t, errHeadTooLarge)
			return len(p)
		}
		a.scan = len(a.head)
		return len(p)
	}
	if end > MaxHeadSize {
		d.malformed(t, errHeadTooLarge)
		return len(p)
	}
	m, err := parseHead(a.head[:end], d.dir == formats.ClientToServer)
	if err != nil {
		d.malformed(t, err)
	}
	// The buffer is kept for the next head cut by a packet's end, unless
	// it grew large (it holds the rest of the packet too).
	d.clearHead()
	if err == nil {
		d.message(m, t)
	}
	return end - old
}

// maxKeptHead bounds the buffer of a head cut across packets that a
// direction keeps for the next one.
const maxKeptHead = 1 << 10

// message handles a parsed message head.
func (d *h1Dir) message(m *h1Msg, t int64) {
	if m.request {
		d.request(m, t)
	} else {
		d.response(m, t)
	}
}

// malformed records the unparsable bytes of the head buffer and starts
// looking for the next message.
func (d *h1Dir) malformed(t int64, err error) {
	d.malformedAt(t, err, int64(d.headLen()))
	d.clearHead()
}

// malformedAt records n unparsable bytes at the direction's offset and
// starts looking for the next message.
func (d *h1Dir) malformedAt(t int64, err error, n int64) {
	d.c.s.anomaly(d.c.id, formats.NoExchange, d.dir, t, formats.AnomalyMalformed, d.off, n,
		fmt.Sprintf("http/1.1 %s: %v; looking for the next message", d.dir, err))
	d.st = h1Resync
}

func (d *h1Dir) request(m *h1Msg, t int64) {
	c := d.c
	x := c.s.newExchange(c.id, formats.Request{Time: t, Method: m.method, Target: m.target, Proto: m.proto, Header: m.header})
	if n := len(c.queue); n > 0 && c.queue[n-1].x != nil && c.queue[n-1].x.reqEnded {
		// Pipelining: the request before waits behind others; park it.
		c.queue[n-1] = queued{p: c.queue[n-1].x.park()}
	}
	c.queue = append(c.queue, queued{x: x})
	d.x = x
	if m.teCoding != "" {
		x.transferCoding(formats.ClientToServer, m.teCoding)
	}
	switch {
	case m.hasTE && m.chunked:
		d.startChunked()
	case m.hasTE:
		// A request with a non-chunked transfer coding cannot be framed
		// (RFC 9112 §6.3 point 4).
		d.st = h1Close
	case m.length > 0:
		d.st, d.remain = h1Length, m.length
	case m.badLength:
		c.s.anomaly(c.id, x.id, d.dir, t, formats.AnomalyMalformed, d.off, 0, "invalid Content-Length in request")
		d.bodyEnd(formats.EndError, t, "invalid Content-Length")
		d.st = h1Resync
	default:
		d.bodyEnd(formats.EndComplete, t, "")
	}
	if m.method == "CONNECT" {
		// The request's response decides; until then nothing more is parsed.
		d.st = h1Raw
		c.sw = &h1Switch{note: "CONNECT tunnel"}
	}
}

func (d *h1Dir) response(m *h1Msg, t int64) {
	c := d.c
	if m.status >= 100 && m.status < 200 && m.status != 101 {
		// An interim response (RFC 9110 §15.2): the final one follows.
		return
	}
	var x *exchange
	if len(c.queue) > 0 {
		x = c.popQueue()
	} else {
		x = c.s.newExchange(c.id, formats.Request{Time: t, Missing: true})
	}
	d.x = x
	if m.teCoding != "" {
		x.transferCoding(formats.ServerToClient, m.teCoding)
	}
	r := formats.Response{Time: t, Proto: m.proto, Status: m.status, Reason: m.reason, Header: m.header}
	noBody := x.method == "HEAD" || m.status == 204 || m.status == 304 || m.status < 200
	switch {
	case m.status == 101 || x.method == "CONNECT" && m.status/100 == 2:
		r.Framing = formats.FramingNone
		x.response(r)
		x.end(formats.EndComplete, t, nil, "")
		d.x = nil
		what := "protocol switched"
		if m.upgrade != "" {
			what = "protocol switched to " + m.upgrade
		}
		if x.method == "CONNECT" {
			what = "CONNECT tunnel"
		}
		c.sw = &h1Switch{note: what}
		c.d[0].st, c.d[1].st = h1Raw, h1Raw
		return
	case noBody:
		r.Framing = formats.FramingNone
		x.response(r)
		d.bodyEnd(formats.EndComplete, t, "")
	case m.hasTE && m.chunked:
		r.Framing = formats.FramingChunked
		x.response(r)
		d.startChunked()
	case m.hasTE:
		r.Framing = formats.FramingClose
		x.response(r)
		d.st = h1Close
	case m.badLength:
		c.s.anomaly(c.id, x.id, d.dir, t, formats.AnomalyMalformed, d.off, 0, "invalid Content-Length in response; reading until the connection closes")
		r.Framing = formats.FramingClose
		x.response(r)
		d.st = h1Close
	case m.length >= 0:
		r.Framing = formats.FramingLength
		x.response(r)
		if m.length == 0 {
			d.bodyEnd(formats.EndComplete, t, "")
		} else {
			d.st, d.remain = h1Length, m.length
		}
	default:
		r.Framing = formats.FramingClose
		x.response(r)
		d.st = h1Close
	}
}

func (d *h1Dir) startChunked() {
	d.st = h1Chunked
	d.ch = chunked.NewDecoder()
	d.clearTrailer()
}

func (d *h1Dir) readChunked(p []byte, t int64) int {
	n, tok, err := d.ch.Next(p, t)
	switch tok.Kind {
	case chunked.Data:
		d.bodyData(tok.Data, t)
	case chunked.ChunkEnd:
		if d.dir == formats.ServerToClient && d.x != nil {
			d.x.chunk(tok.Chunk)
		}
	case chunked.Trailer:
		if a := d.aux(); len(a.trailer) < maxHeaderFields {
			a.trailer = append(a.trailer, redact.Header(tok.Name, tok.Value))
		}
	case chunked.Done:
		if d.dir == formats.ServerToClient && d.x != nil {
			d.x.setLastExt(tok.Chunk.Ext)
		}
		d.bodyEnd(formats.EndComplete, t, "")
	}
	if err != nil {
		d.c.s.anomaly(d.c.id, d.exchangeID(), d.dir, t, formats.AnomalyMalformed, d.off+int64(n), 0,
			fmt.Sprintf("chunked body: %v; looking for the next chunk", err))
		d.st = h1ChunkResync
		d.clearBuf()
		d.ch = nil
		if n == 0 {
			n = 1 // make progress: the resync looks at what follows
		}
	}
	return n
}

func (d *h1Dir) exchangeID() int64 {
	if d.x != nil {
		return d.x.id
	}
	return formats.NoExchange
}

func (d *h1Dir) bodyData(p []byte, t int64) {
	if d.x == nil || len(p) == 0 {
		return
	}
	if d.dir == formats.ClientToServer {
		d.x.requestBody(p, t)
	} else {
		d.x.body(p, t)
	}
}

// bodyEnd ends the current message of this direction and returns to
// reading heads.
func (d *h1Dir) bodyEnd(st formats.EndStatus, t int64, note string) {
	if d.x != nil {
		if d.dir == formats.ClientToServer {
			d.x.requestEnd(st, t, note)
		} else {
			d.x.end(st, t, d.trailer(), note)
		}
	}
	d.x = nil
	d.ch = nil
	d.clearTrailer()
	d.st = h1Head
}

// fin handles the end of one direction (FIN).
func (c *h1Conn) fin(dir formats.Direction, t int64) {
	d := &c.d[dir]
	if d.fin {
		return
	}
	d.fin = true
	switch d.st {
	case h1Close:
		d.bodyEnd(formats.EndComplete, t, "")
	case h1Length, h1Chunked, h1ChunkResync:
		d.bodyEnd(formats.EndClosed, t, "connection closed before the body was complete")
	case h1Head:
		if n := d.headLen(); n > 0 {
			c.s.anomaly(c.id, formats.NoExchange, dir, t, formats.AnomalyTruncated, d.off-int64(n), int64(n),
				fmt.Sprintf("connection closed inside a message head (%d bytes)", n))
			d.clearHead()
		}
	}
	if dir == formats.ServerToClient {
		c.endQueue(formats.EndClosed, t, "connection closed before the response")
	}
}

// finish ends everything still open: st is EndReset (RST) or EndTruncated
// (the capture ended).
func (c *h1Conn) finish(st formats.EndStatus, t int64) {
	note := "capture ended"
	if st == formats.EndReset {
		note = "connection reset"
	}
	for i := range c.d {
		d := &c.d[i]
		switch d.st {
		case h1Length, h1Chunked, h1Close, h1ChunkResync:
			d.bodyEnd(st, t, note)
		case h1Head:
			if n := d.headLen(); n > 0 {
				c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyTruncated, d.off-int64(n), int64(n),
					fmt.Sprintf("%s inside a message head (%d bytes)", note, n))
				d.clearHead()
			}
		case h1Resync, h1Midstream:
			if n := d.resyncPending(); n > 0 {
				c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyResync, d.off-n, n,
					fmt.Sprintf("%d bytes could not be parsed as HTTP/1.1 (no message or chunk start found)", n))
			}
		}
	}
	c.endQueue(st, t, note)
	if c.sw != nil && c.sw.raw > 0 {
		c.s.anomaly(c.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyUnknown, 0, c.sw.raw,
			fmt.Sprintf("%s: %d bytes after it are not recorded", c.sw.note, c.sw.raw))
	}
}
