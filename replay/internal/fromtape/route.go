package fromtape

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/apiserver/openapi"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// How the tape answers a request (the "how" of log lines, Answer.How);
// stream.HowError, HowNotFound and HowNotAcceptable name the failures,
// the world its own (world.How*: "synth-get", "synth-list",
// "synth-create", …, "synth-watch"; fromworld.HowRejected).
const (
	HowRecorded  = "recorded"         // a recorded exchange, whole
	HowResumed   = "resumed"          // a recorded watch after the event carrying the request's resourceVersion
	HowAfterLast = "after-last"       // watch past the session's last event: open, empty
	HowExpired   = "expired"          // resourceVersion or continue not in the session: 410
	HowWatchList = "synth-watch-list" // streaming list built from a recorded LIST + WATCH
	HowList      = "synth-list"       // LIST built from a recorded streaming list
	HowDiscovery = "synth-discovery"  // discovery document built from the session's resources
	HowOpenAPI   = "openapi"          // kube-apiserver v1.33's OpenAPI document (apiserver/openapi)
)

// cursor names a cursor: a key and the class of request within it.
func cursor(key string, parts ...string) string {
	return key + "\x01" + strings.Join(parts, "\x01")
}

func (a *Answerer) pick(xs []*tape.Exchange, ck string) *tape.Exchange {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m.Pick(xs, ck, a.opts.Loop)
}

// recordedWatch answers with recorded watch x, whole or (resumed) from
// body offset skip on the timeline of capture time base; from is the
// served resourceVersion the client's view starts at.
func (a *Answerer) recordedWatch(r *http.Request, q tape.Query, x *tape.Exchange, skip, base int64, how, from string) *stream.Answer {
	fl, err := a.newFlow(r, q, x.Format, x, from)
	if err != nil {
		return fromworld.Refuse(q, err)
	}
	rt := &stream.Answer{How: how, Recorded: true, Exchange: x.ID, Status: responseStatus(x.Info.Response.Status), Serve: func(st *stream.Stream, r *http.Request) {
		a.serveExchange(st, r, x, fl, skip, base)
	}}
	if fl != nil && fl.w != nil {
		rt.Transcoded = fl.switched
	}
	return rt
}

func (a *Answerer) full(x *tape.Exchange) *stream.Answer {
	status := responseStatus(x.Info.Response.Status)
	return &stream.Answer{How: HowRecorded, Recorded: true, Exchange: x.ID, Status: status, Serve: func(st *stream.Stream, r *http.Request) {
		a.serveExchange(st, r, x, nil, 0, 0)
	}}
}

func (a *Answerer) errorRoute(err error) *stream.Answer {
	return &stream.Answer{How: stream.HowError, Status: http.StatusInternalServerError, Serve: func(st *stream.Stream, r *http.Request) {
		st.Status(http.StatusInternalServerError, "InternalError", err.Error())
	}}
}

func (a *Answerer) emptyWatch(r *http.Request, q tape.Query, x *tape.Exchange) *stream.Answer {
	var fl *flow
	if x != nil {
		fl, _ = a.newFlow(r, q, x.Format, x, q.ResourceVersion)
	}
	rt := &stream.Answer{How: HowAfterLast, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		a.serveEmptyWatch(st, x, fl)
	}}
	if x != nil {
		rt.Recorded, rt.Exchange = true, x.ID
	}
	if fl != nil && fl.w != nil {
		rt.Transcoded = fl.switched
	}
	return rt
}

func (a *Answerer) routeWatch(r *http.Request, q tape.Query) *stream.Answer {
	cands := a.m.ByKey[q.Key]
	// A resourceVersion the replay served in place of a recorded one
	// stands for that one.
	rv := q.RV
	if a.store != nil && rv != "" {
		if rec, ok := a.store.Recorded(rv); ok {
			rv = rec
		} else if n, num := tape.RVNumber(rv); num && a.world.Handles(q.Path) {
			// Not one the recording holds (as served): a client's write's,
			// or a number the replay never served. The world's history
			// from there (or a 410), unless it is past everything served.
			if point, _ := tape.RVNumber(a.store.Point()); n <= point {
				return a.world.Watch(r, q)
			}
		}
	}
	if q.SendInitialEvents {
		if sie := tape.Filter(cands, func(x *tape.Exchange) bool { return x.Q.SendInitialEvents }); len(sie) > 0 {
			sie = tape.PreferAccepted(tape.Prefer(sie, func(x *tape.Exchange) bool { return x.Q.RV == rv }), q.Accept)
			x := a.pick(sie, cursor(q.Key, "sie", rv, sie[0].Media))
			return a.recordedWatch(r, q, x, 0, 0, HowRecorded, "")
		}
		if lst := a.pickList(q.ListKey(), "", rv, q.Accept); lst != nil && lst.Format == 0 && lst.Info.Response.Status == http.StatusOK {
			if a.store != nil && !a.synthWatchListFits(q, lst) {
				return a.world.Watch(r, q)
			}
			return &stream.Answer{How: HowWatchList, Recorded: true, Exchange: lst.ID, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				if _, err := a.serveSynthWatchList(st, r, q, lst); err != nil {
					a.log.Warn("replay: cannot synthesize a streaming list", "list", lst.ID, "err", err)
					st.Status(http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
		if a.world.Handles(q.Path) {
			return a.world.Watch(r, q)
		}
	}
	if len(cands) == 0 {
		if a.world.Handles(q.Path) {
			return a.world.Watch(r, q)
		}
		return stream.NotFound(q.Method, q.Path)
	}
	if rv == "" {
		xs := tape.Prefer(cands, func(x *tape.Exchange) bool { return x.Q.SendInitialEvents == q.SendInitialEvents })
		xs = tape.PreferAccepted(tape.Prefer(xs, func(x *tape.Exchange) bool { return x.Q.RV == "" }), q.Accept)
		x := a.pick(xs, cursor(q.Key, "watch", "", xs[0].Media))
		return a.recordedWatch(r, q, x, 0, 0, HowRecorded, "")
	}
	if exact := tape.Filter(cands, func(x *tape.Exchange) bool { return x.Q.RV == rv }); len(exact) > 0 {
		exact = tape.PreferAccepted(exact, q.Accept)
		x := a.pick(exact, cursor(q.Key, "watch", rv, exact[0].Media))
		return a.recordedWatch(r, q, x, 0, 0, HowRecorded, q.ResourceVersion)
	}
	rp, found, err := tape.FindResume(a.file, a.cache, tape.OrderAccepted(cands, q.Accept), rv)
	if err != nil {
		return a.errorRoute(err)
	}
	if found {
		if rp.Remain == 0 && !a.opts.Loop {
			return a.emptyWatch(r, q, rp.X)
		}
		return a.recordedWatch(r, q, rp.X, rp.Off, rp.Time, HowResumed, q.ResourceVersion)
	}
	if n, ok := tape.RVNumber(rv); ok {
		if newest, ok := tape.NewestRV(a.file, a.cache, cands); ok && n >= newest {
			xs := tape.PreferAccepted(cands, q.Accept)
			return a.emptyWatch(r, q, xs[len(xs)-1])
		}
		if a.world.Handles(q.Path) {
			return a.world.Watch(r, q) // the world's history from rv, or 410
		}
	}
	return &stream.Answer{How: HowExpired, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		a.serveExpired(st, q.ResourceVersion)
	}}
}

// pickList picks the LIST of key listKey a request with continue token cont
// and resourceVersion rv gets, advancing its cursor; nil if there is none.
func (a *Answerer) pickList(listKey, cont, rv, accept string) *tape.Exchange {
	cands := a.m.ByKey[listKey]
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
	return a.pick(xs, cursor(listKey, "get", cont, rv, xs[0].Media))
}

func (a *Answerer) routeOther(r *http.Request, q tape.Query) *stream.Answer {
	read := q.Method == http.MethodGet || q.Method == http.MethodHead
	if x := a.pickList(q.Key, q.Continue, q.RV, q.Accept); x != nil {
		return a.recordedRoute(r, q, x)
	}
	if q.Continue != "" && len(a.m.ByKey[q.Key]) > 0 {
		msg := "the provided continue parameter is too old to display a consistent list result (not in the replayed session)"
		return &stream.Answer{How: HowExpired, Status: http.StatusGone, Serve: func(st *stream.Stream, r *http.Request) {
			st.Status(http.StatusGone, "Expired", msg)
		}}
	}
	if q.Method == http.MethodGet && discovery.IsCollection(q.Path) {
		ws := tape.Filter(a.m.ByKey[q.WatchKey()], func(x *tape.Exchange) bool { return x.Q.SendInitialEvents && x.Format != 0 })
		if len(ws) > 0 && (a.store == nil || a.listFromWatchFits(q, ws[0])) {
			x := a.pick(ws, cursor(q.Key, "synth-list"))
			return &stream.Answer{How: HowList, Recorded: true, Exchange: x.ID, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				if err := a.serveListFromWatch(st, x); err != nil {
					a.log.Warn("replay: cannot build a list from a streaming list", "watch", x.ID, "err", err)
					st.Status(http.StatusInternalServerError, "InternalError", err.Error())
				}
			}}
		}
	}
	if read {
		if wa, ok := a.world.Read(r, q); ok {
			return wa
		}
	}
	if read && strings.HasPrefix(q.Path, "/openapi/") {
		if doc, ok := openapi.DocProtobuf(); ok && q.Path == "/openapi/v2" && strings.Contains(q.Accept, openapi.V2Protobuf) {
			return openAPIProtobufRoute(doc)
		}
		if doc, ok := openapi.Doc(q.Path); ok {
			return openAPIRoute(doc, q.Accept)
		}
	}
	if q.Method == http.MethodGet || q.Method == http.MethodHead {
		if a.disc.Has(q.Path) {
			return &stream.Answer{How: HowDiscovery, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
				a.disc.Serve(st.ResponseWriter(), r)
			}}
		}
	}
	return stream.NotFound(q.Method, q.Path)
}

// openAPIRoute answers with one of kube-apiserver's OpenAPI documents
// (package apiserver/openapi), JSON: a client that accepts only the
// protobuf form gets 406, after which client-go asks for JSON.
func openAPIRoute(doc []byte, accept string) *stream.Answer {
	if acc := strings.ToLower(accept); acc != "" && !strings.Contains(acc, "json") && !strings.Contains(acc, "*/*") {
		return stream.StatusAnswer(stream.HowNotAcceptable, http.StatusNotAcceptable, "NotAcceptable",
			"only the following media types are accepted: application/json")
	}
	return &stream.Answer{How: HowOpenAPI, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		h := st.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		st.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			st.Send(doc)
		}
	}}
}

// openAPIProtobufRoute answers with the v2 document in protobuf.
func openAPIProtobufRoute(doc []byte) *stream.Answer {
	return &stream.Answer{How: HowOpenAPI, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		h := st.Header()
		h.Set("Content-Type", openapi.V2ProtobufType)
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		st.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			st.Send(doc)
		}
	}}
}
