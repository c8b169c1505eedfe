package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// hopByHop lists the header fields a proxy or server must not forward
// (RFC 9110 §7.6.1) plus the ones net/http sets from the framing it chooses.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Transfer-Encoding":   true,
	"Te":                  true,
	"Trailer":             true,
	"Upgrade":             true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Content-Length":      true,
	"Date":                true, // net/http sends the current date
}

// responseHeader returns the recorded header fields a replay sends: without
// hop-by-hop fields (and those the recorded Connection field named), without
// redacted values, without HTTP/2 pseudo-headers, without Content-Length and
// Date (set by the caller and by net/http), and without Content-Encoding
// when keepEncoding is false.
func responseHeader(rec []formats.Header, keepEncoding bool) http.Header {
	h := http.Header{}
	named := map[string]bool{}
	for _, f := range rec {
		if http.CanonicalHeaderKey(f.Name) == "Connection" {
			for _, n := range strings.Split(f.Value, ",") {
				named[http.CanonicalHeaderKey(strings.TrimSpace(n))] = true
			}
		}
	}
	for _, f := range rec {
		k := http.CanonicalHeaderKey(f.Name)
		switch {
		case !validFieldName(f.Name), !validFieldValue(f.Value):
			continue // a damaged or hostile session: never split a response
		case f.Redacted, hopByHop[k], named[k],
			strings.HasPrefix(k, "Proxy-"),
			k == "Content-Encoding" && !keepEncoding:
			continue
		}
		h[k] = append(h[k], f.Value)
	}
	return h
}

// validFieldName reports whether name is an RFC 9110 §5.1 token (which
// also rules out HTTP/2 pseudo-header names).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validFieldValue reports whether v holds no CR, LF or NUL (RFC 9110 §5.5).
func validFieldValue(v string) bool {
	return strings.IndexAny(v, "\r\n\x00") < 0
}

// responseStatus is the status code to send for a recorded one: a head
// that was not captured (0), and codes net/http cannot send as a final
// response, become 200.
func responseStatus(code int) int {
	if code < 200 || code > 999 {
		return http.StatusOK
	}
	return code
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip
// (RFC 9110 §12.5.3: listed, or "*", with a non-zero q).
func acceptsGzip(ae string) bool {
	gz, star := -1.0, -1.0
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			gz = q
		case "*":
			star = q
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// endKind is how a served response ends.
type endKind int

const (
	endClean endKind = iota // terminating chunk / END_STREAM
	endAbort                // connection closed without the terminating chunk (FIN)
	endReset                // connection reset (RST)
	endHold                 // stay open until timeoutSeconds, the client leaves, or Close
)

func (k endKind) String() string {
	switch k {
	case endAbort:
		return "abort"
	case endReset:
		return "reset"
	case endHold:
		return "hold"
	}
	return "clean"
}

// streamer writes one response with its timing. It belongs to the handler
// goroutine of one request; nothing on its write path is shared with other
// requests except immutable plans.
type streamer struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request // nil once the stream took the connection over
	method    string
	target    string // as requested
	rc        *http.ResponseController
	ctx       context.Context
	cancel    context.CancelFunc
	own       *ownConn // the connection, once taken over (HTTP/1.1 streams)
	arrival   time.Time
	timeoutAt time.Time // zero: none
	// bookmarkAt is when a world watch that allows bookmarks sends its
	// next periodic one (bookmarks.go); zero: never.
	bookmarkAt time.Time
	timer      Timer
	shift      time.Duration // added to every deadline (loop passes)
	batch      [][]byte
	exts       []string     // the recorded extensions of batch's chunks, when run sets them
	end        *formats.End // the recorded end, for its last-chunk extensions and trailers
	bytes      int64
	writes     int64
	stopped    string       // why the stream stopped early ("" if it did not)
	ended      bool         // the connection was already closed or reset (abort)
	crossed    []*tape.Loss // losses of the session's damage this stream went past
	flow       *flow        // a recorded watch served with the world (nil: as recorded)
	midEvent   bool         // the last write ended inside a watch event (flows only)
	tap        *tap         // the request log's and Out's view of the response
	// handoff, when the request is served on a goroutine of its own (see
	// ServeHTTP), lets ServeHTTP return once the stream took the
	// connection over; nil otherwise.
	handoff func()
	// panicked is what a stream's goroutine recovered before the
	// hand-off, for ServeHTTP to panic with.
	panicked any

	// The scheduler's path (see sched.go): a stream served on a goroutine of
	// its own (handed) whose connection it owns and may park (see
	// ownConn.park) runs the rest of its body (rest) resumably: where it
	// would wait, it parks instead (parked, until parkAt), its goroutine
	// unwinds and returns, and the scheduler runs rest again when it is
	// due — itself (inSched), or on a new goroutine when that could block
	// (needGo).
	handed bool
	sc     *pace.Scheduler // the shard the stream parks in
	rt     *route          // for the end of the stream (see answer)
	rest   func()
	// release, if set, is called once when the stream ends (its rest
	// outlives serve).
	release func()
	parked  bool
	parkAt  time.Time // zero: no time (only the client leaving or Close)
	inSched bool
	needGo  bool
	slot    pace.Slot
}

func (s *Server) newStreamer(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request, q tape.Query, arrival time.Time) *streamer {
	st := &streamer{s: s, w: w, r: r, method: r.Method, rc: http.NewResponseController(w), ctx: ctx, cancel: cancel, arrival: arrival}
	if q.Timeout > 0 {
		// timeoutSeconds is the client's view of the recorded time: it
		// scales with the speed, as the recording's own ends do (as fast
		// as possible, Speed 0, keeps it in real time).
		st.timeoutAt = arrival.Add(q.Timeout)
		if s.speed > 0 {
			st.timeoutAt = arrival.Add(s.scale(int64(q.Timeout)))
		}
	}
	return st
}

// scale maps a recorded duration to replay time at the server's speed.
func (s *Server) scale(d int64) time.Duration {
	if d <= 0 || s.speed == 0 {
		return 0
	}
	if s.speed == 1 {
		return time.Duration(d)
	}
	f := float64(d) / s.speed
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// deadline is when a byte recorded at capture time t goes out, on a timeline
// whose capture time base maps to the request's arrival.
func (st *streamer) deadline(t, base int64) time.Time {
	return st.arrival.Add(st.shift + st.s.scale(t-base))
}

// waitUntil waits for the clock to reach t (zero: forever, for hold). It
// returns false if the client's timeoutSeconds passes first (stopped =
// "timeout") or the request is cancelled (stopped = "cancelled"). On the
// scheduler's path (mayPark) it does not wait: it parks the stream
// (parked set, stopped "") and returns false; the caller returns at once,
// leaving its state such that calling st.rest again carries on.
func (st *streamer) waitUntil(t time.Time) bool {
	limit := t
	timeout := false
	if !st.timeoutAt.IsZero() && (t.IsZero() || !st.timeoutAt.After(t)) {
		limit, timeout = st.timeoutAt, true
	}
	if st.mayPark() {
		if st.ctx.Err() != nil {
			st.stopped = "cancelled"
			return false
		}
		if st.needGo || limit.IsZero() || limit.After(time.Now()) {
			st.parked, st.parkAt = true, limit
			return false
		}
	} else if st.own != nil && st.own.selfRead {
		if !st.ownWait(limit) {
			st.stopped = "cancelled"
			return false
		}
	} else if d := limit.Sub(st.s.clock.Now()); d > 0 {
		if st.timer == nil {
			st.timer = st.s.clock.NewTimer(d)
		} else {
			st.timer.Reset(d)
		}
		select {
		case <-st.timer.C():
		case <-st.ctx.Done():
			st.timer.Stop()
			st.stopped = "cancelled"
			return false
		}
	} else if st.ctx.Err() != nil {
		st.stopped = "cancelled"
		return false
	}
	if timeout {
		st.stopped = "timeout"
		return false
	}
	return true
}

// hold waits until the client's timeoutSeconds, the client leaves, or the
// server closes.
func (st *streamer) hold() {
	if st.mayPark() {
		st.waitUntil(time.Time{}) // parks, or stops at timeoutAt
		if !st.parked && st.stopped == "" {
			st.stopped = "cancelled"
		}
		return
	}
	if st.timeoutAt.IsZero() {
		if st.own != nil && st.own.selfRead {
			st.ownWait(time.Time{})
		} else {
			<-st.ctx.Done()
		}
		st.stopped = "cancelled"
		return
	}
	st.waitUntil(st.timeoutAt.Add(time.Hour)) // stops at timeoutAt
}

// begin sends the head of a streamed (watch) response now, as the
// apiserver does: over HTTP/1.1 on a connection the stream takes over (see
// ownConn), otherwise through net/http.
func (st *streamer) begin(hd *head) bool {
	if st.takeOver(st.r, hd) {
		return st.stopped == ""
	}
	dst := st.w.Header()
	for k, v := range hd.h {
		switch k {
		case "Transfer-Encoding", "Connection": // net/http's business
		default:
			dst[k] = v
		}
	}
	st.w.WriteHeader(hd.status)
	if err := st.rc.Flush(); err != nil {
		st.stopped = "flush: " + err.Error()
		return false
	}
	return true
}

// send sends p as one chunk.
func (st *streamer) send(p []byte) bool {
	return st.sendBatch([][]byte{p})
}

// sendBatch sends each element of batch as one chunk (HTTP/1.1) or DATA
// frame (HTTP/2): on a taken-over connection all in one system call,
// otherwise one write and flush each (the response buffer is empty before
// each write, so each flush is one chunk). A client that cannot take a
// write within the write timeout is dropped.
func (st *streamer) sendBatch(batch [][]byte) bool {
	if st.own != nil {
		st.writes += int64(len(batch))
		return st.ownSend(batch)
	}
	for _, p := range batch {
		if len(p) == 0 {
			continue
		}
		if st.s.writeTimeout > 0 {
			_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.writeTimeout))
		}
		if _, err := st.w.Write(p); err != nil {
			st.stopped = "write: " + err.Error()
			return false
		}
		if err := st.rc.Flush(); err != nil {
			st.stopped = "flush: " + err.Error()
			return false
		}
		st.bytes += int64(len(p))
		st.writes++
	}
	return true
}

// run sends src's writes on the timeline that maps capture time base to the
// request's arrival, skipping body bytes before offset skip. Writes that
// are due together (a burst, or a client that fell behind) go out as one
// batch. It returns false if the stream stopped early.
func (st *streamer) run(src tape.Source, base, skip int64) bool {
	return st.runFrom(st.reader(src, skip), base)
}

// runFrom is run with rd, resumably: when the stream parks (see
// waitUntil) it returns false with the next write unread.
func (st *streamer) runFrom(rd *writeReader, base int64) bool {
	for {
		if st.inSched && !rd.nonBlocking() {
			st.yield()
			return false
		}
		w, ok := rd.next()
		if !ok {
			return st.stopped == ""
		}
		if !st.waitUntil(st.deadline(w.At, base)) {
			if st.parked {
				rd.unread(w)
			}
			return false
		}
		batch := append(st.batch[:0], w.Data)
		st.exts = append(st.exts[:0], w.Ext)
		size := len(w.Data)
		now := st.s.clock.Now()
		st.wrote(&w, base, now)
		for size < maxBatch {
			w2, ok := rd.next()
			if !ok {
				if st.stopped != "" {
					return false
				}
				break
			}
			if st.deadline(w2.At, base).After(now) {
				rd.unread(w2)
				break
			}
			st.wrote(&w2, base, now)
			batch = append(batch, w2.Data)
			st.exts = append(st.exts, w2.Ext)
			size += len(w2.Data)
		}
		st.batch = batch[:0]
		if !st.sendBatch(batch) {
			return false
		}
	}
}

// finish ends the response as kind says, at capture time endAt on the
// timeline of base.
func (st *streamer) finish(kind endKind, endAt, base int64) {
	if kind == endHold || st.s.opts.Hold {
		st.hold()
		return
	}
	if !st.waitUntil(st.deadline(endAt, base)) {
		return
	}
	switch kind {
	case endAbort:
		st.abort(false)
	case endReset:
		st.abort(true)
	}
}

// done ends a taken-over stream when its handler is about to return: with
// the terminating chunk if it ended cleanly (as recorded, or at the
// client's timeoutSeconds), else by closing the connection. A stream that
// crossed data lost to damage is cut instead of ending cleanly (see cut).
func (st *streamer) done() {
	clean := st.endsClean()
	if clean && len(st.crossed) > 0 && !st.ended {
		st.cut()
		return
	}
	if st.own == nil && st.stopped == "" && st.end != nil {
		// net/http writes the terminating chunk (HTTP/1.1) or the
		// trailing HEADERS (HTTP/2) with these when the handler returns.
		for _, f := range st.end.Trailer {
			if !f.Redacted && validFieldName(f.Name) && validFieldValue(f.Value) {
				st.w.Header().Add(http.TrailerPrefix+f.Name, f.Value)
			}
		}
	}
	if st.own == nil || st.ended {
		return
	}
	st.ended = true
	st.ownClose(clean, false)
}

// abort ends the response without its terminating chunk: the connection is
// closed (FIN), or reset (RST) with SO_LINGER 0. Over HTTP/2 (which cannot
// be hijacked) the stream is reset with RST_STREAM through
// http.ErrAbortHandler, which net/http recovers without logging.
func (st *streamer) abort(reset bool) {
	if st.own != nil {
		st.ended = true
		st.ownClose(false, reset)
		st.stopped = map[bool]string{false: "aborted", true: "reset"}[reset]
		return
	}
	conn, _, err := st.rc.Hijack()
	if err != nil {
		st.stopped = "aborted"
		panic(http.ErrAbortHandler)
	}
	if reset {
		nc := conn
		if u, ok := conn.(interface{ NetConn() net.Conn }); ok {
			nc = u.NetConn() // TLS: reset the TCP connection under it
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
		st.stopped = "reset"
		return
	}
	_ = conn.Close()
	st.stopped = "aborted"
}

// endOf says how a recorded response ended, for a replay.
func endOf(x *tape.Exchange) endKind {
	switch x.EndStatus() {
	case formats.EndClosed, formats.EndError:
		return endAbort
	case formats.EndReset:
		return endReset
	case formats.EndTruncated:
		if x.Format != 0 {
			return endHold // the watch was still open when the capture ended
		}
		return endAbort
	}
	return endClean
}

// serveExchange sends recorded exchange x, whole or (resume) from body
// offset skip with the timeline starting at capture time base.
func (s *Server) serveExchange(st *streamer, r *http.Request, x *tape.Exchange, skip, base int64) {
	status := responseStatus(x.Info.Response.Status)
	if x.Format == 0 {
		s.serveOpaque(st, r, x, status)
		return
	}
	hd := s.rec.headOf(x, status)
	if st.flow != nil {
		hd = s.watchHead(x, st.flow)
	}
	if x.EndStatus() == formats.EndComplete {
		st.end = x.Info.End // its last-chunk extensions and trailers, if it ends as recorded
	}
	if !st.begin(hd) {
		return
	}
	if base == 0 {
		base = x.RespTime()
	}
	s.continueWatch(st, x, skip, base)
}

// serveOpaque sends a non-event body: as recorded (byte for byte, with its
// Content-Encoding) when the client accepts that encoding, else decoded.
func (s *Server) serveOpaque(st *streamer, r *http.Request, x *tape.Exchange, status int) {
	resp := x.Info.Response
	gz := strings.EqualFold(resp.Encoding, "gzip")
	decode := gz && !acceptsGzip(r.Header.Get("Accept-Encoding"))
	known := resp.Encoding == "" || gz
	h := st.w.Header()
	for k, v := range responseHeader(resp.Header, !decode || !known) {
		h[k] = v
	}
	complete := x.EndStatus() == formats.EndComplete
	if complete && !decode && resp.Framing == formats.FramingLength {
		h.Set("Content-Length", strconv.FormatInt(x.Info.BodyBytes, 10))
	}
	if status == http.StatusNoContent || status == http.StatusNotModified || r.Method == http.MethodHead {
		st.w.WriteHeader(status)
		return
	}
	src, err := s.rec.openSource(x)
	if err != nil {
		h.Del("Content-Length")
		writeStatus(st.w, http.StatusInternalServerError, "InternalError", "replay: reading session: "+err.Error())
		return
	}
	st.w.WriteHeader(status)
	if complete {
		st.end = x.Info.End // its trailers (net/http frames the body)
	}
	base := x.RespTime()
	if decode && known {
		zr, err := gzip.NewReader(&sourceReader{src: src, st: st})
		if err != nil {
			st.stopped = "gzip: " + err.Error()
			return
		}
		if !st.waitUntil(st.deadline(x.EndTime(), base)) {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := zr.Read(buf)
			if n > 0 && !st.send(buf[:n]) {
				return
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				st.stopped = "gzip: " + err.Error()
				st.abort(false)
				return
			}
		}
	} else if !st.run(src, base, 0) {
		return
	}
	if len(st.crossed) > 0 {
		return // cut by done, at once: the body is not what was recorded
	}
	k := endOf(x)
	if k == endHold {
		k = endAbort
	}
	if k == endClean {
		return // the body is complete; no need to wait for the recorded end
	}
	if s.opts.Hold {
		st.hold()
		return
	}
	st.finish(k, x.EndTime(), base)
}

// sourceReader reads a source's bytes as a stream (to decode gzip). Bytes
// lost to damage are an error, unless it serves a stream (st), which
// crosses them.
type sourceReader struct {
	src tape.Source
	st  *streamer
	buf []byte
}

func (r *sourceReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		w, ok, err := r.src.Next()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, io.EOF
		}
		if w.Lost != nil {
			if r.st == nil {
				return 0, fmt.Errorf("replay: %v", w.Lost)
			}
			r.st.cross(w.Lost)
		}
		r.buf = w.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

var errClosed = errors.New("replay: server closed")

// writeReader reads a stream's writes from body offset skip on, for run
// and runFlow: lost data at or after skip is reported on the stream
// (st.cross) and passed over, writes before skip are dropped, and a write
// that straddles skip is cut there (its resourceVersion marks cleared:
// the events they name may lie before the cut). One write can be pushed
// back (unread) to be read again.
type writeReader struct {
	st   *streamer
	src  tape.Source
	skip int64
	held tape.Write
	have bool
}

func (st *streamer) reader(src tape.Source, skip int64) *writeReader {
	return &writeReader{st: st, src: src, skip: skip}
}

// next returns the next write with data; false at the end of the source
// or when reading it failed (st.stopped says why).
func (r *writeReader) next() (tape.Write, bool) {
	if r.have {
		r.have = false
		return r.held, true
	}
	st, skip := r.st, r.skip
	for {
		w, ok, err := r.src.Next()
		if err != nil {
			st.stopped = "reading session: " + err.Error()
			st.s.log.Warn("replay: reading session", "err", err)
			return w, false
		}
		if !ok {
			return w, false
		}
		if w.Lost != nil {
			if w.Off >= skip {
				st.cross(w.Lost)
			}
			continue
		}
		if skip > w.Off {
			n := skip - w.Off
			if n >= int64(len(w.Data)) {
				continue
			}
			w.Data, w.Off, w.RV, w.RV0, w.EvOff = w.Data[n:], skip, 0, 0, 0
		}
		if len(w.Data) > 0 {
			return w, true
		}
	}
}

// nonBlocking reports whether next returns without reading the file.
func (r *writeReader) nonBlocking() bool {
	if r.have {
		return true
	}
	_, ok := r.src.(*tape.PlanSource)
	return ok
}

// unread makes w the next write next returns.
func (r *writeReader) unread(w tape.Write) { r.held, r.have = w, true }

// sentEvents notes n watch events going out now; at is their recorded
// time on the timeline that maps capture time base to the request's
// arrival (at 0: no recorded time, no lateness).
func (st *streamer) sentEvents(n int, at, base int64, now time.Time) {
	m := st.s.met
	if m == nil || n <= 0 {
		return
	}
	m.Events(n)
	if at == 0 || st.s.speed == 0 {
		return
	}
	m.Late(n, max(now.Sub(st.deadline(at, base)), 0))
}

// wrote notes write w of a stream going out now (see sentEvents): the
// events whose data ends in it.
func (st *streamer) wrote(w *tape.Write, base int64, now time.Time) {
	if st.s.met == nil {
		return
	}
	n := int(w.Events)
	if w.Event {
		n = 1
	}
	st.sentEvents(n, w.At, base, now)
}
