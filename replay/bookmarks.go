package replay

import (
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
)

// Periodic bookmarks of a world watch, as kube-apiserver's watch cache
// sends them to a client that allows them (cacheWatcher.nextBookmarkTime):
// one about every minute, and one 2 s before the watch's timeout, each
// at the resourceVersion up to which the watch has sent everything
// (world.Watch.Bookmark). Replay time: the timeout scales with the speed,
// the minute does not (a client's progress timers are its own).
const (
	bookmarkEvery  = time.Minute
	bookmarkBefore = 2 * time.Second
)

// startBookmarks sets when world watch wt sends its first bookmark, if
// its client allows them.
func (st *streamer) startBookmarks(wt *world.Watch) {
	if !wt.Bookmarks() {
		return
	}
	st.bookmarkAt = st.nextBookmark(st.arrival)
}

// nextBookmark is the time of the bookmark after one sent at t (or the
// watch's start): a minute later, or 2 s before the timeout if that is
// sooner and still ahead; zero when there is none.
func (st *streamer) nextBookmark(t time.Time) time.Time {
	next := t.Add(bookmarkEvery)
	if !st.timeoutAt.IsZero() {
		if pre := st.timeoutAt.Add(-bookmarkBefore); pre.Before(next) {
			if !pre.After(t) {
				return time.Time{}
			}
			next = pre
		}
	}
	return next
}

// wakeAt is the earlier of t (zero: none) and the next bookmark's time.
func (st *streamer) wakeAt(t time.Time) time.Time {
	if b := st.bookmarkAt; !b.IsZero() && (t.IsZero() || b.Before(t)) {
		return b
	}
	return t
}

// dueBookmark appends wt's bookmark to batch when its time has come (now),
// and sets the time of the next.
func (st *streamer) dueBookmark(wt *world.Watch, now time.Time, batch [][]byte) [][]byte {
	if st.bookmarkAt.IsZero() || now.Before(st.bookmarkAt) {
		return batch
	}
	st.bookmarkAt = st.nextBookmark(st.bookmarkAt)
	b, err := wt.Bookmark()
	if err != nil {
		st.s.log.Warn("replay: cannot encode a bookmark", "err", err)
		return batch
	}
	return append(batch, b)
}
