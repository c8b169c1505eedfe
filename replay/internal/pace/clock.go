package pace

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is the time source of a replay server: when a request arrived and how long
// to wait before the next write. The zero Options use the real clock; tests
// inject a FakeClock to run in virtual time. Implementations must be safe for
// concurrent use.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on its channel once d has
	// elapsed (at once if d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a replay server uses. Reset must leave no stale
// value in the channel from before the call (as time.Timer does since Go
// 1.23).
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time                 { return time.Now() }
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTimer) Stop()                 { t.t.Stop() }

// FakeClock is a Clock whose time moves only when told to: Advance and
// AdvanceTo fire the timers that fall due, in deadline order. Next and
// BlockUntil let a test step from one scheduled write to the next without
// sleeping. Safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{} // armed timers
	changed chan struct{}           // closed and replaced whenever timers change
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, timers: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer due at Now()+d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d (see AdvanceTo).
func (c *FakeClock) Advance(d time.Duration) {
	c.AdvanceTo(c.Now().Add(d))
}

// AdvanceTo moves the clock to t (never backwards) and fires every armed
// timer due at or before t, earliest first; each sees Now() equal to its own
// deadline while it fires, then the clock reads t.
func (c *FakeClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var due []*fakeTimer
	for ft := range c.timers {
		if !ft.when.After(t) {
			due = append(due, ft)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].when.Before(due[j].when) })
	for _, ft := range due {
		if ft.when.After(c.now) {
			c.now = ft.when
		}
		delete(c.timers, ft)
		select {
		case ft.ch <- c.now:
		default:
		}
	}
	if t.After(c.now) {
		c.now = t
	}
	if len(due) > 0 {
		c.notifyLocked()
	}
}

// Next returns the deadline of the earliest armed timer, and false if no
// timer is armed.
func (c *FakeClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	ok := false
	for ft := range c.timers {
		if !ok || ft.when.Before(next) {
			next, ok = ft.when, true
		}
	}
	return next, ok
}

// Waiters returns the number of armed timers.
func (c *FakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until at least n timers are armed, or ctx is done.
func (c *FakeClock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		k, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *FakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type fakeTimer struct {
	c    *FakeClock
	ch   chan time.Time
	when time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	select { // drain a value from before the Reset
	case <-t.ch:
	default:
	}
	t.when = c.now.Add(d)
	if d <= 0 {
		delete(c.timers, t)
		t.ch <- c.now
		return
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
}

func (t *fakeTimer) Stop() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.timers[t]; ok {
		delete(c.timers, t)
		c.notifyLocked()
	}
}
