package stream

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/internal/pace"
)

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

// End is how a served response ends.
type End int

const (
	EndClean End = iota // terminating chunk / END_STREAM
	EndAbort            // connection closed without the terminating chunk (FIN)
	EndReset            // connection reset (RST)
	EndHold             // stay open until timeoutSeconds, the client leaves, or Close
)

func (k End) String() string {
	switch k {
	case EndAbort:
		return "abort"
	case EndReset:
		return "reset"
	case EndHold:
		return "hold"
	}
	return "clean"
}

// Stream writes one response with its timing. It belongs to the
// goroutine that serves its request (the scheduler's while it is parked,
// see sched.go); nothing on its write path is shared with other requests
// except immutable data.
type Stream struct {
	hub       *Hub
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
	timer     pace.Timer
	shift     time.Duration // added to every deadline (loop passes)
	batch     [][]byte
	exts      []string     // the recorded extensions of batch's chunks, when Play sets them
	recEnd    *formats.End // the recorded end, for its last-chunk extensions and trailers
	bytes     int64
	writes    int64
	stopped   string         // why the stream stopped early ("" if it did not)
	closed    bool           // the connection was already closed or reset (abort)
	crossed   []fmt.Stringer // losses of the session's damage this stream went past
	// transcoded says why a stream that began as recorded went
	// otherwise ("rv": resourceVersions rewritten), for the log.
	transcoded string
	tap        Tap // the request log's and Out's view of the response
	answer     *Answer
	ended      func(*Stream) // the owner's end of the answer (see Hub.Serve)
	exit       func()
	// handoff, when the request is served on a goroutine of its own (see
	// Hub.Serve), lets Serve return once the stream took the connection
	// over; nil otherwise.
	handoff func()
	// panicked is what a stream's goroutine recovered before the
	// hand-off, for Serve to panic with.
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
	rest   func()
	// release, if set, is called once when the stream ends (its rest
	// outlives Serve).
	release func()
	parked  bool
	parkAt  time.Time // zero: no time (only the client leaving or Close)
	inSched bool
	needGo  bool
	slot    pace.Slot
}

func (h *Hub) newStream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request, req Request) *Stream {
	st := &Stream{hub: h, w: w, r: r, method: r.Method, target: req.Target, tap: req.Tap,
		rc: http.NewResponseController(w), ctx: ctx, cancel: cancel, arrival: req.Arrival}
	if req.Timeout > 0 {
		// timeoutSeconds is the client's view of the recorded time: it
		// scales with the speed, as the recording's own ends do (as fast
		// as possible, Speed 0, keeps it in real time).
		st.timeoutAt = req.Arrival.Add(req.Timeout)
		if h.speed > 0 {
			st.timeoutAt = req.Arrival.Add(h.Scale(int64(req.Timeout)))
		}
	}
	return st
}

// Deadline is when a byte recorded at capture time t goes out, on a timeline
// whose capture time base maps to the request's arrival.
func (st *Stream) Deadline(t, base int64) time.Time {
	return st.arrival.Add(st.shift + st.hub.Scale(t-base))
}

// waitUntil waits for the clock to reach t (zero: forever, for hold). It
// returns false if the client's timeoutSeconds passes first (stopped =
// "timeout") or the request is cancelled (stopped = "cancelled"). On the
// scheduler's path (mayPark) it does not wait: it parks the stream
// (parked set, stopped "") and returns false; the caller returns at once,
// leaving its state such that calling st.rest again carries on.
func (st *Stream) WaitUntil(t time.Time) bool {
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
	} else if d := limit.Sub(st.hub.clock.Now()); d > 0 {
		if st.timer == nil {
			st.timer = st.hub.clock.NewTimer(d)
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
func (st *Stream) Hold() {
	if st.mayPark() {
		st.WaitUntil(time.Time{}) // parks, or stops at timeoutAt
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
	st.WaitUntil(st.timeoutAt.Add(time.Hour)) // stops at timeoutAt
}

// begin sends the head of a streamed (watch) response now, as the
// apiserver does: over HTTP/1.1 on a connection the stream takes over (see
// ownConn), otherwise through net/http.
func (st *Stream) Begin(hd *Head) bool {
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
func (st *Stream) Send(p []byte) bool {
	return st.SendBatch([][]byte{p})
}

// sendBatch sends each element of batch as one chunk (HTTP/1.1) or DATA
// frame (HTTP/2): on a taken-over connection all in one system call,
// otherwise one write and flush each (the response buffer is empty before
// each write, so each flush is one chunk). A client that cannot take a
// write within the write timeout is dropped.
func (st *Stream) SendBatch(batch [][]byte) bool {
	if st.own != nil {
		st.writes += int64(len(batch))
		return st.ownSend(batch)
	}
	for _, p := range batch {
		if len(p) == 0 {
			continue
		}
		if st.hub.writeTimeout > 0 {
			_ = st.rc.SetWriteDeadline(time.Now().Add(st.hub.writeTimeout))
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

// finish ends the response as kind says, at capture time endAt on the
// timeline of base.
func (st *Stream) Finish(kind End, endAt, base int64) {
	if kind == EndHold || st.hub.hold {
		st.Hold()
		return
	}
	if !st.WaitUntil(st.Deadline(endAt, base)) {
		return
	}
	switch kind {
	case EndAbort:
		st.Abort(false)
	case EndReset:
		st.Abort(true)
	}
}

// done ends a taken-over stream when its handler is about to return: with
// the terminating chunk if it ended cleanly (as recorded, or at the
// client's timeoutSeconds), else by closing the connection. A stream that
// crossed data lost to damage is cut instead of ending cleanly (see cut).
func (st *Stream) done() {
	clean := st.EndsClean()
	if clean && len(st.crossed) > 0 && !st.closed {
		st.cut()
		return
	}
	if st.own == nil && st.stopped == "" && st.recEnd != nil {
		// net/http writes the terminating chunk (HTTP/1.1) or the
		// trailing HEADERS (HTTP/2) with these when the handler returns.
		for _, f := range st.recEnd.Trailer {
			if !f.Redacted && validFieldName(f.Name) && validFieldValue(f.Value) {
				st.w.Header().Add(http.TrailerPrefix+f.Name, f.Value)
			}
		}
	}
	if st.own == nil || st.closed {
		return
	}
	st.closed = true
	st.ownClose(clean, false)
}

// abort ends the response without its terminating chunk: the connection is
// closed (FIN), or reset (RST) with SO_LINGER 0. Over HTTP/2 (which cannot
// be hijacked) the stream is reset with RST_STREAM through
// http.ErrAbortHandler, which net/http recovers without logging.
func (st *Stream) Abort(reset bool) {
	if st.own != nil {
		st.closed = true
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

// sentEvents notes n watch events going out now; at is their recorded
// time on the timeline that maps capture time base to the request's
// arrival (at 0: no recorded time, no lateness).
func (st *Stream) sentEvents(n int, at, base int64, now time.Time) {
	m := st.hub.met
	if m == nil || n <= 0 {
		return
	}
	m.Events(n)
	if at == 0 || st.hub.speed == 0 {
		return
	}
	m.Late(n, max(now.Sub(st.Deadline(at, base)), 0))
}

// waitOr waits for the clock to reach t, or for wake. woke says wake came
// first; ok is false when the client's timeoutSeconds passed (stopped =
// "timeout") or the request was cancelled (stopped = "cancelled").
func (st *Stream) waitOr(t time.Time, wake <-chan struct{}) (woke, ok bool) {
	limit := t
	timeout := false
	if !st.timeoutAt.IsZero() && !st.timeoutAt.After(t) {
		limit, timeout = st.timeoutAt, true
	}
	if d := limit.Sub(st.hub.clock.Now()); d > 0 {
		if st.timer == nil {
			st.timer = st.hub.clock.NewTimer(d)
		} else {
			st.timer.Reset(d)
		}
		select {
		case <-st.timer.C():
		case <-wake:
			st.timer.Stop()
			return true, true
		case <-st.ctx.Done():
			st.timer.Stop()
			st.stopped = "cancelled"
			return false, false
		}
	} else if st.ctx.Err() != nil {
		st.stopped = "cancelled"
		return false, false
	}
	if timeout {
		st.stopped = "timeout"
		return false, false
	}
	return false, true
}

// cross notes that the stream goes past loss l, with a warning the first
// time.
func (st *Stream) Cross(l fmt.Stringer) {
	for _, c := range st.crossed {
		if c == l {
			return
		}
	}
	st.crossed = append(st.crossed, l)
	st.hub.log.Warn("replay: stream crosses data lost to session damage; it will end cut", "loss", l.String())
}

// cut ends a stream that crossed data lost to damage, when it would have
// ended cleanly: without its terminating chunk (HTTP/1.1: the connection
// is closed) or with RST_STREAM (HTTP/2), as a stream the network cut, so
// that no client takes what it got for the complete recording.
func (st *Stream) cut() {
	st.hub.log.Warn("replay: stream cut: it crossed data lost to session damage",
		"method", st.method, "target", Truncate(st.target), "losses", len(st.crossed))
	st.Abort(false)
}

// ValidField reports whether a header field can go on the wire as it
// is: its name an RFC 9110 §5.1 token, its value without CR, LF or NUL.
func ValidField(name, value string) bool { return validFieldName(name) && validFieldValue(value) }
