package fromworld

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// A watch of the world on the scheduler's path (see sched.go) parks
// between its events like a recorded one, with no goroutine of its own:
// until the time of its next recorded change (a watch that paces them),
// its client's timeoutSeconds, or a change of the world, whichever comes
// first. The world's changes reach it through the server's waker: one
// goroutine that waits on world.Store.Changed and wakes every parked
// watch of the world (pace.Scheduler.Wake), which then sends what it has
// (world.Watch.Take: one encoding of a change for all the watches that
// send it in the same encoding) and parks again. Ten thousand watchers of
// a resource thus cost one goroutine per shard and one writev each per
// change, not ten thousand goroutines taking the world's lock in turn.

// storeWatchRoute answers a watch from the world: every watch of a replay
// that answers writes; for a tape, one the session did not record with
// these parameters, or one resumed from a resourceVersion the recording
// does not show.
func (a *Answerer) storeWatchRoute(r *http.Request, q tape.Query) *stream.Answer {
	req := stateRequest(r, q, nil)
	req.RecordedOnly = !a.Live()
	wt, refused := a.store.Watch(req)
	if refused != nil {
		return Respond(refused)
	}
	if wt == nil {
		return stream.NotFound(q.Method, q.Path)
	}
	if skipWanted(r.Context()) {
		if _, err := wt.Compact(); err != nil {
			a.log.Warn("replay: cannot skip a watch's intermediate versions", "err", err)
		}
	}
	return &stream.Answer{How: world.HowWatch, Status: http.StatusOK, Serve: func(st *stream.Stream, r *http.Request) {
		a.serveStoreWatch(st, wt, resourceOf(q.Path))
	}}
}

// serveStoreWatch sends a watch of the world: its initial events at once,
// then each recorded change at its recorded offset from the watch's start
// (scaled by Speed) and each client's write as it lands, in served
// resourceVersion order, until the client's timeoutSeconds, the client
// leaves, or Close.
func (a *Answerer) serveStoreWatch(st *stream.Stream, wt *world.Watch, resource string) {
	h := http.Header{"Content-Type": {wt.ContentType()}}
	for _, w := range wt.Warnings() {
		h.Add("Warning", world.WarningHeader(w))
	}
	if !st.Begin(stream.NewHead(http.StatusOK, h)) {
		return
	}
	f := &worldFeed{a: a, st: st, wt: wt, init: wt.Initial(), resource: resource}
	if wt.Expired() {
		st.Play(f, wt.Origin()) // its ERROR event, and the end
		return
	}
	a.deliv.add(wt)
	a.open.add(f)
	f.startBookmarks()
	if st.Parks() {
		// On the scheduler's path (see worldwatch.go).
		a.waker.Add(st)
		st.OnRelease(func() {
			a.waker.Remove(st)
			a.deliv.remove(wt)
			a.open.remove(f)
		})
		st.RunRest(func() { st.Play(f, wt.Origin()) })
		return
	}
	defer a.deliv.remove(wt)
	defer a.open.remove(f)
	st.Play(f, wt.Origin())
}

// worldFeed plays a watch of the world: its initial events at once, then
// the clients' writes and the recorded changes whose time has come, in
// served order; it waits for the world's next change when it has sent all
// it has, and ends after the watch's last event (410 Expired). An event
// that cannot be encoded is logged and skipped.
type worldFeed struct {
	a    *Answerer
	st   *stream.Stream
	wt   *world.Watch
	init [][]byte         // the initial events not sent yet
	ch   <-chan struct{}  // the world's next change, taken before the last look
	ev   world.WatchEvent // the next event, when has: what the last look found
	has  bool
	dry  bool // the last look found nothing
	// bookmarkAt is when a watch that allows bookmarks sends its next
	// periodic one (bookmarks.go); zero: never.
	bookmarkAt time.Time
	// resource is what the watch watches; end says how a perturbation
	// ends it (perturb.go), expiredSent that its ERROR event went out.
	resource    string
	end         atomic.Int32
	expiredSent bool
}

func (f *worldFeed) Peek() (int64, bool) {
	if how := f.end.Load(); how != endNone {
		return 0, f.ending(how)
	}
	switch {
	case len(f.init) > 0, f.bookmarkDue():
		return 0, true
	case f.wt.Expired():
		return 0, false
	case f.has || f.dry:
		select {
		case <-f.ch: // the world changed since the last look: a client's
			// write may now come before the event it found
		default:
			return f.ev.Time, f.has
		}
	}
	// Taken before the look: a change that lands after it closes ch.
	f.ch = f.a.store.Changed()
	f.ev, f.has = f.wt.Next()
	f.dry = !f.has
	return f.ev.Time, f.has
}

func (f *worldFeed) Take() (stream.Write, bool) {
	if f.end.Load() == endExpire && !f.expiredSent {
		f.expiredSent = true
		return stream.Write{Data: f.wt.ExpiredFrame(), Events: 1, Last: true}, true
	}
	if len(f.init) > 0 {
		b := f.init[0]
		f.init = f.init[1:]
		f.perturbEvent()
		return stream.Write{Data: b, Events: 1, Last: len(f.init) == 0 && f.wt.Expired()}, true
	}
	if f.bookmarkDue() {
		return f.bookmark()
	}
	ev := f.ev
	f.has = false
	b, err := f.wt.Take(ev)
	if err != nil {
		f.a.log.Warn("replay: cannot encode a watch event", "err", err)
		return stream.Write{}, false
	}
	f.perturbEvent()
	return stream.Write{Data: b, Events: 1, At: ev.Time, Last: ev.Expired}, true
}

func (f *worldFeed) Changed() <-chan struct{} {
	if f.wt.Expired() || f.end.Load() != endNone {
		return nil
	}
	if f.ch == nil {
		f.ch = f.a.store.Changed()
	}
	return f.ch
}

// Idle says the watch has sent everything it had (for the writes that
// wait for their events: see deliveries).
func (f *worldFeed) Idle() { f.a.deliv.caughtUp() }

func (f *worldFeed) InMemory() bool { return true }
