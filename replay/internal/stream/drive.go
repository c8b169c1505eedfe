package stream

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"
)

// Answer is how one request is answered: what the log and the request
// log say of it, and Serve, which writes it through the request's
// stream. The answerers build it; the stream runs it.
type Answer struct {
	// How names the answer in the log ("recorded", "synth-watch", …).
	How string
	// Recorded says Exchange is the recorded exchange served.
	Recorded bool
	Exchange int64
	// Status is the answer's status code, for the log (the request log
	// takes the one the head went out with).
	Status int
	// Transcoded says why the answer is not the recorded bytes as
	// recorded ("" if it is, or if it is synthesized).
	Transcoded string
	// Serve writes the answer; r is not used once the stream took the
	// connection over (see Begin).
	Serve func(st *Stream, r *http.Request)
}

// How an answer is named in the log (Answer.How) when no answerer
// answers it: the answerers name theirs.
const (
	HowError         = "error"          // the session could not be read, or a bad request
	HowNotFound      = "not-found"      // nothing matches: 404
	HowNotAcceptable = "not-acceptable" // no encoding the client accepts: 406
)

// NotFound answers with 404, as the apiserver does for what it does not
// serve.
func NotFound(method, path string) *Answer {
	msg := fmt.Sprintf("the server could not find the requested resource (wtrace replay: no recorded exchange matches %s %s)", method, path)
	return StatusAnswer(HowNotFound, http.StatusNotFound, "NotFound", msg)
}

// StatusAnswer answers with a failure Status (JSON).
func StatusAnswer(how string, code int, reason, msg string) *Answer {
	return &Answer{How: how, Status: code, Serve: func(st *Stream, r *http.Request) {
		WriteStatus(st.w, code, reason, msg)
	}}
}

// Request is what a stream knows of the request it answers.
type Request struct {
	// Arrival is when it arrived, on the hub's clock.
	Arrival time.Time
	// Timeout is the client's timeoutSeconds (0: none): a stream ends
	// cleanly then, in recorded time (scaled by the speed).
	Timeout time.Duration
	// Watch says the answer may be a stream that takes its connection
	// over (over HTTP/1.1, a GET without a body): it is then served on a
	// goroutine of its own (see Serve).
	Watch bool
	// Target is the request-target, for the log.
	Target string
	// Tap, if set, sees what a taken-over stream writes.
	Tap Tap
}

// A Tap sees what a stream that took its connection over writes there
// (net/http's writes it sees through the ResponseWriter it wraps): the
// request log and Out of the server.
type Tap interface {
	// TakenOver says the stream took its connection over; status is its
	// head's.
	TakenOver(status int)
	// Records reports whether RawWrite wants the bytes (a recording of
	// the run): such a stream never parks.
	Records() bool
	// RawWrite receives the bytes written on the connection; it may keep
	// them only during the call.
	RawWrite(bufs [][]byte)
}

// Serve answers request r with a, writing through w: on this goroutine,
// or, for a watch over HTTP/1.1 (Request.Watch, see mayTakeOver), on a
// goroutine of its own, which takes the connection over (see Begin) and
// lets Serve return: net/http's goroutine, buffers and request for the
// connection are freed while the watch goes on. ended is called once the
// answer is over (the stream ended, the request log may take it), exit
// once the stream is done with, on whichever goroutine served it; a
// stream that parks (see sched.go) calls them from where it ends.
//
// A panic before the hand-off goes on in Serve, as if the answer had run
// here; after it, the connection is the stream's own: the panic is
// logged and the connection closed, as net/http does for a handler.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, a *Answer, req Request, ended func(*Stream), exit func()) {
	handOff := req.Watch && mayTakeOver(r)
	var ctx context.Context
	var cancel context.CancelFunc
	var stop func() bool
	if handOff {
		// net/http cancels the request's context when ServeHTTP returns,
		// which is before the end of a stream that took the connection
		// over: until then its cancellation is followed (the client
		// left), from then on the connection's reader notices it.
		ctx, cancel = context.WithCancel(h.ctx)
		stop = context.AfterFunc(r.Context(), cancel)
	} else {
		ctx, cancel = context.WithCancel(r.Context())
		stop = context.AfterFunc(h.ctx, cancel)
	}
	st := h.newStream(ctx, cancel, w, r, req)
	st.answer, st.ended, st.exit = a, ended, exit
	if !handOff {
		defer exit()
		defer cancel()
		defer stop()
		a.Serve(st, r) // r is not used past this point (see takeOver)
		st.end()
		return
	}
	handed := make(chan struct{})
	st.handoff = func() {
		stop()
		close(handed)
	}
	st.handed = true
	go st.drive(func() { a.Serve(st, r) })
	<-handed
	if st.panicked != nil {
		panic(st.panicked) // net/http's: http.ErrAbortHandler aborts the response
	}
}

// drive runs f, the body of handed stream st or its rest, on this
// goroutine; then, unless the stream parked (the scheduler now owns it),
// ends it, and releases its place among the handlers.
func (st *Stream) drive(f func()) {
	parked := false
	defer func() {
		if parked {
			return
		}
		v := recover()
		defer st.exit()
		defer st.cancel()
		if st.handoff != nil {
			st.panicked = v
			st.handoff()
			return
		}
		if v == nil {
			return
		}
		if v != http.ErrAbortHandler {
			st.hub.log.Error("replay: panic serving a stream", "target", Truncate(st.target), "panic", v, "stack", string(debug.Stack()))
		}
		if st.own != nil {
			st.own.stopCancel()
			_ = st.own.conn.Close()
		}
	}()
	f()
	if st.parked {
		st.parked = false
		if st.park() {
			parked = true // st is the scheduler's: not to be touched here
			return
		}
		st.stopped = "cancelled" // the server closed
	}
	st.end()
}

// end ends the stream (see done) and tells its owner.
func (st *Stream) end() {
	if st.release != nil {
		st.release()
		st.release = nil
	}
	st.done()
	st.ended(st)
}

// mayTakeOver reports whether a streamed answer to r takes its connection
// over (see ownConn): a GET without a body over HTTP/1.1.
func mayTakeOver(r *http.Request) bool {
	return r != nil && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.Method == http.MethodGet && r.ContentLength <= 0
}

// Truncate cuts s, a request-target, to 512 bytes for a log line.
func Truncate(s string) string {
	const max = 512
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
