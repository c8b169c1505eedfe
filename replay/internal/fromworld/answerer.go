package fromworld

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// Options configure an Answerer. The zero value answers no writes (a
// read-only world, or none), applies no environment and logs nothing.
type Options struct {
	// Live makes the world the recording's environment: every read of a
	// resource is answered from it, the writes land in it, and the
	// environment's changes are applied to it at their Pace (replay's
	// WritesAnswer, WritesApply). The Store must be loaded Live.
	Live bool
	// Pace and QuietWindow say when the environment's next change is
	// applied (see Pace); 0 QuietWindow means DefaultQuietWindow.
	Pace        Pace
	QuietWindow time.Duration
	// WriteLatency is how long a write waits before it lands (see
	// replay.Options.WriteLatency): 0 the recording's median, negative
	// none.
	WriteLatency time.Duration
	// Logger receives the environment's changes and failures; nil
	// discards.
	Logger *slog.Logger
}

// Answerer answers requests from the session's world, as kube-apiserver
// would when they arrive: the world's watches, reads a recording cannot
// answer, and, Live, every read and write of a resource, while it drives
// the environment's changes. It also follows the clients' activity
// (Begin), for the environment's quiet pace and Settle. Safe for
// concurrent use; its goroutines (the environment's driver) end with the
// context it is given, and Wait waits for them.
type Answerer struct {
	ctx   context.Context
	store *world.Store // nil: no world (replay's WritesRecorded)
	hub   *stream.Hub
	clock pace.Clock
	log   *slog.Logger
	opts  Options
	env   *envDriver  // applies the environment to a Live world; nil otherwise
	act   *activity   // what the clients are doing (PaceQuiet, Settle)
	deliv *deliveries // the world's watches, for a write's answer to wait for its events
	waker *stream.Waker
	wg    sync.WaitGroup
	// A perturbed run's hooks (nil: none) and the world's watches open
	// (perturb.go).
	hooks *Hooks
	open  openWatches
}

// New returns the Answerer of store (nil: a replay without a world, which
// only follows the clients' activity) whose streams go through hub; ctx
// is the server's life.
func New(ctx context.Context, store *world.Store, hub *stream.Hub, o Options) *Answerer {
	a := &Answerer{ctx: ctx, store: store, hub: hub, clock: hub.Clock(), log: o.Logger, opts: o,
		act: newActivity(), deliv: newDeliveries()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if store != nil {
		a.waker = hub.NewWaker(store.Changed)
		if o.Live {
			a.env = newEnvDriver(a, o.Pace, o.QuietWindow)
		}
	}
	return a
}

// Live reports whether the world answers every read and write of a
// resource (Options.Live).
func (a *Answerer) Live() bool { return a.env != nil }

// Handles reports whether the world answers requests for path.
func (a *Answerer) Handles(path string) bool {
	return a.store != nil && a.store.Handles(path)
}

// Begin notes the arrival of request q (a watch, or not), for the quiet
// pace and Settle, and starts the environment's timeline at the clients'
// first watch, as the recorded ones did. The caller calls the returned
// end when the request is answered (nil for a watch, which stays in
// flight for its whole life and does not count as busy; and for a leader
// elector's renewal, no sign of work).
func (a *Answerer) Begin(q tape.Query, bad bool, arrival time.Time) (end func()) {
	watch := !bad && q.Watch
	if bad || !heartbeat(q.Path) {
		a.act.begin(arrival, watch)
		if !watch {
			end = func() { a.act.end(a.clock.Now()) }
		}
	}
	if a.env != nil && (watch || !a.store.Environment().Watches) {
		a.env.begin(arrival)
	}
	return end
}

// Wait returns once the environment's driver has returned (after the
// context New was given is cancelled, or the environment was played).
func (a *Answerer) Wait() { a.wg.Wait() }

// Route answers a request from a Live world: every request of a
// resource it knows, read or write; false for the rest (discovery,
// /version, paths that are no resource), which the recording answers.
func (a *Answerer) Route(r *http.Request, q tape.Query, body []byte) (*stream.Answer, bool) {
	return a.routeWorld(r, q, body)
}

// Watch answers a watch from the world (see storeWatchRoute).
func (a *Answerer) Watch(r *http.Request, q tape.Query) *stream.Answer {
	return a.storeWatchRoute(r, q)
}

// Read answers a GET or HEAD from the world (the recording does not
// hold it); false when the world does not answer it.
func (a *Answerer) Read(r *http.Request, q tape.Query) (*stream.Answer, bool) {
	if !a.Handles(q.Path) {
		return nil, false
	}
	resp, ok := a.store.Serve(stateRequest(r, q, nil))
	if !ok {
		return nil, false
	}
	return Respond(resp), true
}

// Reject answers a write of a read-only replay with 403 Forbidden.
func (a *Answerer) Reject(r *http.Request, q tape.Query) *stream.Answer { return a.rejectRoute(r, q) }

// HowRejected names a write refused by a read-only replay: 403.
const HowRejected = "rejected"
