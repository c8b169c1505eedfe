package world

import (
	"slices"
)

// Compaction: a store forgets old versions as the apiserver's etcd and
// watch cache do, so that its memory follows the live objects plus a
// window of history (Options.HistoryWindow versions), not every write ever
// made. What it forgot is 410 Expired: a watch from an older
// resourceVersion (at its start, or one left behind: its next event is an
// ERROR), a LIST with resourceVersionMatch=Exact of an older one.
//
// Only the past is compacted: a read-only replay's recorded versions above
// the world's point are the recording's future and are kept.

// window is the number of historic versions a store keeps (negative: all).
func (s *Store) window() int {
	switch w := s.opts.HistoryWindow; {
	case w == 0:
		return DefaultHistoryWindow
	case w < 0:
		return -1
	default:
		return w
	}
}

// maybeCompact compacts when the historic versions reach twice the window
// (the lock is held), so that compaction costs O(1) per write amortized.
func (s *Store) maybeCompact() {
	w := s.window()
	if w < 0 || s.historic < 2*w+64 {
		return
	}
	s.compact(w)
}

// compact forgets the versions older than the newest keep historic ones,
// but each object's current version (the lock is held).
func (s *Store) compact(keep int) {
	var orders []uint64
	for _, h := range s.res {
		for _, es := range h.objs {
			cur := s.currentIndex(es)
			for i, e := range es {
				if i != cur && s.past(e) {
					orders = append(orders, s.order(e))
				}
			}
		}
	}
	if len(orders) <= keep {
		return
	}
	slices.Sort(orders)
	cut := orders[len(orders)-keep-1] + 1 // every version below cut goes, but the current ones
	if keep == 0 {
		cut = orders[len(orders)-1] + 1
	}
	if cut <= s.oldest {
		return
	}
	gone := map[*entry]bool{}
	s.historic = 0
	for _, h := range s.res {
		for k, es := range h.objs {
			cur := s.currentIndex(es)
			kept := make([]*entry, 0, len(es))
			for i, e := range es {
				if i == cur || !s.past(e) || s.order(e) >= cut {
					kept = append(kept, e)
					if i != cur && s.past(e) {
						s.historic++
					}
					continue
				}
				gone[e] = true
				s.bytes -= e.size
			}
			if len(kept) == 0 {
				delete(h.objs, k)
			} else {
				h.objs[k] = kept
			}
		}
		h.rec = slices.DeleteFunc(h.rec, func(e *entry) bool { return gone[e] })
		h.syn = slices.DeleteFunc(h.syn, func(e *entry) bool { return gone[e] })
	}
	s.oldest = cut
	s.compacted = true
}

// currentIndex is the index in es (one object's versions, in served order)
// of its current version: its newest in the world's past, unless that is
// its deletion (-1: none).
func (s *Store) currentIndex(es []*entry) int {
	for i := len(es) - 1; i >= 0; i-- {
		if s.past(es[i]) {
			if es[i].typ == Deleted {
				return -1
			}
			return i
		}
	}
	return -1
}

// past reports whether e is part of the world's past: a client's write, or
// a recorded version the world's point has reached.
func (s *Store) past(e *entry) bool {
	return e.synth || e.rv <= s.clk.point
}
