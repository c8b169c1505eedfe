package capture

import (
	"fmt"
	"mime"
	"strings"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

const (
	// maxBodyPiece bounds the data of one Body record; larger pieces are
	// split so a record stays far below formats.MaxRecordSize.
	maxBodyPiece = 1 << 20
	// maxSniff bounds the decoded bytes held while deciding whether a body
	// whose head was not captured (or whose request was not) carries watch
	// events. Kubernetes events reach a few hundred KiB in practice; 4 MiB
	// covers the first event start after a capture began inside one.
	maxSniff = 4 << 20
)

// exchange turns one HTTP exchange, as parsed from the wire (HTTP/1.1,
// HTTP/2) or seen by the proxy, into session records: Request, Body pieces,
// Response, Frames or Body pieces, Chunks, End. It is driven by one
// goroutine.
type exchange struct {
	s    *session
	id   int64
	conn uint64

	method string
	reqOff int64

	// What few exchanges need (allocated at the first need): the request's
	// Content-Type and Content-Encoding, what redaction replaced, the
	// response's last-chunk extensions.
	aux *exchangeAux
	// Redaction (nil streams when Secret values are kept): the streams
	// that redact opaque bodies by content as they arrive.
	reqRS  *redactStream
	respRS *redactStream

	resp   *formats.Response // the response head, until it is written (nil before and after)
	respCT string            // the response's Content-Type
	split  *frame.Splitter
	dec    *pushDecoder

	raw     int64 // body bytes seen (after transfer decoding, before content decoding)
	bodyOff int64 // next Body record offset (opaque bodies)
	seq     int64
	skipped int64 // Skipped() of the splitter already reported
	t       int64 // time of the last input

	// Flags, together (an open watch's exchange may live for hours: its
	// size counts).
	watch      bool // the request asked for a watch
	watchKnown bool // false when the request was not captured
	reqEnded   bool
	secret     bool // the request addresses Secrets: its body is one (a patch, a create)
	hasResp    bool // the response head is known
	respMid    bool // the response was captured from its middle (its head is unknown)
	emitted    bool // the response head has been written
	format     frame.Format
	decErr     bool
	sniffing   bool
	resync     bool // start the splitter in resync mode (body captured from its middle)
	gapped     bool
	ended      bool
}

// exchangeAux is what only some exchanges need: kept apart, since an
// open watch's exchange may live for hours and its size counts.
type exchangeAux struct {
	reqCT, reqEnc string           // the request's Content-Type and Content-Encoding (and transfer codings)
	respTE        string           // the response's transfer codings besides chunked
	respEnc       string           // the response's content codings, then transfer codings
	lastExt       string           // the response's last-chunk extensions (HTTP/1.1 chunked)
	pending       []formats.Record // chunk records held until the response head is written
	sniff         []byte           // the start of a body whose kind is not decided yet
	req, resp     redact.Report    // what redaction replaced in each direction
	answer        string           // how the response was answered (TeeConn.Note), for its End's note
}

// more returns x's auxiliary state, allocating it at the first need.
func (x *exchange) more() *exchangeAux {
	if x.aux == nil {
		x.aux = new(exchangeAux)
	}
	return x.aux
}

// respEncoding returns the response's codings (see exchangeAux.respEnc).
func (x *exchange) respEncoding() string {
	if x.aux == nil {
		return ""
	}
	return x.aux.respEnc
}

// rep returns the Report of direction dir.
func (x *exchange) rep(dir formats.Direction) *redact.Report {
	if dir == formats.ClientToServer {
		return &x.more().req
	}
	return &x.more().resp
}

// transferCoding notes the transfer codings besides chunked of direction
// dir's body ("gzip"), before its head is handled (the response's) or its
// body arrives (the request's). They apply after any content coding:
// redaction and event splitting read the body through both, a content
// coding first — and what cannot be decoded so is replaced (fail closed),
// a body stored gzip'd by its transfer coding is never stored unjudged.
func (x *exchange) transferCoding(dir formats.Direction, coding string) {
	a := x.more()
	if dir == formats.ClientToServer {
		a.reqEnc = stackCodings(a.reqEnc, coding)
	} else {
		a.respTE = coding
	}
}

// stackCodings returns the coding of a body content-coded ce, then
// transfer-coded te: one of them alone, or both listed (which no decoder
// here takes: the body is then replaced, fail closed).
func stackCodings(ce, te string) string {
	if ce == "" || strings.EqualFold(strings.TrimSpace(ce), "identity") {
		return te
	}
	if te == "" {
		return ce
	}
	return ce + ", " + te
}

// setLastExt notes the response's last-chunk extensions.
func (x *exchange) setLastExt(ext string) {
	if ext != "" || x.aux != nil {
		x.more().lastExt = ext
	}
}

// newExchange starts an exchange with its request (req.Missing for one
// whose request was not captured) and writes the Request record.
func (s *session) newExchange(conn uint64, req formats.Request) *exchange {
	// Strings kept past this call are cloned: the parsed ones share the
	// memory of the whole message head (a pipelined connection may hold
	// thousands of requests waiting for their responses).
	x := &exchange{s: s, id: s.nextExchange, conn: conn, method: intern(req.Method, methods)}
	s.nextExchange++
	s.stats.Exchanges++
	req.Exchange = x.id
	req.Conn = conn
	if !req.Missing {
		x.watchKnown = true
		x.watch = apipath.IsWatch(req.Method, req.Target)
		x.secret = s.secrets != nil && redact.SecretPath(req.Target)
		if ct, enc := headerValue(req.Header, "Content-Type"), headerValue(req.Header, "Content-Encoding"); ct != "" || enc != "" {
			a := x.more()
			a.reqCT, a.reqEnc = strings.Clone(ct), strings.Clone(enc)
		}
		// Credentials in the query are never stored, whatever the mode.
		var rep redact.Report
		req.Target = redact.Target(req.Target, &rep)
		if !rep.Empty() {
			*x.rep(formats.ClientToServer) = rep
		}
	} else {
		x.reqEnded = true
	}
	x.t = req.Time
	s.emit(&req)
	return x
}

// parkedExchange is an exchange whose request ended, waiting behind others
// on a pipelined connection for its response: what the response needs of
// it, in a fifth of the memory (a client may pipeline thousands).
type parkedExchange struct {
	s                         *session
	id                        int64
	conn                      uint64
	method                    string
	reqOff, t                 int64
	watch, watchKnown, secret bool
}

// park returns x's parked form; x must not be used after. Only an
// exchange whose request ended, and whose response has not begun, parks.
func (x *exchange) park() parkedExchange {
	return parkedExchange{s: x.s, id: x.id, conn: x.conn, method: x.method, reqOff: x.reqOff, t: x.t,
		watch: x.watch, watchKnown: x.watchKnown, secret: x.secret}
}

// resume returns the exchange again.
func (p *parkedExchange) resume() *exchange {
	return &exchange{s: p.s, id: p.id, conn: p.conn, method: p.method, reqOff: p.reqOff, t: p.t,
		watch: p.watch, watchKnown: p.watchKnown, secret: p.secret, reqEnded: true}
}

// requestBody records a piece of the request body.
func (x *exchange) requestBody(p []byte, t int64) {
	if x.s.secrets == nil {
		x.emitBody(formats.ClientToServer, p, t)
		return
	}
	if x.reqRS == nil {
		a := x.more()
		x.reqRS = x.newRedactStream(formats.ClientToServer, &a.req, a.reqCT, a.reqEnc, x.secret, false)
	}
	x.reqRS.write(p, t)
}

// emitBody writes Body records for p at the next offset of direction dir.
func (x *exchange) emitBody(dir formats.Direction, p []byte, t int64) {
	off := &x.bodyOff
	if dir == formats.ClientToServer {
		off = &x.reqOff
	}
	for len(p) > 0 {
		n := min(len(p), maxBodyPiece)
		x.s.emit(&formats.Body{Exchange: x.id, Dir: dir, Time: t, Offset: *off, Data: p[:n]})
		*off += int64(n)
		p = p[n:]
	}
}

// requestEnd closes the request direction.
func (x *exchange) requestEnd(st formats.EndStatus, t int64, note string) {
	if x.reqEnded {
		return
	}
	x.reqEnded = true
	if x.reqRS != nil && x.reqRS.close(st == formats.EndComplete, t) {
		note = joinNote(note, "stored re-encoded after redaction")
	}
	x.s.emit(&formats.End{Exchange: x.id, Dir: formats.ClientToServer, Time: t, Status: st, Size: x.reqOff, Note: note,
		Redactions: x.redactions(formats.ClientToServer, t)})
}

// redactions returns what redaction replaced in one direction, and
// records an Anomaly for each region replaced because it could not be
// parsed.
func (x *exchange) redactions(dir formats.Direction, t int64) []formats.Redaction {
	if x.aux == nil {
		return nil
	}
	rep := x.rep(dir)
	fails, more := rep.Failures()
	for _, f := range fails {
		x.s.anomaly(x.conn, x.id, dir, t, formats.AnomalyMalformed, f.Offset, f.Bytes,
			fmt.Sprintf("redaction failed closed: %s; the bytes are replaced, not stored", f.Why))
	}
	if more > 0 {
		x.s.anomaly(x.conn, x.id, dir, t, formats.AnomalyMalformed, 0, 0,
			fmt.Sprintf("redaction failed closed in %d more places", more))
	}
	return rep.Redactions()
}

// response records the response head and decides how the body is stored.
func (x *exchange) response(r formats.Response) {
	r.Exchange = x.id
	ct := headerValue(r.Header, "Content-Type")
	enc := headerValue(r.Header, "Content-Encoding")
	if x.aux != nil && x.aux.respTE != "" {
		enc = stackCodings(enc, x.aux.respTE)
	}
	r.Encoding = enc
	x.respCT = intern(ct, mediaTypes)
	if enc != "" {
		x.more().respEnc = strings.Clone(enc)
	}
	x.resp, x.hasResp, x.respMid = &r, true, r.Midstream
	x.t = r.Time
	// Whether the body is a stream of events is the response's to say
	// (its status and media type, as the apiserver writes a watch): an
	// error answer to a watch request is one Status.
	f := frame.ResponseFormat(r.Status, ct, x.watch)
	switch {
	case r.Midstream && x.watchKnown && !x.watch:
		// A body captured from its middle (its head lost) answering a
		// request that asked for no watch: stored as it comes.
	case r.Midstream:
		// Nothing is known about the body: look at it.
		x.sniffing = true
		x.resync = true
		return
	case !x.watchKnown && f == frame.Unknown && isJSON(ct) && r.Status == 200:
		// The request was not captured: a JSON body may be a watch.
		x.sniffing = true
		return
	}
	x.setFormat(f, enc)
	x.emitResponse()
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// setFormat fixes how the body is stored.
func (x *exchange) setFormat(f frame.Format, enc string) {
	switch f {
	case frame.JSON, frame.Protobuf, frame.CBOR:
	default:
		f = frame.Unknown
	}
	if f != frame.Unknown && enc != "" && !strings.EqualFold(enc, "identity") {
		if !supportedEncoding(enc) {
			x.s.anomaly(x.conn, x.id, formats.ServerToClient, x.t, formats.AnomalyUnknown, 0, 0,
				fmt.Sprintf("watch body uses Content-Encoding %q, which wtrace cannot decode; the body is stored whole", enc))
			f = frame.Unknown
		} else {
			x.dec = newPushDecoder(enc)
		}
	}
	x.format = f
	x.resp.Events = f
	if f != frame.Unknown {
		x.split = frame.NewSplitter(f, frame.Options{Resync: x.resync})
	}
}

func (x *exchange) emitResponse() {
	if x.emitted || x.resp == nil {
		return
	}
	x.emitted = true
	x.s.emit(x.resp)
	// Of the head, the exchange needs only what it copied (respCT, respEnc,
	// respMid): the record, its header fields and the head they share
	// memory with are let go (an open watch may last hours).
	x.resp = nil
	if x.aux != nil {
		for _, r := range x.aux.pending {
			x.s.emit(r)
		}
		x.aux.pending = nil
	}
}

// chunk records a transfer chunk (an HTTP/1.1 chunk or an HTTP/2 DATA frame).
func (x *exchange) chunk(c chunked.Chunk) {
	rec := formats.Chunk{Exchange: x.id, Time: c.Time, Offset: c.Offset, Size: c.Size, Ext: c.Ext}
	if rs := x.responseStream(); rs != nil && rs.holdsChunks() {
		// A content-encoded body is held until it is known to be stored
		// as sent (then so are its chunks) or re-encoded (then the wire's
		// chunk boundaries do not fit it).
		held := rec // allocated only here: rec itself stays on the stack
		rs.chunk(&held)
		return
	}
	if !x.emitted {
		if a := x.more(); len(a.pending) < 4096 {
			held := rec
			a.pending = append(a.pending, &held)
		}
		return
	}
	// Written now: one Chunk record serves every such chunk, as the Frame
	// record does every event (a Sink keeps nothing of it past Write).
	r := &x.s.sc().chunk
	*r = rec
	x.s.emit(r)
}

// body handles response body bytes after transfer decoding.
func (x *exchange) body(p []byte, t int64) {
	if x.ended || len(p) == 0 {
		return
	}
	x.t = t
	x.raw += int64(len(p))
	switch {
	case x.sniffing:
		x.sniffData(p, t)
	case x.split == nil:
		x.opaque(p, t)
	case x.dec != nil:
		if x.decErr {
			return
		}
		if err := x.dec.write(p, func(q []byte) { x.events(q, t) }); err != nil {
			x.decodeFailed(err, t)
		}
	default:
		x.events(p, t)
	}
}

func (x *exchange) decodeFailed(err error, t int64) {
	x.decErr = true
	x.dec.abort()
	x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, formats.AnomalyMalformed, x.raw, 0,
		fmt.Sprintf("content decoding failed: %v; the rest of the body is not recorded", err))
}

func (x *exchange) opaque(p []byte, t int64) {
	if rs := x.responseStream(); rs != nil {
		rs.write(p, t)
		return
	}
	x.emitBody(formats.ServerToClient, p, t)
}

// responseStream returns the stream redacting an opaque response body
// (nil when Secret values are kept, or while the body's kind is not
// decided).
func (x *exchange) responseStream() *redactStream {
	if x.respRS != nil || x.s.secrets == nil || !x.hasResp || x.sniffing || x.split != nil || x.ended {
		return x.respRS
	}
	x.respRS = x.newRedactStream(formats.ServerToClient, x.rep(formats.ServerToClient), x.respCT,
		x.respEncoding(), false, x.respMid)
	return x.respRS
}

// sniffData buffers the start of a body whose kind is unknown until it can
// tell whether it carries watch events.
func (x *exchange) sniffData(p []byte, t int64) {
	a := x.more()
	a.sniff = append(a.sniff, p...)
	var f frame.Format
	if x.respMid {
		f = frame.Sniff(a.sniff)
	} else if len(a.sniff) >= 16 {
		f = sniffStart(a.sniff)
		if f == frame.Unknown {
			x.decide(frame.Unknown, t)
			return
		}
	} else {
		return
	}
	if f != frame.Unknown {
		x.decide(f, t)
		return
	}
	if len(a.sniff) > maxSniff {
		x.decide(frame.Unknown, t)
	}
}

// sniffStart reports whether a JSON body begins like a watch event.
func sniffStart(b []byte) frame.Format {
	s := strings.TrimLeft(string(b[:min(len(b), 64)]), " \t\r\n")
	if strings.HasPrefix(s, `{"type":"`) {
		return frame.JSON
	}
	return frame.Unknown
}

// decide ends sniffing: it fixes the format and replays the buffered bytes.
func (x *exchange) decide(f frame.Format, t int64) {
	x.sniffing = false
	var b []byte
	if x.aux != nil {
		b, x.aux.sniff = x.aux.sniff, nil
	}
	if f == frame.Unknown && x.respMid && len(b) > 0 {
		x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, formats.AnomalyResync, 0, int64(len(b)),
			"no watch event start found in the captured part of a body whose head was not captured; stored as opaque bytes")
	}
	x.setFormat(f, x.respEncoding())
	x.emitResponse()
	if len(b) == 0 {
		return
	}
	if x.split == nil {
		x.opaque(b, t)
		return
	}
	if x.dec != nil {
		if err := x.dec.write(b, func(q []byte) { x.events(q, t) }); err != nil {
			x.decodeFailed(err, t)
		}
		return
	}
	x.events(b, t)
}

// events splits decoded body bytes into Frame records.
func (x *exchange) events(p []byte, t int64) {
	for len(p) > 0 {
		n, ev, ok, err := x.split.Next(p)
		p = p[n:]
		if ok {
			x.frame(ev, t)
		}
		if err != nil {
			x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, formats.AnomalyMalformed, x.split.Offset(), 0,
				fmt.Sprintf("%v; skipping to the next event", err))
			x.split.Resync()
		}
		if n == 0 && !ok && err == nil {
			break
		}
	}
}

func (x *exchange) frame(ev frame.Event, t int64) {
	x.reportSkipped(ev.Offset, t)
	// One Frame record serves every event: a Sink keeps nothing of it
	// past Write.
	sc := x.s.sc()
	f := &sc.frame
	*f = formats.Frame{Exchange: x.id, Seq: x.seq, Time: t, Offset: ev.Offset, Pre: ev.Pre, Data: ev.Data}
	if x.s.secrets != nil {
		// One Report serves every event too, its storage reused: the
		// Sink was done with the last event's Redacted lengths when its
		// Write returned.
		rep := &sc.rep
		rep.Reset()
		f.Data = x.s.secrets.EventTo(sc.redacted[:0], x.format, ev.Data, rep)
		if len(f.Data) > 0 && len(ev.Data) > 0 && &f.Data[0] != &ev.Data[0] && cap(f.Data) <= maxReusedRedaction {
			sc.redacted = f.Data[:0] // the Sink is done with it at the next event
		}
		if !rep.Empty() {
			f.Redacted = rep.Lengths()
			x.rep(formats.ServerToClient).MergeAt(rep, ev.Offset+int64(len(ev.Pre)))
		}
	}
	x.seq++
	x.s.stats.Events++
	x.s.emit(f)
}

// reportSkipped records the bytes the splitter discarded while looking for
// an event start (a body captured from its middle, or after a gap or a
// framing error), up to body offset off.
func (x *exchange) reportSkipped(off int64, t int64) {
	sk := x.split.Skipped()
	if sk <= x.skipped {
		return
	}
	d := sk - x.skipped
	x.skipped = sk
	x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, formats.AnomalyResync, off-d, d,
		fmt.Sprintf("skipped %d body bytes that belong to no complete event", d))
}

// gap records n body bytes lost to capture loss (for chunked bodies, n
// counts wire bytes, chunk framing included).
func (x *exchange) gap(n int64, t int64) {
	if x.ended {
		return
	}
	x.gapped = true
	x.raw += n
	switch {
	case x.sniffing:
		x.decide(frame.Unknown, t)
		if rs := x.responseStream(); rs != nil {
			rs.gap(n, t)
		}
		x.bodyOff += n
	case x.split == nil:
		if rs := x.responseStream(); rs != nil {
			rs.gap(n, t)
		}
		x.bodyOff += n
	case x.dec != nil:
		if !x.decErr {
			x.decodeFailed(fmt.Errorf("%d compressed bytes lost", n), t)
		}
	default:
		x.split.Resync()
		x.split.SetOffset(x.split.Offset() + n)
	}
}

// end closes the response. If no response head was seen, it records only
// the end of the request.
func (x *exchange) end(st formats.EndStatus, t int64, trailer []formats.Header, note string) {
	if x.ended {
		return
	}
	if !x.hasResp {
		x.requestEnd(st, t, note)
		x.ended = true
		return
	}
	if x.sniffing {
		x.decide(frame.Unknown, t)
	}
	if x.dec != nil && !x.decErr {
		if err := x.dec.close(func(q []byte) { x.events(q, t) }); err != nil {
			x.decErr = true
			if st == formats.EndComplete {
				x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, formats.AnomalyMalformed, x.raw, 0,
					fmt.Sprintf("content decoding failed at the end of the body: %v", err))
			}
		}
	}
	var tail []byte
	if x.split != nil {
		var err error
		tail, err = x.split.End()
		x.reportSkipped(x.split.Offset()-int64(len(tail)), t)
		if err != nil && len(tail) > 0 {
			kind := formats.AnomalyTruncated
			msg := fmt.Sprintf("the body ended inside an event: %d bytes of a partial event kept as the tail", len(tail))
			if st == formats.EndComplete {
				kind = formats.AnomalyMalformed
			}
			x.s.anomaly(x.conn, x.id, formats.ServerToClient, t, kind, x.split.Offset()-int64(len(tail)), int64(len(tail)), msg)
		}
	}
	if st == formats.EndComplete && x.gapped {
		st = formats.EndGap
	}
	x.emitResponse()
	if rs := x.respRS; rs != nil && rs.close(st == formats.EndComplete, t) {
		note = joinNote(note, "stored re-encoded after redaction")
	}
	x.ended = true
	if x.aux != nil {
		note = joinNote(note, x.aux.answer)
	}
	if len(tail) > 0 && x.s.secrets != nil {
		var rep redact.Report
		tail = x.s.secrets.Tail(x.format, tail, &rep)
		x.rep(formats.ServerToClient).MergeAt(&rep, x.split.Offset()-int64(len(tail)))
	}
	x.s.emit(&formats.End{Exchange: x.id, Dir: formats.ServerToClient, Time: t, Status: st, Size: x.raw,
		Tail: tail, Trailer: trailer, Note: note, Redactions: x.redactions(formats.ServerToClient, t), LastExt: x.lastExt()})
}

// lastExt returns the response's last-chunk extensions.
func (x *exchange) lastExt() string {
	if x.aux == nil {
		return ""
	}
	return x.aux.lastExt
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// headerValue returns the first value of a header field (case-insensitive).
func headerValue(h []formats.Header, name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// intern returns s, or the equal string of common when it holds one: the
// strings an exchange keeps share no memory with the message head they
// came from (a connection may hold thousands of exchanges waiting), and
// the usual ones are not copied for each.
func intern(s string, common []string) string {
	for _, c := range common {
		if s == c {
			return c
		}
	}
	return strings.Clone(s)
}

// methods and mediaTypes are the values intern knows.
var (
	methods    = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	mediaTypes = []string{"application/json", "application/vnd.kubernetes.protobuf",
		"application/vnd.kubernetes.protobuf;stream=watch", "application/cbor-seq", "application/cbor",
		"application/yaml", "text/plain; charset=utf-8"}
)

// maxReusedRedaction bounds the buffer of redacted events a session keeps
// between events: a larger one (a huge Secret) is left to the collector.
const maxReusedRedaction = 1 << 20
