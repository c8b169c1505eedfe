package world

import (
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// What a perturbed replay (package replay/perturb) asks of the world:
// wake its watches without a change (Poke), end one with 410 Expired
// (ExpiredFrame), resume one past the intermediate versions (Compact),
// and read it as it was some changes ago (ChangesBack).

// Poke wakes every watch waiting for the world's next change, as a
// change would, with no change.
func (s *Store) Poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify()
}

// ExpiredFrame returns the framed ERROR event, 410 Expired, that ends the
// watch as one the store compacted past (the watch then has nothing more).
func (wt *Watch) ExpiredFrame() []byte {
	s := wt.s
	s.mu.Lock()
	at := max(wt.cursor, wt.caught.Load())
	s.mu.Unlock()
	wt.expired = true
	st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", at, at+1)).ErrStatus
	return wt.w.Frame(codec.StatusEvent(wt.w.Media.Format, &st))
}

// Compact makes a watch from a resourceVersion skip the intermediate
// versions: each object of its scope that changed between its position
// and the world's point is sent at once as one event — its latest state
// as the scope sees it (ADDED for one the position did not show, MODIFIED,
// DELETED for one gone or out of scope) — and the watch goes on from the
// point. It returns how many events it made.
func (wt *Watch) Compact() (int, error) {
	if wt.expired {
		return 0, nil
	}
	s := wt.s
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to := wt.cursor, s.clk.last
	if to <= from {
		return 0, nil
	}
	n := 0
	for _, k := range sortedKeys(wt.h.objs) {
		if wt.ns != "" && k.Namespace != wt.ns {
			continue
		}
		before := s.latestOf(wt.h, k, from, wt.recordedOnly)
		after := s.latestOf(wt.h, k, to, wt.recordedOnly)
		if before == after || after == nil {
			continue
		}
		in0 := before != nil && before.typ != Deleted && wt.matches(before)
		in1 := after.typ != Deleted && wt.matches(after)
		typ, src := Modified, after
		switch {
		case in0 && in1:
		case in1:
			typ = Added
		case in0:
			typ = Deleted
			if after.typ != Deleted {
				src = before // out of scope: its last version in it
			}
		default:
			continue
		}
		o, _, err := s.servedAs(src, wt.w.Media.Format, wt.info.GVK())
		if err == nil {
			o, err = setRV(o, formatRV(s.order(after)))
		}
		if err != nil {
			return n, err
		}
		b, err := wt.w.Event(typ.String(), o)
		if err != nil {
			return n, err
		}
		wt.init = append(wt.init, wt.w.Frame(b))
		n++
	}
	wt.cursor = to
	return n, nil
}

// ChangesBack returns the served resourceVersion the world was at n
// changes (of any resource) before its point, or the oldest it can still
// answer at.
func (s *Store) ChangesBack(n int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.clk.last
	var rvs []uint64
	for _, h := range s.res {
		for _, es := range [][]*entry{h.rec, h.syn} {
			for _, e := range es {
				if rv := s.order(e); s.visible(e, last) && rv >= s.oldest {
					rvs = append(rvs, rv)
				}
			}
		}
	}
	sort.Slice(rvs, func(i, j int) bool { return rvs[i] > rvs[j] })
	uniq := rvs[:0]
	for i, rv := range rvs {
		if i == 0 || rv != rvs[i-1] {
			uniq = append(uniq, rv)
		}
	}
	switch {
	case len(uniq) == 0:
		return last
	case n < len(uniq):
		return uniq[n]
	}
	return max(uniq[len(uniq)-1], s.oldest)
}
