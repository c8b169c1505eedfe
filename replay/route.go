package replay

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// ServeHTTP answers one request from the session (see the package doc for
// how requests are matched).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", errClosed.Error())
		return
	}
	defer s.handlers.Done()
	s.active.Add(1)
	defer s.active.Add(-1)
	arrival := s.clock.Now()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	target := r.URL.RequestURI()
	q, err := parseTarget(r.Method, target)
	if err != nil {
		s.log.Warn("replay: bad request", "method", r.Method, "target", truncate(target), "err", err)
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	q.accept = r.Header.Get("Accept")
	rt := s.route(r, q)
	attrs := []any{"method", r.Method, "target", truncate(target), "how", rt.how}
	if rt.x != nil {
		attrs = append(attrs, "exchange", rt.x.id)
	}
	attrs = append(attrs, "status", rt.status)
	if rt.how == howNotFound {
		attrs = append(attrs, "closest", s.m.closest(q, 3))
		s.log.Warn("replay: no recorded exchange matches", attrs...)
	} else {
		s.log.Info("replay: request", attrs...)
	}
	st := s.newStreamer(ctx, cancel, w, r, q, arrival)
	rt.serve(st, r)
	st.done()
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("replay: done", "method", r.Method, "target", truncate(target), "bytes", st.bytes,
			"writes", st.writes, "duration", s.clock.Now().Sub(arrival), "stopped", st.stopped)
	}
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
	howNotFound  = "not-found"        // nothing matches: 404
	howError     = "error"            // the session could not be read
)

// route is how one request will be answered.
type route struct {
	how    string
	x      *recorded
	status int
	serve  func(st *streamer, r *http.Request)
}

// cursor names a cursor: a key and the class of request within it.
func cursor(key string, parts ...string) string {
	return key + "\x01" + strings.Join(parts, "\x01")
}

func (s *Server) pick(xs []*recorded, ck string) *recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.pick(xs, ck, s.opts.Loop)
}

func (s *Server) route(r *http.Request, q query) route {
	if q.watch {
		return s.routeWatch(q)
	}
	return s.routeOther(r, q)
}

func (s *Server) full(x *recorded) route {
	status := responseStatus(x.info.Response.Status)
	return route{how: howRecorded, x: x, status: status, serve: func(st *streamer, r *http.Request) {
		s.serveExchange(st, r, x, 0, 0)
	}}
}

func (s *Server) errorRoute(err error) route {
	return route{how: howError, status: http.StatusInternalServerError, serve: func(st *streamer, r *http.Request) {
		writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
	}}
}

func (s *Server) emptyWatch(x *recorded) route {
	return route{how: howAfterLast, x: x, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
		s.serveEmptyWatch(st, x)
	}}
}

func (s *Server) routeWatch(q query) route {
	cands := s.m.byKey[q.key]
	if q.sie {
		if sie := filter(cands, func(x *recorded) bool { return x.q.sie }); len(sie) > 0 {
			sie = preferAccepted(prefer(sie, func(x *recorded) bool { return x.q.rv == q.rv }), q.accept)
			return s.full(s.pick(sie, cursor(q.key, "sie", q.rv, sie[0].media)))
		}
		if lst := s.pickList(q.listKey(), "", q.rv, q.accept); lst != nil && lst.format == 0 && lst.info.Response.Status == http.StatusOK {
			return route{how: howWatchList, x: lst, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				if _, err := s.serveSynthWatchList(st, q, lst); err != nil {
					s.log.Warn("replay: cannot synthesize a streaming list", "list", lst.id, "err", err)
					writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
	}
	if len(cands) == 0 {
		return s.notFound(q)
	}
	if q.rv == "" {
		xs := prefer(cands, func(x *recorded) bool { return x.q.sie == q.sie })
		xs = preferAccepted(prefer(xs, func(x *recorded) bool { return x.q.rv == "" }), q.accept)
		return s.full(s.pick(xs, cursor(q.key, "watch", "", xs[0].media)))
	}
	if exact := filter(cands, func(x *recorded) bool { return x.q.rv == q.rv }); len(exact) > 0 {
		exact = preferAccepted(exact, q.accept)
		return s.full(s.pick(exact, cursor(q.key, "watch", q.rv, exact[0].media)))
	}
	rp, found, err := s.findResume(orderAccepted(cands, q.accept), q.rv)
	if err != nil {
		return s.errorRoute(err)
	}
	if found {
		if rp.remain == 0 && !s.opts.Loop {
			return s.emptyWatch(rp.x)
		}
		return route{how: howResumed, x: rp.x, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
			s.serveExchange(st, r, rp.x, rp.off, rp.time)
		}}
	}
	if n, ok := rvNumber(q.rv); ok {
		if newest, ok := s.newestRV(cands); ok && n >= newest {
			xs := preferAccepted(cands, q.accept)
			return s.emptyWatch(xs[len(xs)-1])
		}
	}
	return route{how: howExpired, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
		s.serveExpired(st, q.rawRV)
	}}
}

// pickList picks the LIST of key listKey a request with continue token cont
// and resourceVersion rv gets, advancing its cursor; nil if there is none.
func (s *Server) pickList(listKey, cont, rv, accept string) *recorded {
	cands := s.m.byKey[listKey]
	if len(cands) == 0 {
		return nil
	}
	var xs []*recorded
	if cont != "" {
		xs = filter(cands, func(x *recorded) bool { return x.q.cont == cont })
		if len(xs) == 0 {
			return nil
		}
	} else {
		xs = prefer(cands, func(x *recorded) bool { return x.q.cont == "" })
	}
	xs = preferAccepted(prefer(xs, func(x *recorded) bool { return x.q.rv == rv }), accept)
	return s.pick(xs, cursor(listKey, "get", cont, rv, xs[0].media))
}

func (s *Server) routeOther(r *http.Request, q query) route {
	if x := s.pickList(q.key, q.cont, q.rv, q.accept); x != nil {
		return s.full(x)
	}
	if q.cont != "" && len(s.m.byKey[q.key]) > 0 {
		msg := "the provided continue parameter is too old to display a consistent list result (not in the replayed session)"
		return route{how: howExpired, status: http.StatusGone, serve: func(st *streamer, r *http.Request) {
			writeStatus(st.w, http.StatusGone, "Expired", msg)
		}}
	}
	if q.method == http.MethodGet && isCollection(q.path) {
		ws := filter(s.m.byKey[q.watchKey()], func(x *recorded) bool { return x.q.sie && x.format != 0 })
		if len(ws) > 0 {
			x := s.pick(ws, cursor(q.key, "synth-list"))
			return route{how: howList, x: x, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				if err := s.serveListFromWatch(st, x); err != nil {
					s.log.Warn("replay: cannot build a list from a streaming list", "watch", x.id, "err", err)
					writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
	}
	if q.method == http.MethodGet || q.method == http.MethodHead {
		if _, ok := s.disc.docs[strings.TrimSuffix(q.path, "/")]; ok {
			return route{how: howDiscovery, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
				s.disc.serve(st.w, q.path)
			}}
		}
	}
	return s.notFound(q)
}

func (s *Server) notFound(q query) route {
	msg := fmt.Sprintf("the server could not find the requested resource (wtrace replay: no recorded exchange matches %s %s)", q.method, q.path)
	return route{how: howNotFound, status: http.StatusNotFound, serve: func(st *streamer, r *http.Request) {
		writeStatus(st.w, http.StatusNotFound, "NotFound", msg)
	}}
}
