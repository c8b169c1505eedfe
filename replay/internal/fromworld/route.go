package fromworld

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"errors"
	"net/http"
	"strconv"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// routeWorld decides how a replay that answers writes answers a request:
// from the world, whatever the recording holds, for every resource it
// knows; the rest (discovery, /version, paths that are no resource) as the
// recording has it or as synthesized.
func (a *Answerer) routeWorld(r *http.Request, q tape.Query, body []byte) (*stream.Answer, bool) {
	if a.Handles(q.Path) || apipath.IsWrite(q.Method) {
		if q.Watch && q.Method == http.MethodGet {
			return a.storeWatchRoute(r, q), true
		}
		if apipath.IsWrite(q.Method) {
			// The write reaches the world after the apiserver's latency,
			// as it reaches etcd: its answer and its watch events come
			// together, after it.
			a.writeLatency(a.clock.Now(), r.Context().Done())
		}
		if resp, ok := a.store.Serve(stateRequest(r, q, body)); ok {
			if resp.Changed {
				a.deliv.wait(a.store.LastRV(), r.Context().Done())
			}
			return Respond(resp), true
		}
	}
	if apipath.IsWrite(q.Method) {
		return a.Unserved(r, q, body)
	}
	return nil, false
}

// Unserved answers a request of a resource (or a subresource the world
// does not model) that the recorded server does not serve with its 404;
// false for a path that names no resource.
func (a *Answerer) Unserved(r *http.Request, q tape.Query, body []byte) (*stream.Answer, bool) {
	if t, ok := world.ParsePath(q.Path); !ok || t.Resource.Resource == "" || a.store == nil {
		return nil, false
	}
	return Respond(a.store.Unserved(stateRequest(r, q, body))), true
}

// stateRequest is the store's view of a request.
func stateRequest(r *http.Request, q tape.Query, body []byte) *world.Request {
	return &world.Request{Method: q.Method, Path: r.URL.Path, Query: q.Query, Header: r.Header, Body: body}
}

// Respond answers with a response of the store.
func Respond(resp *world.Response) *stream.Answer {
	rt := &stream.Answer{How: resp.How, Status: resp.Code, Serve: func(st *stream.Stream, r *http.Request) {
		h := st.Header()
		h.Set("Content-Type", resp.ContentType)
		h.Set("Cache-Control", "no-cache, private")
		for _, w := range resp.Warnings {
			h.Add("Warning", world.WarningHeader(w))
		}
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
		st.WriteHeader(resp.Code)
		if r.Method != http.MethodHead {
			st.Send(resp.Body)
		}
	}}
	if resp.Transcoded && resp.How == world.HowGet {
		rt.Transcoded = "yes"
	}
	return rt
}

// rejectRoute answers a write with 403 Forbidden, worded as the
// apiserver's authorizer refusal.
func (a *Answerer) rejectRoute(r *http.Request, q tape.Query) *stream.Answer {
	gr := schema.GroupResource{}
	name := ""
	if t, ok := world.ParsePath(q.Path); ok {
		gr, name = t.Resource.GroupResource(), t.Name
	}
	err := apierrors.NewForbidden(gr, name, errors.New("wtrace replay is read-only (--writes reject)"))
	st := codec.StatusOf(err)
	m := codec.StatusMedia(r.Header.Get("Accept"))
	body := codec.StatusBody(m, st)
	return &stream.Answer{How: HowRejected, Status: http.StatusForbidden, Serve: func(sr *stream.Stream, r *http.Request) {
		h := sr.Header()
		h.Set("Content-Type", m.ContentType(codec.TargetObject))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		sr.WriteHeader(http.StatusForbidden)
		sr.Send(body)
	}}
}

// Refuse answers with err's Status (a negotiation's 406, a bad
// parameter's 400), in the encoding the client's Accept header asks for.
func Refuse(q tape.Query, err error) *stream.Answer {
	st := codec.StatusOf(err)
	m := codec.StatusMedia(q.Accept)
	return Respond(&world.Response{Code: int(st.Code), ContentType: m.ContentType(codec.TargetObject),
		Body: codec.StatusBody(m, st), How: stream.HowNotAcceptable})
}
