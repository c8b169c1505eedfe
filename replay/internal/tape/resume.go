package tape

import (
	"errors"
	"io"
	"strconv"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// Resume is where a watch from a resourceVersion continues: just after
// the event (or bookmark) that carried it in a recorded watch.
type Resume struct {
	X      *Exchange
	Off    int64 // body offset just past that event
	Time   int64 // its capture time: the new timeline's origin
	Remain int   // events after it
}

// maxMarkFrames bounds the events of one watch whose marks (where each
// ends, its time and resourceVersion: about 60 bytes each) are kept in the
// cache; the marks of longer watches are read from the file each time.
const maxMarkFrames = 1 << 18

// EachMark calls fn with the marks of watch exchange x of f in order,
// until fn returns false: from c, or streamed from the file for a long
// watch.
func EachMark(f *formats.File, c *Cache, x *Exchange, fn func(i int, m Mark) bool) error {
	if x.Info.Frames > maxMarkFrames {
		sc := f.ExchangeRecords(x.ID)
		i := 0
		for {
			rec, err := sc.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				var de *formats.DamageError
				if errors.As(err, &de) {
					continue
				}
				return err
			}
			if fr, ok := rec.(*formats.Frame); ok {
				if !fn(i, MarkOf(x, fr)) {
					return nil
				}
				i++
			}
		}
	}
	v, err := c.Get("marks:"+strconv.FormatInt(x.ID, 10), func() (any, int64, error) {
		ms, err := ReadMarks(f, x)
		if err != nil {
			return nil, 0, err
		}
		var n int64
		for _, m := range ms {
			n += int64(len(m.RV)) + 48
		}
		return ms, n, nil
	})
	if err != nil {
		return err
	}
	for i, m := range v.([]Mark) {
		if !fn(i, m) {
			break
		}
	}
	return nil
}

// FindResume looks for resourceVersion rv among the live events of the
// recorded watches of a key, cands (see Exchange.Resumable), in recorded
// order, and prefers a point with events after it. found is false if rv
// is not there.
func FindResume(f *formats.File, c *Cache, cands []*Exchange, rv string) (rp Resume, found bool, err error) {
	for _, x := range cands {
		if !x.Resumable() {
			continue
		}
		// The last event carrying rv: a watch from rv wants what is newer,
		// and a bookmark often repeats the resourceVersion of the event
		// before it.
		live := !x.Q.SendInitialEvents
		last, n := -1, 0
		var lm Mark
		err := EachMark(f, c, x, func(i int, m Mark) bool {
			if m.InitialEnd {
				live = true
			}
			if live && m.RV == rv {
				last, lm = i, m
			}
			n = i + 1
			return true
		})
		if err != nil {
			return rp, false, err
		}
		if last < 0 {
			continue
		}
		p := Resume{X: x, Off: lm.End, Time: lm.Time, Remain: n - last - 1}
		if !found || (rp.Remain == 0 && p.Remain > 0) {
			rp, found = p, true
		}
		if rp.Remain > 0 {
			return rp, true, nil
		}
	}
	return rp, found, nil
}

// NewestRV returns the largest numeric resourceVersion a key's watches and
// requests, cands, recorded, and false if there is none.
func NewestRV(f *formats.File, c *Cache, cands []*Exchange) (uint64, bool) {
	var max uint64
	ok := false
	see := func(rv string) {
		if n, good := RVNumber(rv); good && (!ok || n > max) {
			max, ok = n, true
		}
	}
	for _, x := range cands {
		see(x.Q.RV)
		if x.Format == frame.Unknown {
			continue
		}
		_ = EachMark(f, c, x, func(_ int, m Mark) bool {
			see(m.RV)
			return true
		})
	}
	return max, ok
}
