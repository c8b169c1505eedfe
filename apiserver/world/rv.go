package world

import (
	"sort"
	"strconv"
)

// clock numbers the replay's history: the resourceVersions a recording
// holds and those the replay gives its clients' writes, in one strictly
// increasing sequence. Not safe for concurrent use (the Store's lock).
//
// Recorded resourceVersions go out as recorded while there is room for
// the writes between them. A write at the world's point p gets the next
// number after everything served so far; if that number is not below the
// next recorded resourceVersion after p, every recorded resourceVersion
// above p is shifted up to make room (no client has been served one yet:
// p is the highest served). served(r) is fixed once any client was served
// r, so every client sees one history whose numbers only grow.
type clock struct {
	rec    []uint64 // recorded numeric resourceVersions, sorted, unique
	point  uint64   // highest recorded resourceVersion served (the world's point)
	last   uint64   // highest resourceVersion served, recorded or synthesized
	shifts []shift  // ascending after; delta cumulative
}

// shift: recorded resourceVersions above after are served delta higher.
type shift struct {
	after, delta uint64
}

func newClock(rec []uint64, start uint64) *clock {
	sort.Slice(rec, func(i, j int) bool { return rec[i] < rec[j] })
	out := rec[:0]
	for i, r := range rec {
		if i == 0 || r != rec[i-1] {
			out = append(out, r)
		}
	}
	return &clock{rec: out, point: start, last: start}
}

// served returns the resourceVersion recorded r goes out as.
func (c *clock) served(r uint64) uint64 {
	i := sort.Search(len(c.shifts), func(i int) bool { return c.shifts[i].after >= r })
	if i == 0 {
		return r
	}
	return r + c.shifts[i-1].delta
}

// recorded returns the recorded resourceVersion that goes out as s, and
// false if none does (s is a synthesized one, or no recorded one).
func (c *clock) recorded(s uint64) (uint64, bool) {
	// Segment k covers recorded r in (shifts[k-1].after, shifts[k].after]
	// with delta shifts[k-1].delta (0 for the first).
	lo, delta := uint64(0), uint64(0)
	for k := 0; k <= len(c.shifts); k++ {
		hi := ^uint64(0)
		if k < len(c.shifts) {
			hi = c.shifts[k].after
		}
		if s >= delta {
			r := s - delta
			if (k == 0 || r > lo) && r <= hi {
				return r, c.has(r)
			}
		}
		if k < len(c.shifts) {
			lo, delta = c.shifts[k].after, c.shifts[k].delta
		}
	}
	return 0, false
}

func (c *clock) has(r uint64) bool {
	i := sort.Search(len(c.rec), func(i int) bool { return c.rec[i] >= r })
	return i < len(c.rec) && c.rec[i] == r
}

// observe records that recorded r is being served and returns what it
// goes out as; the world's point moves up to r.
func (c *clock) observe(r uint64) uint64 {
	if r > c.point {
		c.point = r
	}
	s := c.served(r)
	if s > c.last {
		c.last = s
	}
	return s
}

// next allocates the resourceVersion of a write at the world's point.
func (c *clock) next() uint64 {
	cand := c.last + 1
	i := sort.Search(len(c.rec), func(i int) bool { return c.rec[i] > c.point })
	if i < len(c.rec) {
		if sn := c.served(c.rec[i]); cand >= sn {
			inc := cand + 1 - sn
			d := c.served(c.rec[i]) - c.rec[i] + inc
			if n := len(c.shifts); n > 0 && c.shifts[n-1].after == c.point {
				c.shifts[n-1].delta = d
			} else {
				c.shifts = append(c.shifts, shift{after: c.point, delta: d})
			}
		}
	}
	c.last = cand
	return cand
}

// shifted reports whether any recorded resourceVersion goes out changed.
func (c *clock) shifted() bool { return len(c.shifts) > 0 }

func formatRV(n uint64) string { return strconv.FormatUint(n, 10) }

// parseRV reads a resourceVersion as etcd writes it (a decimal uint64).
func parseRV(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
