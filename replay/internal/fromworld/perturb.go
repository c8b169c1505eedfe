package fromworld

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
)

// What a perturbed run (package replay/perturb) does to the world's
// watches: it counts and delays their events (Hooks), ends them —
// cleanly, by a connection reset, or with 410 Expired (EndWatches) — and
// resumes a re-watch past the intermediate versions (WithSkip).

// Hooks are a perturbed run's view of the world's watches.
type Hooks struct {
	// Event is called for each event a watch of resource sends.
	Event func(resource string)
	// EventDelay is how long each event of resource waits first.
	EventDelay func(resource string) time.Duration
}

// SetHooks sets the hooks of a perturbed run (before serving).
func (a *Answerer) SetHooks(h Hooks) { a.hooks = &h }

// How a perturbation ends a watch.
const (
	endNone int32 = iota
	endClean
	endReset
	endExpire
)

// openWatches are the world's watches being served, for EndWatches.
type openWatches struct {
	mu    sync.Mutex
	feeds map[*worldFeed]struct{}
}

func (o *openWatches) add(f *worldFeed) {
	o.mu.Lock()
	if o.feeds == nil {
		o.feeds = map[*worldFeed]struct{}{}
	}
	o.feeds[f] = struct{}{}
	o.mu.Unlock()
}

func (o *openWatches) remove(f *worldFeed) {
	o.mu.Lock()
	delete(o.feeds, f)
	o.mu.Unlock()
}

// EndWatches ends the open watches of the world of resource (its plural
// name, or NAME.GROUP; "" every one): cleanly (the stream's end), by a
// connection reset (reset), or with an ERROR event, 410 Expired
// (expire). It returns the resource of each watch it ends.
func (a *Answerer) EndWatches(resource string, reset, expire bool) []string {
	how := endClean
	switch {
	case expire:
		how = endExpire
	case reset:
		how = endReset
	}
	var out []string
	a.open.mu.Lock()
	for f := range a.open.feeds {
		if resource != "" && resource != f.resource && !strings.HasPrefix(resource, f.resource+".") {
			continue
		}
		if f.end.CompareAndSwap(endNone, how) {
			out = append(out, f.resource)
		}
	}
	a.open.mu.Unlock()
	if len(out) > 0 && a.store != nil {
		a.store.Poke() // wakes them (see worldFeed.Peek)
	}
	return out
}

type skipKey struct{}

// WithSkip marks a watch's context: the world resumes it past the
// intermediate versions (world.Watch.Compact).
func WithSkip(ctx context.Context) context.Context { return context.WithValue(ctx, skipKey{}, true) }

func skipWanted(ctx context.Context) bool { v, _ := ctx.Value(skipKey{}).(bool); return v }

// ending is what Peek does for a watch a perturbation ends: true when the
// feed has the ERROR event still to send, false when it is over.
func (f *worldFeed) ending(how int32) bool {
	switch how {
	case endExpire:
		return !f.expiredSent
	case endReset:
		f.st.Abort(true)
	}
	return false
}

// perturbEvent counts an event of the watch and waits the delay asked.
func (f *worldFeed) perturbEvent() {
	h := f.a.hooks
	if h == nil {
		return
	}
	if h.Event != nil {
		h.Event(f.resource)
	}
	if h.EventDelay != nil {
		if d := h.EventDelay(f.resource); d > 0 {
			time.Sleep(d) // on the stream's goroutine (or its scheduler's)
		}
	}
}

// resourceOf is the resource a watch's path names.
func resourceOf(path string) string {
	if t, ok := world.ParsePath(path); ok {
		return t.Resource.Resource
	}
	return ""
}

// Hold notes a perturbation's effect still to come (a re-watch held, the
// clients' return after a restart): Settle waits for it until release is
// called (once; later calls do nothing), and then for the quiet window.
// The environment's quiet pace does not wait for it: the world goes on
// while a client is away, which is what a perturbation tests.
func (a *Answerer) Hold() (release func()) {
	a.act.held.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.act.last.Store(a.clock.Now().UnixNano())
			a.act.held.Add(-1)
		})
	}
}
