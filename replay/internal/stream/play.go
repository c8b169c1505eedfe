package stream

import (
	"time"
)

// A Feed is what a stream plays (see Play): writes, each due at a
// recorded time on the stream's timeline. A recorded exchange is one,
// and so is one served with the world, and a watch of the world. A Feed
// belongs to its stream.
type Feed interface {
	// Peek returns the recorded capture time of the next write (0: due at
	// once), without taking it; false when there is none now: the Feed
	// is over, or (Changed returns a channel) has nothing yet.
	Peek() (at int64, ok bool)
	// Take returns the write Peek announced, now that it is due, and
	// moves past it; false skips it (nothing to send).
	Take() (w Write, ok bool)
	// Changed returns the channel closed when the Feed may have a write
	// before the one Peek returned, or, when it had none, one at all (a
	// watch of the world: its next change); nil for a Feed that only
	// plays what it holds. Idle is called when Peek found nothing.
	Changed() <-chan struct{}
	Idle()
	// WakeAt returns when the Feed may have a write without a change (a
	// world watch's periodic bookmark), on the hub's clock; zero for
	// never.
	WakeAt() time.Time
	// InMemory reports whether Peek and Take return without reading the
	// session file (the scheduler then carries the stream itself).
	InMemory() bool
}

// Write is one write of a Feed: one chunk of the response.
type Write struct {
	Data   []byte // the Feed's: not kept past the send
	Ext    string // the recorded chunk's extensions
	Events int    // watch events whose data ends in it (for the metrics)
	At     int64  // recorded time (0: none, no lateness)
	Last   bool   // the stream ends after it (a watch's 410 Expired)
}

// Play sends Feed f's writes on the timeline that maps capture time base
// to the request's arrival: it waits for the next write's time (or, for
// a Feed with changes, its next change, or the time WakeAt says), then
// sends every write due by
// then in one batch of at most maxBatch bytes, each its own chunk. It is
// the one batching loop of every stream, and resumable: when the stream
// parks (see WaitUntil) it returns false with the Feed where it was, and
// calling it again carries on. It returns false if the stream stopped
// early (or parked), true at the feed's end.
func (st *Stream) Play(f Feed, base int64) bool {
	for {
		if st.inSched && !f.InMemory() {
			st.Yield()
			return false
		}
		at, ok := f.Peek()
		if !ok {
			ch := f.Changed()
			if ch == nil || st.stopped != "" {
				return st.stopped == ""
			}
			f.Idle()
			if !st.waitFor(f.WakeAt(), ch) {
				return false
			}
			continue
		}
		due := st.Deadline(at, base)
		if w := f.WakeAt(); !w.IsZero() && w.Before(due) {
			due = w
		}
		if !st.waitFor(due, f.Changed()) {
			return false
		}
		now := st.hub.clock.Now()
		batch := st.batch[:0]
		st.exts = st.exts[:0]
		size, last := 0, false
		for size < maxBatch && !last {
			at, ok := f.Peek()
			if !ok || at != 0 && st.Deadline(at, base).After(now) {
				break
			}
			w, ok := f.Take()
			if !ok {
				continue
			}
			batch = append(batch, w.Data)
			st.exts = append(st.exts, w.Ext)
			size += len(w.Data)
			last = w.Last
			st.sentEvents(w.Events, w.At, base, now)
		}
		if st.stopped != "" {
			return false
		}
		sent := len(batch) == 0 || st.SendBatch(batch)
		clear(batch) // a world watch's events are shared with other watches: not kept past the send
		st.batch = batch[:0]
		if !sent || last {
			return sent && st.stopped == ""
		}
	}
}

// waitFor waits for the clock to reach t (zero: no time) or, when ch is
// not nil, for ch to be closed, whichever comes first; false as waitUntil
// (the stream stopped, or parked: on the scheduler's path a stream waits
// for ch by being woken, see Waker).
func (st *Stream) waitFor(t time.Time, ch <-chan struct{}) bool {
	if ch == nil || st.mayPark() {
		return st.WaitUntil(t)
	}
	if t.IsZero() {
		t = st.hub.clock.Now().Add(100 * 365 * 24 * time.Hour)
	}
	_, ok := st.waitOr(t, ch)
	return ok
}
