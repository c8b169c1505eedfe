package stream

import (
	"time"
)

// A feed is what a stream plays (see play): writes, each due at a
// recorded time on the stream's timeline. A recorded exchange is one
// (tapeFeed), and so is one served with the world (flowFeed) and a watch
// of the world (worldFeed). A feed belongs to its stream.
type feed interface {
	// peek returns the recorded capture time of the next write (0: due at
	// once), without taking it; false when there is none now: the feed
	// is over, or (changed returns a channel) has nothing yet.
	peek() (at int64, ok bool)
	// take returns the write peek announced, now that it is due, and
	// moves past it; false skips it (nothing to send).
	take() (w feedWrite, ok bool)
	// changed returns the channel closed when the feed may have a write
	// before the one peek returned, or when it had none, one at all (a
	// watch of the world: its next change); nil for a feed that only
	// plays what it holds. idle is called when peek found nothing.
	changed() <-chan struct{}
	idle()
	// inMemory reports whether peek and take return without reading the
	// session file (the scheduler then carries the stream itself).
	inMemory() bool
}

// feedWrite is one write of a feed: one chunk of the response.
type feedWrite struct {
	data   []byte
	ext    string // the recorded chunk's extensions
	events int    // watch events whose data ends in it (for the metrics)
	at     int64  // recorded time (0: none, no lateness)
	last   bool   // the stream ends after it (a watch's 410 Expired)
}

// play sends feed f's writes on the timeline that maps capture time base
// to the request's arrival: it waits for the next write's time (or, for
// a feed with changes, its next change), then sends every write due by
// then in one batch of at most maxBatch bytes, each its own chunk. It is
// the one batching loop of every stream, and resumable: when the stream
// parks (see waitUntil) it returns false with the feed where it was, and
// calling it again carries on. It returns false if the stream stopped
// early (or parked), true at the feed's end.
func (st *streamer) play(f feed, base int64) bool {
	for {
		if st.inSched && !f.inMemory() {
			st.yield()
			return false
		}
		at, ok := f.peek()
		if !ok {
			ch := f.changed()
			if ch == nil || st.stopped != "" {
				return st.stopped == ""
			}
			f.idle()
			if !st.waitFor(time.Time{}, ch) {
				return false
			}
			continue
		}
		if !st.waitFor(st.deadline(at, base), f.changed()) {
			return false
		}
		now := st.s.clock.Now()
		batch := st.batch[:0]
		st.exts = st.exts[:0]
		size, last := 0, false
		for size < maxBatch && !last {
			at, ok := f.peek()
			if !ok || at != 0 && st.deadline(at, base).After(now) {
				break
			}
			w, ok := f.take()
			if !ok {
				continue
			}
			batch = append(batch, w.data)
			st.exts = append(st.exts, w.ext)
			size += len(w.data)
			last = w.last
			st.sentEvents(w.events, w.at, base, now)
		}
		if st.stopped != "" {
			return false
		}
		sent := len(batch) == 0 || st.sendBatch(batch)
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
// for ch by being woken, see worldwatch.go).
func (st *streamer) waitFor(t time.Time, ch <-chan struct{}) bool {
	if ch == nil || st.mayPark() {
		return st.waitUntil(t)
	}
	if t.IsZero() {
		t = st.s.clock.Now().Add(100 * 365 * 24 * time.Hour)
	}
	_, ok := st.waitOr(t, ch)
	return ok
}
