package capture

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
)

// Limits of the HTTP/1.1 parser.
const (
	// MaxHeadSize bounds a request or response head (start line and header
	// fields), like net/http's DefaultMaxHeaderBytes.
	MaxHeadSize = 1 << 20
	// maxHeaderFields bounds the number of header fields of one message.
	maxHeaderFields = 1024
)

// h1Msg is a parsed HTTP/1.1 message head (RFC 9112 §2.1).
type h1Msg struct {
	request bool
	method  string
	target  string
	proto   string
	status  int
	reason  string
	header  []formats.Header

	chunked bool // Transfer-Encoding's final coding is chunked
	// teCoding: the transfer codings besides chunked (and identity), in
	// the order applied ("gzip"); "" if none.
	teCoding  string
	hasTE     bool
	length    int64 // Content-Length, -1 if absent
	badLength bool  // Content-Length present but invalid or conflicting
	upgrade   string
}

var (
	errHeadTooLarge = fmt.Errorf("message head larger than %d bytes", MaxHeadSize)
	errNoHeadEnd    = errors.New("no end of head yet")
)

// headEnd returns the length of the head at the start of b (through the
// empty line), or -1 if b does not hold a complete head yet. It accepts a
// bare LF as line terminator (RFC 9112 §2.2 allows recipients to).
// from is where to resume scanning.
func headEnd(b []byte, from int) int {
	for i := max(from, 0); i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		// An empty line: "\n" or "\r\n" right after the previous LF.
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
	}
	return -1
}

// parseHead parses a complete message head. Credentials are redacted here,
// so header values never leave the parser unredacted.
func parseHead(b []byte, request bool) (*h1Msg, error) {
	m := &h1Msg{request: request, length: -1}
	lines := splitLines(b)
	if len(lines) == 0 {
		return nil, errors.New("empty message head")
	}
	start := lines[0]
	if request {
		// request-line = method SP request-target SP HTTP-version (RFC 9112 §3)
		method, rest, ok1 := strings.Cut(start, " ")
		target, proto, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || !validMethod(method) || target == "" || !strings.HasPrefix(proto, "HTTP/1.") {
			return nil, fmt.Errorf("bad request line %q", clip(redact.Target(start, nil)))
		}
		m.method, m.target, m.proto = method, target, proto
	} else {
		// status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4)
		proto, rest, ok := strings.Cut(start, " ")
		if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(rest) < 3 {
			return nil, fmt.Errorf("bad status line %q", clip(start))
		}
		code, err := strconv.Atoi(rest[:3])
		if err != nil || code < 100 || code > 999 || (len(rest) > 3 && rest[3] != ' ') {
			return nil, fmt.Errorf("bad status line %q", clip(start))
		}
		m.proto, m.status = proto, code
		if len(rest) > 4 {
			m.reason = rest[4:]
		}
	}
	var lengths []string
	for _, line := range lines[1:] {
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// obs-fold (RFC 9112 §5.2): replace with SP and join.
			if len(m.header) == 0 {
				return nil, errors.New("header continuation line before any field")
			}
			h := &m.header[len(m.header)-1]
			if h.Redacted {
				h.Len += 1 + len(strings.TrimSpace(line))
			} else {
				h.Value += " " + strings.TrimSpace(line)
			}
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			// The line is not quoted: it may be a credential without its ':'.
			return nil, fmt.Errorf("bad header field (%d bytes, no ':' or a bad name) after %d fields", len(line), len(m.header))
		}
		if len(m.header) >= maxHeaderFields {
			return nil, fmt.Errorf("more than %d header fields", maxHeaderFields)
		}
		value = strings.Trim(value, " \t")
		switch strings.ToLower(name) {
		case "transfer-encoding":
			// Repeated fields are one list (RFC 9110 §5.3); the last coding
			// frames the body (RFC 9112 §6.3).
			m.hasTE = true
			for c := range strings.SplitSeq(value, ",") {
				c = strings.ToLower(strings.TrimSpace(c))
				m.chunked = c == "chunked"
				if c != "chunked" && c != "identity" && c != "" {
					m.teCoding = joinCoding(m.teCoding, c)
				}
			}
		case "content-length":
			lengths = append(lengths, value)
		case "upgrade":
			m.upgrade = value
		}
		m.header = append(m.header, redact.Header(name, value))
	}
	// Content-Length (RFC 9110 §8.6): a list of identical values is the value.
	for _, l := range lengths {
		for _, v := range strings.Split(l, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 || (m.length >= 0 && n != m.length) {
				m.badLength = true
				continue
			}
			m.length = n
		}
	}
	if m.badLength {
		m.length = -1
	}
	return m, nil
}

// joinCoding appends coding c to the list of codings a.
func joinCoding(a, c string) string {
	if a == "" {
		return c
	}
	return a + ", " + c
}

func splitLines(b []byte) []string {
	s := string(b)
	var lines []string
	for len(s) > 0 {
		line, rest, _ := strings.Cut(s, "\n")
		lines = append(lines, strings.TrimSuffix(line, "\r"))
		s = rest
	}
	return lines
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// validMethod reports whether s is an RFC 9110 token made of upper-case
// letters (every registered method is).
func validMethod(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

var knownMethods = []string{"GET ", "POST ", "PUT ", "PATCH ", "DELETE ", "HEAD ", "OPTIONS ", "CONNECT ", "TRACE "}

// looksLikeRequest reports whether b starts with a request line of a known
// method (or could, if b is still short).
func looksLikeRequest(b []byte) bool {
	for _, m := range knownMethods {
		if len(b) >= len(m) {
			if string(b[:len(m)]) == m {
				return true
			}
		}
	}
	return false
}

// looksLikeResponse reports whether b starts with an HTTP/1.x status line.
func looksLikeResponse(b []byte) bool {
	return len(b) >= 9 && string(b[:7]) == "HTTP/1." && b[8] == ' '
}

// findMessageStart returns the offset of the first line in b that starts a
// request (or response) head, or -1.
func findMessageStart(b []byte, request bool) int {
	for i := 0; i < len(b); {
		if request && looksLikeRequest(b[i:]) || !request && looksLikeResponse(b[i:]) {
			return i
		}
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return -1
}

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
	head   []byte
	scan   int
	x      *exchange
	remain int64
	ch     *chunked.Decoder
	a      *h1Aux // allocated at the first resync or trailer field
	off    int64  // stream offset of the next byte
	dir    formats.Direction
	st     h1State
	// lostHead: a gap took the start of the oldest waiting request's
	// response (h1Midstream finds what follows).
	lostHead bool
	fin      bool
}

// h1Aux is the state a direction needs only while it resynchronizes or
// reads a trailer section: kept apart, since an open watch's connection
// may live for hours and its size counts.
type h1Aux struct {
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
	if len(d.head) == 0 {
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
	old := len(d.head)
	d.head = append(d.head, p...)
	end := headEnd(d.head, d.scan-3) // the empty line may begin in earlier bytes
	if end < 0 {
		if len(d.head) > MaxHeadSize {
			d.malformed(t, errHeadTooLarge)
			return len(p)
		}
		d.scan = len(d.head)
		return len(p)
	}
	if end > MaxHeadSize {
		d.malformed(t, errHeadTooLarge)
		return len(p)
	}
	m, err := parseHead(d.head[:end], d.dir == formats.ClientToServer)
	if err != nil {
		d.malformed(t, err)
	}
	// The buffer is kept for the next head cut by a packet's end, unless
	// it grew large (it holds the rest of the packet too).
	if cap(d.head) > maxKeptHead {
		d.head = nil
	} else {
		d.head = d.head[:0]
	}
	d.scan = 0
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
	d.malformedAt(t, err, int64(len(d.head)))
	d.head = d.head[:0]
	d.scan = 0
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

// resync buffers bytes until the next message head (or, for a chunked body
// that lost its framing and for a response captured from its middle, the
// next chunk-size line) is found. When the resume point lies in bytes
// buffered by earlier calls, those bytes are parsed first and resync
// returns 0, so the caller feeds p again in the new state.
func (d *h1Dir) resync(p []byte, t int64) int {
	a := d.aux()
	prev := len(a.buf)
	a.buf = append(a.buf, p...)
	a.bufAt = append(a.bufAt, bufMark{len(a.buf), t})
	request := d.dir == formats.ClientToServer
	at, chunk, drop := -1, false, len(a.buf)
	if d.st == h1ChunkResync || d.st == h1Midstream {
		if d.ch == nil {
			d.ch = chunked.NewDecoder()
		}
		// The decoder remembers the bytes before what it was last given,
		// so the buffer only keeps what may still begin a size line.
		skip, ok := d.ch.Resync(a.buf)
		if ok {
			at, chunk = skip, true
		} else {
			drop = skip
		}
	}
	// A message head before the chunk-size line wins: the chunked body
	// ended in the lost bytes.
	if i := findMessageStart(a.buf, request); i >= 0 && (at < 0 || i < at) {
		at, chunk = i, false
	}
	if at < 0 {
		if d.st == h1Resync {
			// Only the last (partial) line may still begin a head.
			drop = max(0, len(a.buf)-chunked.MaxLineLength)
			if i := bytes.LastIndexByte(a.buf, '\n'); i >= 0 {
				drop = max(drop, i+1)
			}
		}
		a.skipped += int64(drop)
		a.buf = append(a.buf[:0], a.buf[drop:]...)
		marks := a.bufAt[:0]
		for _, m := range a.bufAt {
			if m.end -= drop; m.end > 0 {
				marks = append(marks, m)
			}
		}
		a.bufAt = marks
		return len(p)
	}
	total := a.skipped + int64(at)
	a.skipped = 0
	bufStart := d.off - int64(prev) // stream offset of a.buf[0]
	if chunk {
		d.resumeChunked(total, bufStart+int64(at), t)
	} else {
		d.resumeHead(total, bufStart+int64(at), t)
	}
	if at >= prev {
		a.buf, a.bufAt = a.buf[:0], a.bufAt[:0]
		return at - prev
	}
	// The resume point is in bytes buffered before p: parse them first,
	// each piece with the time it arrived.
	type piece struct {
		b []byte
		t int64
	}
	var rest []piece
	start := 0
	for _, m := range a.bufAt {
		if lo, hi := max(start, at), min(m.end, prev); lo < hi {
			rest = append(rest, piece{bytes.Clone(a.buf[lo:hi]), m.t})
		}
		start = m.end
	}
	a.buf, a.bufAt = nil, nil // the connection may stay open for long: keep no resync buffer
	save := d.off
	d.off = bufStart + int64(at)
	for _, r := range rest {
		d.feed(r.b, r.t)
	}
	d.off = save
	return 0
}

// resumeChunked switches to reading a chunked body at stream offset off,
// after skipped bytes that could not be parsed. The decoder is positioned
// by Resync.
func (d *h1Dir) resumeChunked(skipped, off int64, t int64) {
	if d.st == h1Midstream {
		// A response captured from its middle: its head is unknown (the
		// capture began after it, or lost it: then it answers the oldest
		// waiting request).
		var x *exchange
		if d.lostHead && len(d.c.queue) > 0 {
			x = d.c.popQueue()
		} else {
			x = d.c.s.newExchange(d.c.id, formats.Request{Time: t, Missing: true})
		}
		d.lostHead = false
		x.response(formats.Response{Time: t, Midstream: true, Framing: formats.FramingChunked})
		d.x = x
		if skipped > 0 {
			d.c.s.anomaly(d.c.id, x.id, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
				fmt.Sprintf("response captured from its middle: skipped %d bytes to the first chunk-size line", skipped))
		}
	} else if d.x != nil {
		d.c.s.anomaly(d.c.id, d.x.id, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
			fmt.Sprintf("chunked framing resumed after skipping %d bytes", skipped))
		if skipped > 0 {
			d.x.gap(skipped, t)
		}
	}
	d.st = h1Chunked
	d.clearTrailer()
}

// resumeHead switches to reading a message head at stream offset off.
func (d *h1Dir) resumeHead(skipped, off int64, t int64) {
	if skipped > 0 {
		what := "response"
		if d.dir == formats.ClientToServer {
			what = "request"
		}
		d.c.s.anomaly(d.c.id, formats.NoExchange, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
			fmt.Sprintf("skipped %d bytes to the next %s head", skipped, what))
	}
	if d.st == h1ChunkResync && d.x != nil {
		// The body never resumed: it ended somewhere in the lost bytes.
		d.x.gap(skipped, t)
		d.bodyEnd(formats.EndGap, t, "chunked framing lost")
	}
	if d.lostHead && len(d.c.queue) > 0 {
		// A head and no body before it: the oldest waiting request's
		// response was lost whole.
		x := d.c.popQueue()
		d.c.s.anomaly(d.c.id, x.id, d.dir, t, formats.AnomalyGap, off, 0,
			"the response to this request was not captured (lost with the bytes missing before)")
		x.end(formats.EndGap, t, nil, "response not captured")
	}
	d.lostHead = false
	d.st = h1Head
	d.head = d.head[:0]
	d.scan = 0
}

// gap records n bytes of direction dir lost to capture loss.
func (c *h1Conn) gap(dir formats.Direction, n int64, t int64) {
	d := &c.d[dir]
	// Responses come in request order: bytes lost where a response was to
	// begin held (at least) the head of the oldest waiting request's
	// response. What follows the gap is either the rest of its body (found
	// by its chunk framing: it is that request's, a response captured from
	// its middle) or the next response head (the whole response was lost).
	lostHead := dir == formats.ServerToClient && len(c.queue) > 0 &&
		(d.st == h1Head || d.st == h1Length && n > d.remain)
	x := d.exchangeID()
	if lostHead && d.st == h1Head {
		x = c.queue[0].exchange().id
	}
	c.s.anomaly(c.id, x, dir, t, formats.AnomalyGap, d.off, n,
		fmt.Sprintf("%d bytes missing from the %s stream (not captured)", n, dir))
	if lostHead {
		defer func() {
			d.st = h1Midstream
			d.lostHead = true
			d.clearBuf()
			d.ch = nil
		}()
	}
	d.off += n
	switch d.st {
	case h1Head:
		if len(d.head) > 0 {
			d.head = d.head[:0]
			d.scan = 0
		}
		d.st = h1Resync
	case h1Length:
		if n >= d.remain {
			if d.x != nil {
				if dir == formats.ServerToClient {
					d.x.gap(d.remain, t)
				}
			}
			d.bodyEnd(formats.EndGap, t, "bytes missing")
			d.st = h1Resync
			return
		}
		d.remain -= n
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
	case h1Chunked:
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
		d.st = h1ChunkResync
		d.clearBuf()
		d.ch = nil
	case h1Close:
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
	case h1Resync, h1Midstream, h1ChunkResync:
		if a := d.a; a != nil {
			a.skipped += int64(len(a.buf))
			a.buf, a.bufAt = a.buf[:0], a.bufAt[:0]
		}
		if d.ch != nil {
			d.ch.Resync(nil) // forget the bytes before the gap
		}
	}
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
		if len(d.head) > 0 {
			c.s.anomaly(c.id, formats.NoExchange, dir, t, formats.AnomalyTruncated, d.off-int64(len(d.head)), int64(len(d.head)),
				fmt.Sprintf("connection closed inside a message head (%d bytes)", len(d.head)))
			d.head = d.head[:0]
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
			if len(d.head) > 0 {
				c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyTruncated, d.off-int64(len(d.head)), int64(len(d.head)),
					fmt.Sprintf("%s inside a message head (%d bytes)", note, len(d.head)))
				d.head = d.head[:0]
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
