package stream

import (
	"net/http"
	"runtime/debug"

	"github.com/wtrace/wtrace/replay/internal/tape"
)

// answerHanded is answer on a goroutine of its own (see ServeHTTP). A
// panic before the hand-off goes on in ServeHTTP, as if answer had run
// there; after it, the connection is the stream's own: it is logged and
// the connection closed, as net/http does for a handler. A stream that
// parks (see sched.go) leaves this goroutine and is carried on by the
// scheduler.
func (s *Server) answerHanded(st *streamer, rt route, r *http.Request) {
	st.handed, st.rt = true, &rt
	s.drive(st, func() { rt.serve(st, r) })
}

// drive runs f, the body of handed stream st or its rest, on this
// goroutine; then, unless the stream parked (the scheduler now owns it),
// ends it as answer does, and releases its place among the handlers.
func (s *Server) drive(st *streamer, f func()) {
	parked := false
	defer func() {
		if parked {
			return
		}
		v := recover()
		defer s.handlers.Done()
		defer s.active.Add(-1)
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
			s.log.Error("replay: panic serving a stream", "target", truncate(st.target), "panic", v, "stack", string(debug.Stack()))
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
	s.answerEnd(st, st.rt, st.target)
}

// answer serves route rt through streamer st, ends the stream and logs
// the request.
func (s *Server) answer(st *streamer, rt *route, r *http.Request, target string) {
	rt.serve(st, r) // r is not used past this point (see takeOver)
	s.answerEnd(st, rt, target)
}

// mayTakeOver reports whether a streamed answer to r takes its connection
// over (see ownConn): a GET without a body over HTTP/1.1.
func mayTakeOver(r *http.Request) bool {
	return r != nil && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.Method == http.MethodGet && r.ContentLength <= 0
}

// statusRoute answers with a failure Status.
func statusRoute(how string, code int, reason, msg string) route {
	return route{how: how, status: code, serve: func(st *streamer, r *http.Request) {
		writeStatus(st.w, code, reason, msg)
	}}
}

// route is how one request will be answered.
type route struct {
	how    string
	x      *tape.Exchange
	status int
	serve  func(st *streamer, r *http.Request)
	// transcoded says why the answer is not the recorded bytes as
	// recorded ("" if it is, or if it is synthesized; see Request).
	transcoded string
	flow       *flow // a recorded watch served with the world
}
