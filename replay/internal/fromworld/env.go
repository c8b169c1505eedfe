package fromworld

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
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

// activity tracks what the clients are doing, for PaceQuiet and Settle.
type activity struct {
	inflight atomic.Int64  // requests in flight that are not watches
	held     atomic.Int64  // perturbations' effects still to come (Hold): Settle waits for them, the quiet pace does not
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
	a       *Answerer
	pace    Pace
	window  time.Duration
	start   sync.Once
	done    chan struct{} // closed when every change was applied (or Close)
	applied atomic.Int64
	dropped atomic.Int64
}

func newEnvDriver(a *Answerer, pace Pace, window time.Duration) *envDriver {
	if window <= 0 {
		window = DefaultQuietWindow
	}
	return &envDriver{a: a, pace: pace, window: window, done: make(chan struct{})}
}

// begin starts the environment's timeline at the run's first request.
func (d *envDriver) begin(now time.Time) {
	d.start.Do(func() {
		d.a.wg.Add(1)
		go d.run(now)
	})
}

// run applies the changes, paced, until none is left or the server
// closes. origin is the arrival of the run's first request.
func (d *envDriver) run(origin time.Time) {
	defer d.a.wg.Done()
	defer close(d.done)
	env := d.a.store.Environment()
	timer := d.a.clock.NewTimer(time.Hour)
	defer timer.Stop()
	var last world.Change
	var lastAt time.Time // when last was applied
	for {
		c, ok := d.a.store.NextChange()
		if !ok {
			d.tail(last, lastAt, env.End)
			d.a.log.Info("replay: the environment is played", "applied", d.applied.Load(), "dropped", d.dropped.Load())
			return
		}
		first := last == (world.Change{})
		var due time.Time
		quiet := d.pace == PaceQuiet || d.a.hub.Speed() == 0 && first && d.applied.Load()+d.dropped.Load() == 0
		follow := d.pace == PaceQuiet && !first
		switch {
		case quiet:
			due = d.a.act.quietAt(d.a.clock.Now(), d.window)
		case d.a.hub.Speed() > 0:
			due = origin.Add(time.Duration(float64(c.Time-env.Start) / d.a.hub.Speed()))
		}
		for {
			now := d.a.clock.Now()
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
				if q := d.a.act.quietAt(now, d.window); !q.After(now) {
					break
				} else {
					due = q
				}
			}
			timer.Reset(due.Sub(now))
			select {
			case <-d.a.ctx.Done():
				return
			case <-timer.C():
			case <-d.a.act.wake:
				if quiet {
					due = d.a.act.quietAt(d.a.clock.Now(), d.window)
				}
			}
		}
		if !d.await(c) {
			return
		}
		last = c
		a, ok := d.a.store.ApplyNext()
		if !ok {
			continue
		}
		lastAt = d.a.clock.Now()
		d.a.act.last.Store(lastAt.UnixNano())
		d.note(a)
		if d.a.hub.Speed() == 0 && d.pace != PaceQuiet {
			// As fast as possible, but every watcher gets each change
			// before the next is made: none sees two merged.
			d.a.deliv.wait(d.a.store.LastRV(), d.a.ctx.Done())
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
	if !d.a.store.Awaits(c) {
		return true
	}
	t := d.a.clock.NewTimer(PairWait)
	defer t.Stop()
	for d.a.store.Awaits(c) {
		select {
		case <-t.C():
			return true
		case <-d.a.act.wake:
		case <-d.a.ctx.Done():
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
	q := d.a.act.quietAt(now, d.window)
	if !q.After(now) {
		if d.a.store.WritesBehind() == 0 {
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
		t := d.a.clock.NewTimer(time.Hour)
		defer t.Stop()
		for {
			now := d.a.clock.Now()
			ready, next := d.following(now, time.Duration(end-last.Time), lastAt)
			if ready {
				return
			}
			t.Reset(next.Sub(now))
			select {
			case <-t.C():
			case <-d.a.act.wake:
			case <-d.a.ctx.Done():
				return
			}
		}
	}
	speed := d.a.hub.Speed()
	if speed <= 0 {
		return
	}
	t := d.a.clock.NewTimer(time.Duration(float64(end-last.Time) / speed))
	defer t.Stop()
	select {
	case <-t.C():
	case <-d.a.ctx.Done():
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
		d.a.log.Info("replay: environment change dropped", attrs...)
		return
	}
	d.applied.Add(1)
	d.a.log.Debug("replay: environment change applied", attrs...)
}
