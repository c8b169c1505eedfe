package pace

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SweepEvery is how often a Scheduler checks that the clients of its
// parked streams are still there. A client that closes its connection is
// noticed within twice this (one sweep to the next, plus the sweep
// itself), or when a write to it fails.
const SweepEvery = time.Second

// Stream is a waiting stream a Scheduler carries. Its methods are called
// by one goroutine at a time: the scheduler's while the stream is in the
// heap or fired, else its owner's.
type Stream interface {
	// Slot is the scheduler's bookkeeping of the stream.
	Slot() *Slot
	// Due is when the stream is next due; zero: never (only its client
	// leaving or Stop end it).
	Due() time.Time
	// Conn is the stream's connection, which a sweep reads without
	// blocking to notice a client that left.
	Conn() syscall.RawConn
	// Fire carries the due stream on, on the scheduler's goroutine: it
	// writes what is due now (through Scheduler.Writev) or hands the
	// stream to a goroutine of its own. It returns true when the stream
	// waits again: the scheduler puts it back by Due.
	Fire() (again bool)
	// End ends a stream that was parked: left says its client left (a
	// sweep), else the scheduler stops. It must not block (a goroutine
	// does the rest).
	End(left bool)
}

// Slot is the place of a Stream in a Scheduler's heap; the zero Slot is
// ready.
type Slot struct {
	idx int // in the heap; -1 out of it
	// woken: Wake came while the stream was out of the heap (its owner
	// or Fire was carrying it): it is due at once when next pushed.
	woken bool
}

// Scheduler carries the waiting streams of a server without a goroutine
// each: a stream that has to wait for its next write parks here (Push),
// its goroutine returns, and the stream is kept in a heap by the time it
// is due. One goroutine sleeps until the earliest, and fires each due
// stream (Stream.Fire), which writes what is due itself, each batch in one
// non-blocking writev (Writev), or hands the stream to a goroutine when
// that could block. A server has one Scheduler per GOMAXPROCS (shards, so
// that the writes use every core).
//
// A parked stream has no reader: every SweepEvery the scheduler reads
// each parked connection without blocking, sweepBatch at a time between
// due streams, and ends the streams whose client left (Stream.End). Stop
// ends every parked stream.
//
// The heap is guarded by mu; a stream is touched by one goroutine at a
// time: its own until it parks, the scheduler's while it is parked or
// fired, then the goroutine it is handed to.
type Scheduler struct {
	mu      sync.Mutex
	h       streamHeap
	closed  bool
	started bool
	wake    chan struct{}
	done    chan struct{}
	due     []Stream // scratch of loop
	snap    []entry  // scratch of loop: the streams a sweep checks
	gone    []Stream // scratch of sweep
	w       writer   // the loop's writev state (see Writev)
	// Stepped counts the streams that carried on on the scheduler,
	// Handed those it handed to a goroutine (kept by the streams' Fire,
	// for tests).
	Stepped, Handed atomic.Int64
}

// New returns a Scheduler; its goroutine starts with the first Push.
func New() *Scheduler {
	sc := &Scheduler{wake: make(chan struct{}, 1), done: make(chan struct{})}
	sc.w.init()
	return sc
}

// Len returns how many streams are parked.
func (sc *Scheduler) Len() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.h)
}

// Push parks st, from the stream's goroutine, until its Due. It returns
// false, and st stays the caller's, once the scheduler stopped.
func (sc *Scheduler) Push(st Stream) bool { return sc.push(st, true) }

// Writev writes bufs to rc without blocking, from Stream.Fire (the
// scheduler's goroutine), and returns how many bytes went out (fewer than
// all when the socket's buffer is full).
func (sc *Scheduler) Writev(rc syscall.RawConn, bufs [][]byte) (int64, error) {
	return sc.w.writev(rc, bufs)
}

// Wake makes each of sts, streams of this Scheduler, due at once: a
// parked one is moved to the front of the heap; one that is not parked
// (its owner or Fire is carrying it, and may be about to Push it) is due
// at once when it is next pushed, so that a Wake is never lost between a
// stream's last look at what it waits for and its Push. A stream woken
// for nothing finds nothing to do and parks again. From any goroutine.
func (sc *Scheduler) Wake(sts []Stream) {
	if len(sts) == 0 {
		return
	}
	now := time.Now().UnixNano()
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	first := false
	for _, st := range sts {
		sl := st.Slot()
		i := sl.idx
		if i < 0 || i >= len(sc.h) || sc.h[i].st != st {
			sl.woken = true
			continue
		}
		if sc.h[i].due > now {
			sc.h[i].due = now
			sc.h.up(i)
		}
		first = first || sl.idx == 0
	}
	sc.mu.Unlock()
	if first {
		select {
		case sc.wake <- struct{}{}:
		default:
		}
	}
}

// push puts st in the heap by its Due (now, if it was woken meanwhile);
// wake: from another goroutine than the loop, which is told when st is
// the first due.
func (sc *Scheduler) push(st Stream, wake bool) bool {
	e := entry{due: maxDue, sl: st.Slot(), st: st}
	if at := st.Due(); !at.IsZero() {
		e.due = at.UnixNano()
	}
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return false
	}
	if e.sl.woken {
		e.sl.woken = false
		e.due = min(e.due, time.Now().UnixNano())
	}
	if !sc.started {
		sc.started = true
		go sc.loop()
	}
	sc.h.push(e)
	first := e.sl.idx == 0
	sc.mu.Unlock()
	if first && wake {
		select {
		case sc.wake <- struct{}{}:
		default:
		}
	}
	return true
}

const maxDue = int64(^uint64(0) >> 1)

// sweepBatch is how many parked connections a sweep checks between two
// looks at the heap, so that a sweep over many streams does not delay the
// ones that fall due meanwhile.
const sweepBatch = 256

// loop runs the due streams and the sweeps until Stop.
func (sc *Scheduler) loop() {
	defer close(sc.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	nextSweep := time.Now().Add(SweepEvery)
	var sweep []entry // the parked streams a sweep has still to check
	for {
		sc.mu.Lock()
		if sc.closed {
			sc.mu.Unlock()
			return
		}
		now := time.Now()
		due := sc.due[:0]
		for len(sc.h) > 0 && sc.h[0].due <= now.UnixNano() {
			due = append(due, sc.h.remove(0).st)
		}
		if len(sweep) == 0 && !now.Before(nextSweep) {
			sc.snap = append(sc.snap[:0], sc.h...)
			sweep = sc.snap
			nextSweep = now.Add(SweepEvery)
		}
		wait := nextSweep.Sub(now)
		if len(sc.h) > 0 && sc.h[0].due != maxDue {
			wait = min(wait, time.Duration(sc.h[0].due-now.UnixNano()))
		}
		sc.mu.Unlock()
		for i, st := range due {
			if st.Fire() && !sc.push(st, false) {
				st.End(false) // the scheduler stopped
			}
			due[i] = nil
		}
		sc.due = due[:0]
		if len(sweep) > 0 {
			k := min(len(sweep), sweepBatch)
			sc.sweep(sweep[:k])
			clear(sweep[:k])
			if sweep = sweep[k:]; len(sweep) == 0 {
				sc.snap = sc.snap[:0]
			}
			continue
		}
		if len(due) > 0 {
			continue // time passed while writing
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-sc.wake:
		}
	}
}

// sweep checks the connections of sts, streams that were parked when the
// sweep began, and ends those still parked whose client left. A stream
// that left the heap since (due, or ended) is not the sweep's any more:
// its check is dropped.
func (sc *Scheduler) sweep(es []entry) {
	gone := sc.gone[:0]
	for _, e := range es {
		if !sc.w.peer(e.st.Conn()) {
			gone = append(gone, e.st)
		}
	}
	if len(gone) == 0 {
		return
	}
	sc.mu.Lock()
	n := 0
	for _, st := range gone {
		if i := st.Slot().idx; i >= 0 && i < len(sc.h) && sc.h[i].st == st {
			sc.h.remove(i)
			gone[n] = st
			n++
		}
	}
	sc.mu.Unlock()
	for _, st := range gone[:n] {
		st.End(true)
	}
	clear(gone)
	sc.gone = gone[:0]
}

// Stop ends every parked stream (Stream.End) and the scheduler's
// goroutine; a Push after it returns false.
func (sc *Scheduler) Stop() {
	sc.mu.Lock()
	sc.closed = true
	h := sc.h
	sc.h = nil
	started := sc.started
	sc.mu.Unlock()
	for _, e := range h {
		e.st.End(false)
	}
	select {
	case sc.wake <- struct{}{}:
	default:
	}
	if started {
		<-sc.done
	}
}

// entry is a parked stream in the heap: when it is due (Unix ns; maxDue:
// never), and its Slot.
type entry struct {
	due int64
	sl  *Slot
	st  Stream
}

// streamHeap orders parked streams by due time: a binary min-heap (as
// container/heap, without boxing an entry in an interface on each push),
// which keeps each stream's Slot.idx.
type streamHeap []entry

func (h streamHeap) less(i, j int) bool { return h[i].due < h[j].due }

func (h streamHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sl.idx, h[j].sl.idx = i, j
}

func (h *streamHeap) push(e entry) {
	e.sl.idx = len(*h)
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// remove takes out the entry at i (0: the first due).
func (h *streamHeap) remove(i int) entry {
	n := len(*h) - 1
	if n != i {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	old := *h
	e := old[n]
	old[n] = entry{}
	*h = old[:n]
	e.sl.idx = -1
	return e
}

func (h streamHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h streamHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // = 2*i + 2  // right child
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
