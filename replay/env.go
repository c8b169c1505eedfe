package replay

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// A replay that answers writes (WritesAnswer, WritesApply) is an
// apiserver whose world is the recording's environment: every read is
// answered from the world when it arrives, the run's writes land in it,
// and the environment's changes (world.Environment) are applied to it one
// by one, paced by the driver below.

// Pace says when a replay that answers writes applies the environment's
// next change.
type Pace string

const (
	// PaceRecorded (the default) applies each change at its recorded
	// time, scaled by Options.Speed, on a timeline that starts with the
	// run's first request (mapped to the first request of the clients
	// under test in the recording). Speed 0 applies them as fast as
	// possible: the first once the clients have been quiet (their caches
	// synced), each next one once every watcher has been sent the one
	// before.
	PaceRecorded Pace = "recorded"
	// PaceQuiet applies the first change once the clients have been
	// quiet: no request but watches in flight, and none begun or ended
	// for Options.QuietWindow (nor a change applied); each next one once
	// they are quiet and have made the writes the recording shows before
	// it, or once its recorded gap after the one before has passed
	// (DefaultQuietMaxWait at most), whichever comes first. A controller
	// reconciles each change before the next, a test runs as fast as the
	// controller, and every run sees the same sequence — a controller
	// that batches its work meets the changes together that it met
	// together when it was recorded.
	PaceQuiet Pace = "quiet"
)

// DefaultQuietWindow is the QuietWindow a zero Options means.
const DefaultQuietWindow = 300 * time.Millisecond

// ParsePace reads a Pace by name ("" is PaceRecorded).
func ParsePace(s string) (Pace, error) {
	switch p := Pace(s); p {
	case "":
		return PaceRecorded, nil
	case PaceRecorded, PaceQuiet:
		return p, nil
	}
	return "", fmt.Errorf("replay: pace %q: want recorded or quiet", s)
}

// causal reports whether the server answers from a Live world.
func (s *Server) causal() bool { return s.env != nil }

// activity tracks what the clients are doing, for PaceQuiet and Settle.
type activity struct {
	inflight atomic.Int64  // requests in flight that are not watches
	last     atomic.Int64  // UnixNano (the server's clock) of the last activity: a request begun or ended, a change applied
	wake     chan struct{} // a token when a request ends (buffered, one)
}

func newActivity() *activity { return &activity{wake: make(chan struct{}, 1)} }

// heartbeat reports whether a request is a leader elector's (a Lease of
// coordination.k8s.io): renewed on a timer, it is no sign of work, and
// does not break the clients' quiet.
func heartbeat(path string) bool {
	return strings.HasPrefix(path, "/apis/coordination.k8s.io/") && strings.Contains(path, "/leases")
}

// begin notes a request's arrival; watch says it is a watch, which stays
// in flight for its whole life and does not count as busy.
func (a *activity) begin(now time.Time, watch bool) {
	a.last.Store(now.UnixNano())
	if !watch {
		a.inflight.Add(1)
	}
}

// end notes the end of a request begun with watch false.
func (a *activity) end(now time.Time) {
	a.last.Store(now.UnixNano())
	a.inflight.Add(-1)
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// quietAt is when the clients will have been quiet for window, if nothing
// happens before: the far future while a request is in flight.
func (a *activity) quietAt(now time.Time, window time.Duration) time.Time {
	if a.inflight.Load() > 0 {
		return now.Add(100 * 365 * 24 * time.Hour)
	}
	return time.Unix(0, a.last.Load()).Add(window)
}

// envDriver applies the environment's changes to the world.
type envDriver struct {
	s       *Server
	pace    Pace
	window  time.Duration
	start   sync.Once
	done    chan struct{} // closed when every change was applied (or Close)
	applied atomic.Int64
	dropped atomic.Int64
}

func newEnvDriver(s *Server, pace Pace, window time.Duration) *envDriver {
	if window <= 0 {
		window = DefaultQuietWindow
	}
	return &envDriver{s: s, pace: pace, window: window, done: make(chan struct{})}
}

// begin starts the environment's timeline at the run's first request.
func (d *envDriver) begin(now time.Time) {
	d.start.Do(func() {
		d.s.handlers.Add(1)
		go d.run(now)
	})
}

// run applies the changes, paced, until none is left or the server
// closes. origin is the arrival of the run's first request.
func (d *envDriver) run(origin time.Time) {
	defer d.s.handlers.Done()
	defer close(d.done)
	env := d.s.store.Environment()
	timer := d.s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	var last world.Change
	var lastAt time.Time // when last was applied
	for {
		c, ok := d.s.store.NextChange()
		if !ok {
			d.tail(last, lastAt, env.End)
			d.s.log.Info("replay: the environment is played", "applied", d.applied.Load(), "dropped", d.dropped.Load())
			return
		}
		first := last == (world.Change{})
		var due time.Time
		quiet := d.pace == PaceQuiet || d.s.speed == 0 && first && d.applied.Load()+d.dropped.Load() == 0
		follow := d.pace == PaceQuiet && !first
		switch {
		case quiet:
			due = d.s.act.quietAt(d.s.clock.Now(), d.window)
		case d.s.speed > 0:
			due = origin.Add(time.Duration(float64(c.Time-env.Start) / d.s.speed))
		}
		for {
			now := d.s.clock.Now()
			if follow {
				ready, next := d.following(now, time.Duration(c.Time-last.Time), lastAt)
				if ready {
					break
				}
				due = next
			} else if !due.After(now) {
				if !quiet {
					break
				}
				if q := d.s.act.quietAt(now, d.window); !q.After(now) {
					break
				} else {
					due = q
				}
			}
			timer.Reset(due.Sub(now))
			select {
			case <-d.s.ctx.Done():
				return
			case <-timer.C():
			case <-d.s.act.wake:
				if quiet {
					due = d.s.act.quietAt(d.s.clock.Now(), d.window)
				}
			}
		}
		if !d.await(c) {
			return
		}
		last = c
		a, ok := d.s.store.ApplyNext()
		if !ok {
			continue
		}
		lastAt = d.s.clock.Now()
		d.s.act.last.Store(lastAt.UnixNano())
		d.note(a)
		if d.s.speed == 0 && d.pace != PaceQuiet {
			// As fast as possible, but every watcher gets each change
			// before the next is made: none sees two merged.
			d.s.deliv.wait(d.s.store.LastRV(), d.s.ctx.Done())
		}
	}
}

// PairWait bounds how long a change to an object the recorded clients
// created waits for the run's clients to create their counterpart
// (world.Store.Awaits) before it is applied — and dropped, when they have
// not: the recorded controller made it before the change came, the run's
// may be a moment later.
const PairWait = 2 * time.Second

// await waits, up to PairWait, until change c has an object to apply to
// in the run (world.Store.Awaits); false when the server closes.
func (d *envDriver) await(c world.Change) bool {
	if !d.s.store.Awaits(c) {
		return true
	}
	t := d.s.clock.NewTimer(PairWait)
	defer t.Stop()
	for d.s.store.Awaits(c) {
		select {
		case <-t.C():
			return true
		case <-d.s.act.wake:
		case <-d.s.ctx.Done():
			return false
		}
	}
	return true
}

// DefaultQuietMaxWait bounds how long, with PaceQuiet, the next change
// waits for the run to make the writes the recording shows before it,
// once the recorded gap is longer: a run that never makes them (a
// controller with a part removed) goes on after it.
const DefaultQuietMaxWait = 10 * time.Second

// following decides, with PaceQuiet, whether the next change, recorded
// gap after the one applied at lastAt, may be applied at now: once the
// clients have been quiet for the window and have made the writes the
// recording shows before it (world.Store.WritesBehind: as the diff pairs
// them, object by object), or once the recorded gap has passed (bounded
// by DefaultQuietMaxWait), whichever comes first. Controllers schedule
// work for later — the job controller syncs a Job a second after its
// Pods changed — and are quiet while they wait: the change waits for the
// work the recording shows them doing first, and comes no later than it
// did. Otherwise it returns when to look again.
func (d *envDriver) following(now time.Time, gap time.Duration, lastAt time.Time) (ready bool, next time.Time) {
	due := lastAt.Add(min(gap, max(DefaultQuietMaxWait, d.window)))
	if !due.After(now) {
		return true, now
	}
	q := d.s.act.quietAt(now, d.window)
	if !q.After(now) {
		if d.s.store.WritesBehind() == 0 {
			return true, now
		}
		q = due // quiet, behind: a write's end wakes the driver
	}
	return false, minTime(q, due)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tail waits, after the environment's last change (last, applied at
// lastAt), as long as the recorded clients were still at work after it
// (until end, their last write): at the recorded pace scaled by Speed;
// with PaceQuiet in real time, or less, once the clients have made every
// write the recording shows and are quiet; not at all at Speed 0. A
// controller that acts on a delay gets its time, as it had it when it
// was recorded.
func (d *envDriver) tail(last world.Change, lastAt time.Time, end int64) {
	if last.Time == 0 || end <= last.Time {
		return
	}
	if d.pace == PaceQuiet {
		t := d.s.clock.NewTimer(time.Hour)
		defer t.Stop()
		for {
			now := d.s.clock.Now()
			ready, next := d.following(now, time.Duration(end-last.Time), lastAt)
			if ready {
				return
			}
			t.Reset(next.Sub(now))
			select {
			case <-t.C():
			case <-d.s.act.wake:
			case <-d.s.ctx.Done():
				return
			}
		}
	}
	speed := d.s.speed
	if speed <= 0 {
		return
	}
	t := d.s.clock.NewTimer(time.Duration(float64(end-last.Time) / speed))
	defer t.Stop()
	select {
	case <-t.C():
	case <-d.s.ctx.Done():
	}
}

// note logs what was done with one change.
func (d *envDriver) note(a world.Applied) {
	attrs := []any{"change", a.Type.String(), "resource", a.Resource.Resource, "object", a.Key.String(),
		"recorded-rv", a.Change.RV, "rv", a.Served, "how", a.Outcome}
	if a.Key != a.Change.Key {
		attrs = append(attrs, "recorded-object", a.Change.Key.String())
	}
	if a.Reason != "" {
		attrs = append(attrs, "why", a.Reason)
	}
	if a.Outcome == world.AppliedDropped {
		d.dropped.Add(1)
		d.s.log.Info("replay: environment change dropped", attrs...)
		return
	}
	d.applied.Add(1)
	d.s.log.Debug("replay: environment change applied", attrs...)
}

// EnvironmentDone returns a channel closed once every change of the
// environment was applied (nil for a replay that does not answer writes).
func (s *Server) EnvironmentDone() <-chan struct{} {
	if s.env == nil {
		return nil
	}
	return s.env.done
}

// Settle waits until the environment was played (a replay that answers
// writes) and the clients have then been quiet for window: no request but
// watches in flight, and none begun or ended (the run is over). It
// returns false when done is closed first or the server closes.
func (s *Server) Settle(done <-chan struct{}, window time.Duration) bool {
	if s.env != nil {
		select {
		case <-s.env.done:
		case <-done:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
	tick := time.NewTicker(max(window/8, 5*time.Millisecond))
	defer tick.Stop()
	for {
		now := s.clock.Now()
		if !s.act.quietAt(now, window).After(now) {
			return true
		}
		select {
		case <-tick.C:
		case <-done:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
}

// Environment says what the replay did with the recording's environment
// so far: the changes applied and dropped (a dropped one names its
// reason), the clients under test. nil for a replay that does not answer
// writes.
func (s *Server) Environment() *EnvironmentReport {
	if s.env == nil {
		return nil
	}
	env := s.store.Environment()
	r := &EnvironmentReport{Clients: env.Clients, Changes: len(env.Changes), Behaviour: env.Behaviour,
		Requests: env.Requests, Writes: env.Writes}
	for _, a := range s.store.AppliedChanges() {
		if a.Outcome == world.AppliedDropped {
			r.Dropped = append(r.Dropped, a)
		} else {
			r.Applied++
		}
	}
	return r
}

// EnvironmentReport is what Server.Environment returns.
type EnvironmentReport struct {
	// Clients names the clients under test ("all", their selectors, or
	// "none").
	Clients string
	// Changes counts the environment's changes; Applied those applied so
	// far; Dropped those that had nothing to apply to, with why.
	Changes, Applied int
	Dropped          []world.Applied
	// Requests and Writes count the recorded requests and successful
	// writes of the clients under test; Behaviour the versions of objects
	// their writes made (the expected output, left out of the world).
	Requests, Writes, Behaviour int
}

// String is a one-line summary.
func (r *EnvironmentReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "environment: %d of %d changes applied", r.Applied, r.Changes)
	if len(r.Dropped) > 0 {
		fmt.Fprintf(&b, ", %d dropped", len(r.Dropped))
	}
	fmt.Fprintf(&b, "; clients under test (%s): %d recorded requests, %d writes, %d versions left out as their behaviour",
		r.Clients, r.Requests, r.Writes, r.Behaviour)
	return b.String()
}

// DeliveryWait bounds how long a write's answer waits for its watch events
// to have gone out (see deliveries).
const DeliveryWait = 100 * time.Millisecond

// deliveries holds a write's answer until the watch events it caused have
// gone out to every watcher of the world (DeliveryWait at most): a client
// that reads its informer's cache right after its write's answer finds
// its write there, as it mostly does against a real apiserver, whose
// writes take etcd's milliseconds while its watch cache follows within
// one. Without it, a replay that answers at once sends the answer before
// the event, and controllers that sync again at once act on caches a
// write behind (conflicts a real run does not have).
type deliveries struct {
	mu      sync.Mutex
	watches map[*world.Watch]struct{}
	ch      chan struct{} // closed and replaced when a watch caught up, while a write waits
	waiting atomic.Int32  // writes in wait
}

func newDeliveries() *deliveries {
	return &deliveries{watches: map[*world.Watch]struct{}{}, ch: make(chan struct{})}
}

func (d *deliveries) add(wt *world.Watch) {
	d.mu.Lock()
	d.watches[wt] = struct{}{}
	d.mu.Unlock()
}

func (d *deliveries) remove(wt *world.Watch) {
	d.mu.Lock()
	delete(d.watches, wt)
	d.mu.Unlock()
	d.caughtUp()
}

// caughtUp says that a watch has sent everything it had. It costs an
// atomic load while no write waits (every watcher calls it at every
// change).
func (d *deliveries) caughtUp() {
	if d.waiting.Load() == 0 {
		return
	}
	d.mu.Lock()
	close(d.ch)
	d.ch = make(chan struct{})
	d.mu.Unlock()
}

// deliveryGrace is how long a write's answer waits after its events went
// out: the time a client's informer takes to take an event into its cache
// (a millisecond or two), so that the worker that gets the answer finds
// its write there.
const deliveryGrace = 2 * time.Millisecond

// wait returns once every watch has caught up to served resourceVersion
// rv (and deliveryGrace has passed), after DeliveryWait, or when done is
// closed.
func (d *deliveries) wait(rv uint64, done <-chan struct{}) {
	// Counted before the first look at the watches: a watch that catches
	// up after it closes the channel that look took.
	d.waiting.Add(1)
	defer d.waiting.Add(-1)
	defer func() {
		t := time.NewTimer(deliveryGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}()
	deadline := time.NewTimer(DeliveryWait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		behind := false
		for wt := range d.watches {
			if wt.Caught() < rv {
				behind = true
				break
			}
		}
		ch := d.ch
		d.mu.Unlock()
		if !behind {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		case <-done:
			return
		}
	}
}

// writeLatency holds a write until Options.WriteLatency (by default the
// recorded apiserver's median) has passed since arrival: it lands in the
// world (its events sent, its answer written) no sooner than it did in
// the recorded apiserver.
func (s *Server) writeLatency(arrival time.Time, done <-chan struct{}) {
	d := s.opts.WriteLatency
	if d == 0 {
		d = s.store.Environment().WriteLatency
	}
	wait := arrival.Add(d).Sub(s.clock.Now())
	if d <= 0 || wait <= 0 {
		return
	}
	t := s.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C():
	case <-done:
	case <-s.ctx.Done():
	}
}

// routeWorld decides how a replay that answers writes answers a request:
// from the world, whatever the recording holds, for every resource it
// knows; the rest (discovery, /version, paths that are no resource) as the
// recording has it or as synthesized.
func (s *Server) routeWorld(r *http.Request, q tape.Query, body []byte) route {
	if s.storeHandles(q.Path) || apipath.IsWrite(q.Method) {
		if q.Watch && q.Method == http.MethodGet {
			return s.storeWatchRoute(r, q)
		}
		if apipath.IsWrite(q.Method) {
			// The write reaches the world after the apiserver's latency,
			// as it reaches etcd: its answer and its watch events come
			// together, after it.
			s.writeLatency(s.clock.Now(), r.Context().Done())
		}
		if resp, ok := s.store.Serve(stateRequest(r, q, body)); ok {
			if resp.Changed {
				s.deliv.wait(s.store.LastRV(), r.Context().Done())
			}
			return storeRoute(resp)
		}
	}
	if t, ok := world.ParsePath(q.Path); ok && t.Resource.Resource != "" && (apipath.IsWrite(q.Method) || len(s.m.ByKey[q.Key]) == 0) {
		// What the recorded server does not serve (a resource, a
		// subresource the world does not model): its 404.
		return storeRoute(s.store.Unserved(stateRequest(r, q, body)))
	}
	return s.routeOther(r, q)
}
