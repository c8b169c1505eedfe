package fromtape

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/apiserver/openapi"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

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

// cursor names a cursor: a key and the class of request within it.
func cursor(key string, parts ...string) string {
	return key + "\x01" + strings.Join(parts, "\x01")
}

func (s *Server) pick(xs []*tape.Exchange, ck string) *tape.Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Pick(xs, ck, s.opts.Loop)
}

// recordedWatch answers with recorded watch x, whole or (resumed) from
// body offset skip on the timeline of capture time base; from is the
// served resourceVersion the client's view starts at.
func (s *Server) recordedWatch(r *http.Request, q tape.Query, x *tape.Exchange, skip, base int64, how, from string) *stream.Answer {
	fl, err := s.newFlow(r, q, x.Format, x, from)
	if err != nil {
		return fromworld.Refuse(q, err)
	}
	rt := &stream.Answer{How: how, Recorded: true, Exchange: x.ID, Status: responseStatus(x.Info.Response.Status), Serve: func(st *stream.Stream, r *http.Request) {
		s.serveExchange(st, r, x, fl, skip, base)
	}}
	if fl != nil && fl.w != nil {
		rt.Transcoded = fl.switched
	}
	return rt
}

func (s *Server) full(x *tape.Exchange) *stream.Answer {
	status := responseStatus(x.Info.Response.Status)
	return &stream.Answer{How: howRecorded, Recorded: true, Exchange: x.ID, Status: status, Serve: func(st *stream.Stream, r *http.Request) {
		s.serveExchange(st, r, x, nil, 0, 0)
	}}
}

func (s *Server) errorRoute(err error) *stream.Answer {
	return &stream.Answer{How: howError, Status: http.StatusInternalServerError, Serve: func(st *stream.Stream, r *http.Request) {
		st.Status(http.StatusInternalServerError, "InternalError", err.Error())
	}}
}

func (s *Server) emptyWatch(r *http.Request, q tape.Query, x *tape.Exchange) *stream.Answer {
	var fl *flow
	if x != nil {
		fl, _ = s.newFlow(r, q, x.Format, x, q.RawRV)
	}
	rt := &stream.Answer{How: howAfterLast, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		s.serveEmptyWatch(st, x, fl)
	}}
	if x != nil {
		rt.Recorded, rt.Exchange = true, x.ID
	}
	if fl != nil && fl.w != nil {
		rt.Transcoded = fl.switched
	}
	return rt
}

func (s *Server) routeWatch(r *http.Request, q tape.Query) *stream.Answer {
	cands := s.m.ByKey[q.Key]
	// A resourceVersion the replay served in place of a recorded one
	// stands for that one.
	rv := q.RV
	if s.store != nil && rv != "" {
		if rec, ok := s.store.Recorded(rv); ok {
			rv = rec
		} else if n, num := tape.RVNumber(rv); num && s.world.Handles(q.Path) {
			// Not one the recording holds (as served): a client's write's,
			// or a number the replay never served. The world's history
			// from there (or a 410), unless it is past everything served.
			if point, _ := tape.RVNumber(s.store.Point()); n <= point {
				return s.world.Watch(r, q)
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
				return s.world.Watch(r, q)
			}
			return &stream.Answer{How: howWatchList, Recorded: true, Exchange: lst.ID, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				if _, err := s.serveSynthWatchList(st, r, q, lst); err != nil {
					s.log.Warn("replay: cannot synthesize a streaming list", "list", lst.ID, "err", err)
					st.Status(http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
		if s.world.Handles(q.Path) {
			return s.world.Watch(r, q)
		}
	}
	if len(cands) == 0 {
		if s.world.Handles(q.Path) {
			return s.world.Watch(r, q)
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
		if s.world.Handles(q.Path) {
			return s.world.Watch(r, q) // the world's history from rv, or 410
		}
	}
	return &stream.Answer{How: howExpired, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
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

func (s *Server) routeOther(r *http.Request, q tape.Query) *stream.Answer {
	read := q.Method == http.MethodGet || q.Method == http.MethodHead
	if x := s.pickList(q.Key, q.Continue, q.RV, q.Accept); x != nil {
		return s.recordedRoute(r, q, x)
	}
	if q.Continue != "" && len(s.m.ByKey[q.Key]) > 0 {
		msg := "the provided continue parameter is too old to display a consistent list result (not in the replayed session)"
		return &stream.Answer{How: howExpired, Status: http.StatusGone, Serve: func(st *stream.Stream, r *http.Request) {
			st.Status(http.StatusGone, "Expired", msg)
		}}
	}
	if q.Method == http.MethodGet && discovery.IsCollection(q.Path) {
		ws := tape.Filter(s.m.ByKey[q.WatchKey()], func(x *tape.Exchange) bool { return x.Q.SendInitial && x.Format != 0 })
		if len(ws) > 0 && (s.store == nil || s.listFromWatchFits(q, ws[0])) {
			x := s.pick(ws, cursor(q.Key, "synth-list"))
			return &stream.Answer{How: howList, Recorded: true, Exchange: x.ID, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				if err := s.serveListFromWatch(st, x); err != nil {
					s.log.Warn("replay: cannot build a list from a streaming list", "watch", x.ID, "err", err)
					st.Status(http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
	}
	if read {
		if a, ok := s.world.Read(r, q); ok {
			return a
		}
	}
	if read && strings.HasPrefix(q.Path, "/openapi/") {
		if doc, ok := openapi.Doc(q.Path); ok {
			return openAPIRoute(doc, q.Accept)
		}
	}
	if q.Method == http.MethodGet || q.Method == http.MethodHead {
		if s.disc.Has(q.Path) {
			return &stream.Answer{How: howDiscovery, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				s.disc.Serve(st.ResponseWriter(), q.Path)
			}}
		}
	}
	return s.notFound(q)
}

// openAPIRoute answers with one of kube-apiserver's OpenAPI documents
// (package apiserver/openapi), JSON: a client that accepts only the
// protobuf form gets 406, after which client-go asks for JSON.
func openAPIRoute(doc []byte, accept string) *stream.Answer {
	if a := strings.ToLower(accept); a != "" && !strings.Contains(a, "json") && !strings.Contains(a, "*/*") {
		return stream.StatusAnswer(howNotAcceptable, http.StatusNotAcceptable, "NotAcceptable",
			"only the following media types are accepted: application/json")
	}
	return &stream.Answer{How: howOpenAPI, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		h := st.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		st.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			st.Send(doc)
		}
	}}
}

func (s *Server) notFound(q tape.Query) *stream.Answer {
	msg := fmt.Sprintf("the server could not find the requested resource (wtrace replay: no recorded exchange matches %s %s)", q.Method, q.Path)
	return &stream.Answer{How: howNotFound, Status: http.StatusNotFound, Serve: func(st *stream.Stream, r *http.Request) {
		st.Status(http.StatusNotFound, "NotFound", msg)
	}}
}
