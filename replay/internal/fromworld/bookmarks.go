package fromworld

import (
	"time"

	"github.com/wtrace/wtrace/replay/internal/stream"
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

// startBookmarks sets when the watch sends its first bookmark, if its
// client allows them.
func (f *worldFeed) startBookmarks() {
	if !f.wt.Bookmarks() {
		return
	}
	f.bookmarkAt = f.nextBookmark(f.st.Arrival())
}

// nextBookmark is the time of the bookmark after one sent at t (or the
// watch's start): a minute later, or 2 s before the timeout if that is
// sooner and still ahead; zero when there is none.
func (f *worldFeed) nextBookmark(t time.Time) time.Time {
	next := t.Add(bookmarkEvery)
	if timeoutAt := f.st.TimeoutAt(); !timeoutAt.IsZero() {
		if pre := timeoutAt.Add(-bookmarkBefore); pre.Before(next) {
			if !pre.After(t) {
				return time.Time{}
			}
			next = pre
		}
	}
	return next
}

// WakeAt is the next bookmark's time (stream.Feed): the stream wakes for
// it even when the world does not change.
func (f *worldFeed) WakeAt() time.Time { return f.bookmarkAt }

// bookmarkDue reports whether the next bookmark's time has come.
func (f *worldFeed) bookmarkDue() bool {
	return !f.bookmarkAt.IsZero() && !f.st.Hub().Now().Before(f.bookmarkAt)
}

// bookmark is the bookmark due now, and sets the time of the next; false
// when it cannot be encoded (logged).
func (f *worldFeed) bookmark() (stream.Write, bool) {
	f.bookmarkAt = f.nextBookmark(f.bookmarkAt)
	b, err := f.wt.Bookmark()
	if err != nil {
		f.a.log.Warn("replay: cannot encode a bookmark", "err", err)
		return stream.Write{}, false
	}
	return stream.Write{Data: b}, true
}
