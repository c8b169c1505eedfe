package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// ServeHTTP answers one request from the session (see the package doc for
// how requests are matched): it reads the request, asks the tape or the
// world for its answer (route), and hands it to a stream (package
// replay/internal/stream).
//
// A watch over HTTP/1.1 is streamed on a goroutine of its own, which takes
// the connection over from net/http and lets ServeHTTP return: net/http's
// goroutine, buffers and request state for the connection are released
// while the watch goes on, so that an idle watcher holds little more than
// its own state. That goroutine still counts as a handler for Close.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.ops.Owns(r.URL.Path) {
		s.ops.ServeHTTP(w, r) // the Server's own endpoints (health.go)
		return
	}
	if s.serveControl(w, r) { // the control endpoint (control.go)
		return
	}
	if s.pert != nil && s.pert.down() {
		panic(http.ErrAbortHandler) // restarting (perturbation restart): the connection is cut
	}
	if !s.handlers.enter() {
		stream.WriteStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", errClosed.Error())
		return
	}
	arrival := s.clock.Now()
	target := r.URL.RequestURI()
	req, err := apipath.Parse(r.Method, target) // the one reading of the request
	q := tape.QueryOf(req)
	if end := s.world.Begin(q, err != nil, arrival); end != nil {
		defer end()
	}
	s.met.Opened(req)

	var body []byte
	var a *stream.Answer
	switch {
	case err != nil:
		s.log.Warn("replay: bad request", "method", r.Method, "target", stream.Truncate(target), "err", err)
		a = stream.StatusAnswer(stream.HowError, http.StatusBadRequest, "BadRequest", err.Error())
	case apipath.IsWrite(r.Method) && r.Body != nil:
		body, err = io.ReadAll(io.LimitReader(r.Body, world.MaxBodyBytes+1))
		switch {
		case err != nil:
			a = stream.StatusAnswer(stream.HowError, http.StatusBadRequest, "BadRequest", "reading the request body: "+err.Error())
		case len(body) > world.MaxBodyBytes:
			a = stream.StatusAnswer(stream.HowError, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
				fmt.Sprintf("the request body is larger than %d bytes", world.MaxBodyBytes))
			body = nil
		}
	}
	tp := s.reqs.tap(r, body, arrival)
	if a == nil {
		q.Accept = r.Header.Get("Accept")
		a = s.route(r, q, body)
		s.logAnswer(r, q, target, a)
	}
	tp.answer(a)
	s.hub.Serve(&tapWriter{ResponseWriter: w, t: tp, method: r.Method}, r, a,
		stream.Request{Arrival: arrival, Timeout: q.Timeout, Watch: q.Watch, Target: target, Tap: tp},
		func(st *stream.Stream) { s.answered(st, a, tp, req, target) }, s.handlers.exit)
}

// logAnswer logs how request r (read as q) is answered.
func (s *Server) logAnswer(r *http.Request, q tape.Query, target string, a *stream.Answer) {
	attrs := []any{"method", r.Method, "target", stream.Truncate(target), "how", a.How}
	if a.Recorded {
		attrs = append(attrs, "exchange", a.Exchange)
	}
	attrs = append(attrs, "status", a.Status)
	if a.Transcoded != "" {
		attrs = append(attrs, "transcoded", a.Transcoded)
	}
	if a.How == stream.HowNotFound {
		attrs = append(attrs, "closest", s.tape.Closest(q, 3))
		s.log.Warn("replay: no recorded exchange matches", attrs...)
		return
	}
	s.log.Info("replay: request", attrs...)
}

// answered notes the end of answer a of stream st: in the request log
// (through its tap) and the metrics, and in the log at Debug.
func (s *Server) answered(st *stream.Stream, a *stream.Answer, tp *tap, req apipath.Request, target string) {
	tp.finish(a, st, st.EndsClean())
	s.met.Answered(req, tp.req.Status, a.How, tp.req.Transcoded)
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		attrs := []any{"method", st.Method(), "target", stream.Truncate(target), "bytes", st.Bytes(),
			"writes", st.Writes(), "duration", s.clock.Now().Sub(st.Arrival()), "stopped", st.Stopped()}
		if t := st.Transcoded(); t != "" && t != a.Transcoded {
			attrs = append(attrs, "transcoded", t)
		}
		s.log.Debug("replay: done", attrs...)
	}
}

// route asks the answerers for the answer to request r (read as q, with
// its body): a watch from a resourceVersion that is no number gets the
// apiserver's 500 whoever would serve it; a Live world answers every
// request of a resource it knows, the tape the rest; a replay that plays
// the tape asks it first (it asks the world for what it lacks).
func (s *Server) route(r *http.Request, q tape.Query, body []byte) *stream.Answer {
	if s.pert != nil {
		return s.pert.route(r, q, body, s.routeNext)
	}
	return s.routeNext(r, q, body)
}

// routeNext is route past a perturbed run's engine.
func (s *Server) routeNext(r *http.Request, q tape.Query, body []byte) *stream.Answer {
	if a, ok := s.tape.InvalidRV(q); ok {
		return a
	}
	if s.world.Live() {
		if a, ok := s.world.Route(r, q, body); ok {
			return a
		}
		return s.tape.Other(r, q, body)
	}
	return s.tape.Route(r, q)
}

// Handler returns the server's HTTP handler, behind its Host and path
// filter (Options.AcceptHosts, RejectPaths), to mount in a server of your
// own. Close still cancels the requests it is serving and waits for them.
func (s *Server) Handler() http.Handler { return s.guard(http.HandlerFunc(s.ServeHTTP)) }

// guard puts the filter in front of h: a refused request gets 403
// Forbidden, and a warning in the log saying why.
func (s *Server) guard(h http.Handler) http.Handler {
	filtered := s.filter.Wrap(h, s.log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ops.Owns(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		filtered.ServeHTTP(w, r)
	})
}
