package fromtape

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// Options configure an Answerer (see replay.Options, whose fields of the
// same names they are). The zero value plays each stream once, ends it
// as recorded, reproduces the recorded chunks and logs nothing.
type Options struct {
	Loop        bool  // a watch that reaches its end starts again; cursors wrap around
	EventChunks bool  // one chunk per event (and per stored body piece)
	CacheBytes  int64 // the budget of the decoded exchanges shared by every client (> 0)
	Logger      *slog.Logger
}

// Answerer answers requests from the recording, as the tape it is: which
// recorded exchange answers a request (the matcher's keys, cursors and
// Accept preference), resumed watches, streaming lists and lists
// synthesized from each other, recorded bodies and streams rewritten or
// transcoded for a world's point, discovery and OpenAPI documents, and
// what damage lost. What the recording cannot answer it asks the world
// for (package replay/internal/fromworld). Safe for concurrent use.
type Answerer struct {
	file   *formats.File
	m      *tape.Matcher
	cache  *tape.Cache
	rec    *recording
	losses []*tape.Loss
	disc   *discovery.Docs
	store  *world.Store // the world the recording's answers are rewritten for; nil without one
	world  *fromworld.Answerer
	hub    *stream.Hub
	clock  pace.Clock
	speed  float64
	log    *slog.Logger
	opts   Options
	mu     sync.Mutex // guards the matcher's cursors
}

// New returns the Answerer of session f (mids: its
// world.MidstreamTargets) over store (nil: no world) and the world's
// answerer, whose streams go through hub. It checks the checksum of every
// block of f to find what damage lost (Losses).
func New(f *formats.File, mids map[int64]string, store *world.Store, w *fromworld.Answerer, hub *stream.Hub, o Options) (*Answerer, error) {
	a := &Answerer{file: f, store: store, world: w, hub: hub, clock: hub.Clock(), speed: hub.Speed(), log: o.Logger, opts: o}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.cache = tape.NewCache(o.CacheBytes)
	a.m = tape.NewMatcher(f, mids)
	a.rec = &recording{file: f, m: a.m, cache: a.cache, maxPlan: o.CacheBytes / 4, eventChunks: o.EventChunks, annotate: store != nil}
	var err error
	if a.losses, err = tape.FindLosses(f, a.m); err != nil {
		return nil, err
	}
	a.disc = discovery.New(f, a.m, store)
	return a, nil
}

// Losses returns what the session's damage lost of the exchanges the
// tape answers from, by exchange and then body offset (see tape.Loss).
func (a *Answerer) Losses() []*tape.Loss { return a.losses }

// Closest names the n recorded requests closest to q, for the log of a
// request nothing matches.
func (a *Answerer) Closest(q tape.Query, n int) []string { return a.m.Closest(q, n) }

// InvalidRV answers a watch from a resourceVersion that is not a number
// as kube-apiserver does (see invalidRVWatch); false for any other
// request, whatever answers it.
func (a *Answerer) InvalidRV(q tape.Query) (*stream.Answer, bool) { return a.invalidRVWatch(q) }

// Route answers a request of a replay that plays the tape (the world, if
// any, read-only): a write of a replay with a world gets 403, a watch a
// recorded stream (whole, resumed, synthesized, or the world's when the
// recording lacks it), anything else a recorded answer, a synthesized
// one, or 404.
func (a *Answerer) Route(r *http.Request, q tape.Query) *stream.Answer {
	switch {
	case a.store != nil && apipath.IsWrite(q.Method):
		return a.world.Reject(r, q)
	case q.Watch:
		return a.routeWatch(r, q)
	}
	return a.routeOther(r, q)
}

// Other answers what a Live world does not (discovery, /version, paths
// that are no resource, resources it does not serve): as recorded, or
// synthesized; what the recording does not hold of a resource gets the
// 404 of the recorded server (fromworld's Unserved).
func (a *Answerer) Other(r *http.Request, q tape.Query, body []byte) *stream.Answer {
	if len(a.m.ByKey[q.Key]) == 0 {
		if ans, ok := a.world.Unserved(r, q, body); ok {
			return ans
		}
	}
	return a.routeOther(r, q)
}

// Exchanges returns the recorded exchanges the tape answers from, in
// session order. The caller must not modify them.
func (a *Answerer) Exchanges() []*tape.Exchange { return a.m.All }

// Head returns the response head a stream sends for recorded watch x.
func (a *Answerer) Head(x *tape.Exchange) *stream.Head {
	return a.rec.headOf(x, responseStatus(x.Info.Response.Status))
}

// Source returns recorded exchange x's body as timed writes, as the tape
// plays it.
func (a *Answerer) Source(x *tape.Exchange) (tape.Source, error) { return a.rec.openSource(x) }
