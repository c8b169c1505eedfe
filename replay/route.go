package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/apiserver/openapi"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// ServeHTTP answers one request from the session (see the package doc for
// how requests are matched).
//
// A watch over HTTP/1.1 is streamed on a goroutine of its own, which takes
// the connection over from net/http (see ownConn) and lets ServeHTTP
// return: net/http's goroutine, buffers and request state for the
// connection are released while the watch goes on, so that an idle
// watcher holds little more than its own state. That goroutine still
// counts as a handler for Close.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.serveOps(w, r) || s.serveControl(w, r) {
		return
	}
	if !s.enter() {
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", errClosed.Error())
		return
	}
	s.active.Add(1)
	arrival := s.clock.Now()
	target := r.URL.RequestURI()
	q, err := tape.ParseTarget(r.Method, target)
	watch := err == nil && q.Watch
	if err != nil || !heartbeat(q.Path) {
		s.act.begin(arrival, watch)
		if !watch {
			defer func() { s.act.end(s.clock.Now()) }()
		}
	}
	if s.env != nil && (watch || !s.store.Environment().Watches) {
		// The timeline starts when the clients start following the world
		// (their first watch), as the recorded ones did.
		s.env.begin(arrival)
	}
	s.met.Opened(r.Method, target)
	handOff := err == nil && q.Watch && mayTakeOver(r)
	var ctx context.Context
	var cancel context.CancelFunc
	var stop func() bool
	if handOff {
		// net/http cancels the request's context when ServeHTTP returns,
		// which is before the end of a stream that took the connection
		// over: until then its cancellation is followed (the client
		// left), from then on the connection's reader notices it.
		ctx, cancel = context.WithCancel(s.ctx)
		stop = context.AfterFunc(r.Context(), cancel)
	} else {
		ctx, cancel = context.WithCancel(r.Context())
		stop = context.AfterFunc(s.ctx, cancel)
	}

	var body []byte
	var rt route
	switch {
	case err != nil:
		s.log.Warn("replay: bad request", "method", r.Method, "target", truncate(target), "err", err)
		rt = statusRoute(howError, http.StatusBadRequest, "BadRequest", err.Error())
	case apipath.IsWrite(r.Method) && r.Body != nil:
		body, err = io.ReadAll(io.LimitReader(r.Body, world.MaxBodyBytes+1))
		switch {
		case err != nil:
			rt = statusRoute(howError, http.StatusBadRequest, "BadRequest", "reading the request body: "+err.Error())
		case len(body) > world.MaxBodyBytes:
			rt = statusRoute(howError, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
				fmt.Sprintf("the request body is larger than %d bytes", world.MaxBodyBytes))
			body = nil
		}
	}
	tp := s.newTap(r, body, arrival)
	if rt.serve == nil {
		q.Accept = r.Header.Get("Accept")
		rt = s.route(r, q, body)
		attrs := []any{"method", r.Method, "target", truncate(target), "how", rt.how}
		if rt.x != nil {
			attrs = append(attrs, "exchange", rt.x.ID)
		}
		attrs = append(attrs, "status", rt.status)
		if rt.transcoded != "" {
			attrs = append(attrs, "transcoded", rt.transcoded)
		}
		if rt.how == howNotFound {
			attrs = append(attrs, "closest", s.m.Closest(q, 3))
			s.log.Warn("replay: no recorded exchange matches", attrs...)
		} else {
			s.log.Info("replay: request", attrs...)
		}
	}
	st := s.newStreamer(ctx, cancel, &tapWriter{ResponseWriter: w, t: tp, method: r.Method}, r, q, arrival)
	st.tap, st.flow, st.target = tp, rt.flow, target
	if !handOff {
		defer s.handlers.Done()
		defer s.active.Add(-1)
		defer cancel()
		defer stop()
		s.answer(st, &rt, r, target)
		return
	}
	handed := make(chan struct{})
	st.handoff = func() {
		stop()
		close(handed)
	}
	go s.answerHanded(st, rt, r)
	<-handed
	if st.panicked != nil {
		panic(st.panicked) // net/http's: http.ErrAbortHandler aborts the response
	}
}

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

// answerEnd ends the stream and logs the request.
func (s *Server) answerEnd(st *streamer, rt *route, target string) {
	if st.release != nil {
		st.release()
		st.release = nil
	}
	st.done()
	st.tap.finish(rt, st, st.endsClean())
	s.met.Answered(st.method, target, st.tap.req.Status, rt.how, st.tap.req.Transcoded)
	if s.log.Enabled(st.ctx, slog.LevelDebug) {
		attrs := []any{"method", st.method, "target", truncate(target), "bytes", st.bytes,
			"writes", st.writes, "duration", s.clock.Now().Sub(st.arrival), "stopped", st.stopped}
		if st.flow != nil && st.flow.switched != "" && st.flow.switched != rt.transcoded {
			attrs = append(attrs, "transcoded", st.flow.switched)
		}
		if st.flow != nil && st.flow.writes > 0 {
			attrs = append(attrs, "clients-writes", st.flow.writes)
		}
		s.log.Debug("replay: done", attrs...)
	}
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

func truncate(s string) string {
	const max = 512
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// How a request was answered (the "how" of log lines).
const (
	howRecorded  = "recorded"         // a recorded exchange, whole
	howResumed   = "resumed"          // a recorded watch after the event carrying the request's resourceVersion
	howAfterLast = "after-last"       // watch past the session's last event: open, empty
	howExpired   = "expired"          // resourceVersion or continue not in the session: 410
	howWatchList = "synth-watch-list" // streaming list built from a recorded LIST + WATCH
	howList      = "synth-list"       // LIST built from a recorded streaming list
	howDiscovery = "synth-discovery"  // discovery document built from the session's resources
	howOpenAPI   = "openapi"          // kube-apiserver v1.33's OpenAPI document (apiserver/openapi)
	howNotFound  = "not-found"        // nothing matches: 404
	howError     = "error"            // the session could not be read, or a bad request
	// A write refused by WritesReject: 403.
	howRejected = "rejected"
	// No encoding the client accepts: 406.
	howNotAcceptable = "not-acceptable"
	// The store's answers (world.How*): "synth-get", "synth-list",
	// "synth-create", "synth-update", "synth-patch", "synth-apply",
	// "synth-delete", "synth-delete-collection", "synth-watch",
	// "synth-error".
)

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

// cursor names a cursor: a key and the class of request within it.
func cursor(key string, parts ...string) string {
	return key + "\x01" + strings.Join(parts, "\x01")
}

func (s *Server) pick(xs []*tape.Exchange, ck string) *tape.Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Pick(xs, ck, s.opts.Loop)
}

func (s *Server) route(r *http.Request, q tape.Query, body []byte) route {
	if rt, ok := s.invalidRVWatch(q); ok { // invalidrv.go
		return rt
	}
	if s.causal() {
		return s.routeWorld(r, q, body)
	}
	switch {
	case s.store != nil && apipath.IsWrite(q.Method):
		return s.routeWrite(r, q, body)
	case q.Watch:
		return s.routeWatch(r, q)
	}
	return s.routeOther(r, q)
}

// recordedWatch answers with recorded watch x, whole or (resumed) from
// body offset skip on the timeline of capture time base; from is the
// served resourceVersion the client's view starts at.
func (s *Server) recordedWatch(r *http.Request, q tape.Query, x *tape.Exchange, skip, base int64, how, from string) route {
	fl, err := s.newFlow(r, q, x.Format, x, from)
	if err != nil {
		return storeRoute(s.statusResponse(q, err))
	}
	rt := route{how: how, x: x, status: responseStatus(x.Info.Response.Status), flow: fl, serve: func(st *streamer, r *http.Request) {
		s.serveExchange(st, r, x, skip, base)
	}}
	if fl != nil && fl.w != nil {
		rt.transcoded = fl.switched
	}
	return rt
}

func (s *Server) full(x *tape.Exchange) route {
	status := responseStatus(x.Info.Response.Status)
	return route{how: howRecorded, x: x, status: status, serve: func(st *streamer, r *http.Request) {
		s.serveExchange(st, r, x, 0, 0)
	}}
}

func (s *Server) errorRoute(err error) route {
	return route{how: howError, status: http.StatusInternalServerError, serve: func(st *streamer, r *http.Request) {
		writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
	}}
}

func (s *Server) emptyWatch(r *http.Request, q tape.Query, x *tape.Exchange) route {
	var fl *flow
	if x != nil {
		fl, _ = s.newFlow(r, q, x.Format, x, q.RawRV)
	}
	rt := route{how: howAfterLast, x: x, status: http.StatusOK, flow: fl, serve: func(st *streamer, r *http.Request) {
		s.serveEmptyWatch(st, x)
	}}
	if fl != nil && fl.w != nil {
		rt.transcoded = fl.switched
	}
	return rt
}

// storeHandles reports whether the world answers requests for path.
func (s *Server) storeHandles(path string) bool {
	return s.store != nil && s.store.Handles(path)
}

func (s *Server) routeWatch(r *http.Request, q tape.Query) route {
	cands := s.m.ByKey[q.Key]
	// A resourceVersion the replay served in place of a recorded one
	// stands for that one.
	rv := q.RV
	if s.store != nil && rv != "" {
		if rec, ok := s.store.Recorded(rv); ok {
			rv = rec
		} else if n, num := tape.RVNumber(rv); num && s.storeHandles(q.Path) {
			// Not one the recording holds (as served): a client's write's,
			// or a number the replay never served. The world's history
			// from there (or a 410), unless it is past everything served.
			if point, _ := tape.RVNumber(s.store.Point()); n <= point {
				return s.storeWatchRoute(r, q)
			}
		}
	}
	if q.SendInitial {
		if sie := tape.Filter(cands, func(x *tape.Exchange) bool { return x.Q.SendInitial }); len(sie) > 0 {
			sie = tape.PreferAccepted(tape.Prefer(sie, func(x *tape.Exchange) bool { return x.Q.RV == rv }), q.Accept)
			x := s.pick(sie, cursor(q.Key, "sie", rv, sie[0].Media))
			return s.recordedWatch(r, q, x, 0, 0, howRecorded, "")
		}
		if lst := s.pickList(q.ListKey(), "", rv, q.Accept); lst != nil && lst.Format == 0 && lst.Info.Response.Status == http.StatusOK {
			if s.store != nil && !s.synthWatchListFits(q, lst) {
				return s.storeWatchRoute(r, q)
			}
			return route{how: howWatchList, x: lst, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				if _, err := s.serveSynthWatchList(st, r, q, lst); err != nil {
					s.log.Warn("replay: cannot synthesize a streaming list", "list", lst.ID, "err", err)
					writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
		if s.storeHandles(q.Path) {
			return s.storeWatchRoute(r, q)
		}
	}
	if len(cands) == 0 {
		if s.storeHandles(q.Path) {
			return s.storeWatchRoute(r, q)
		}
		return s.notFound(q)
	}
	if rv == "" {
		xs := tape.Prefer(cands, func(x *tape.Exchange) bool { return x.Q.SendInitial == q.SendInitial })
		xs = tape.PreferAccepted(tape.Prefer(xs, func(x *tape.Exchange) bool { return x.Q.RV == "" }), q.Accept)
		x := s.pick(xs, cursor(q.Key, "watch", "", xs[0].Media))
		return s.recordedWatch(r, q, x, 0, 0, howRecorded, "")
	}
	if exact := tape.Filter(cands, func(x *tape.Exchange) bool { return x.Q.RV == rv }); len(exact) > 0 {
		exact = tape.PreferAccepted(exact, q.Accept)
		x := s.pick(exact, cursor(q.Key, "watch", rv, exact[0].Media))
		return s.recordedWatch(r, q, x, 0, 0, howRecorded, q.RawRV)
	}
	rp, found, err := tape.FindResume(s.file, s.cache, tape.OrderAccepted(cands, q.Accept), rv)
	if err != nil {
		return s.errorRoute(err)
	}
	if found {
		if rp.Remain == 0 && !s.opts.Loop {
			return s.emptyWatch(r, q, rp.X)
		}
		return s.recordedWatch(r, q, rp.X, rp.Off, rp.Time, howResumed, q.RawRV)
	}
	if n, ok := tape.RVNumber(rv); ok {
		if newest, ok := tape.NewestRV(s.file, s.cache, cands); ok && n >= newest {
			xs := tape.PreferAccepted(cands, q.Accept)
			return s.emptyWatch(r, q, xs[len(xs)-1])
		}
		if s.storeHandles(q.Path) {
			return s.storeWatchRoute(r, q) // the world's history from rv, or 410
		}
	}
	return route{how: howExpired, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
		s.serveExpired(st, q.RawRV)
	}}
}

// pickList picks the LIST of key listKey a request with continue token cont
// and resourceVersion rv gets, advancing its cursor; nil if there is none.
func (s *Server) pickList(listKey, cont, rv, accept string) *tape.Exchange {
	cands := s.m.ByKey[listKey]
	if len(cands) == 0 {
		return nil
	}
	var xs []*tape.Exchange
	if cont != "" {
		xs = tape.Filter(cands, func(x *tape.Exchange) bool { return x.Q.Continue == cont })
		if len(xs) == 0 {
			return nil
		}
	} else {
		xs = tape.Prefer(cands, func(x *tape.Exchange) bool { return x.Q.Continue == "" })
	}
	xs = tape.PreferAccepted(tape.Prefer(xs, func(x *tape.Exchange) bool { return x.Q.RV == rv }), accept)
	return s.pick(xs, cursor(listKey, "get", cont, rv, xs[0].Media))
}

func (s *Server) routeOther(r *http.Request, q tape.Query) route {
	read := q.Method == http.MethodGet || q.Method == http.MethodHead
	if x := s.pickList(q.Key, q.Continue, q.RV, q.Accept); x != nil {
		return s.recordedRoute(r, q, x)
	}
	if q.Continue != "" && len(s.m.ByKey[q.Key]) > 0 {
		msg := "the provided continue parameter is too old to display a consistent list result (not in the replayed session)"
		return route{how: howExpired, status: http.StatusGone, serve: func(st *streamer, r *http.Request) {
			writeStatus(st.w, http.StatusGone, "Expired", msg)
		}}
	}
	if q.Method == http.MethodGet && discovery.IsCollection(q.Path) {
		ws := tape.Filter(s.m.ByKey[q.WatchKey()], func(x *tape.Exchange) bool { return x.Q.SendInitial && x.Format != 0 })
		if len(ws) > 0 && (s.store == nil || s.listFromWatchFits(q, ws[0])) {
			x := s.pick(ws, cursor(q.Key, "synth-list"))
			return route{how: howList, x: x, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				if err := s.serveListFromWatch(st, x); err != nil {
					s.log.Warn("replay: cannot build a list from a streaming list", "watch", x.ID, "err", err)
					writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
	}
	if read && s.storeHandles(q.Path) {
		if resp, ok := s.store.Serve(stateRequest(r, q, nil)); ok {
			return storeRoute(resp)
		}
	}
	if read && strings.HasPrefix(q.Path, "/openapi/") {
		if doc, ok := openapi.Doc(q.Path); ok {
			return openAPIRoute(doc, q.Accept)
		}
	}
	if q.Method == http.MethodGet || q.Method == http.MethodHead {
		if s.disc.Has(q.Path) {
			return route{how: howDiscovery, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				s.disc.Serve(st.w, r)
			}}
		}
	}
	return s.notFound(q)
}

// openAPIRoute answers with one of kube-apiserver's OpenAPI documents
// (package apiserver/openapi), JSON: a client that accepts only the
// protobuf form gets 406, after which client-go asks for JSON.
func openAPIRoute(doc []byte, accept string) route {
	if a := strings.ToLower(accept); a != "" && !strings.Contains(a, "json") && !strings.Contains(a, "*/*") {
		return statusRoute(howNotAcceptable, http.StatusNotAcceptable, "NotAcceptable",
			"only the following media types are accepted: application/json")
	}
	return route{how: howOpenAPI, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
		h := st.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		st.w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			st.send(doc)
		}
	}}
}

func (s *Server) notFound(q tape.Query) route {
	msg := fmt.Sprintf("the server could not find the requested resource (wtrace replay: no recorded exchange matches %s %s)", q.Method, q.Path)
	return route{how: howNotFound, status: http.StatusNotFound, serve: func(st *streamer, r *http.Request) {
		writeStatus(st.w, http.StatusNotFound, "NotFound", msg)
	}}
}
