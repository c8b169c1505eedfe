package replay

import (
	"container/heap"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// sweepEvery is how often the scheduler checks that the clients of its
// parked streams are still there (see scheduler). A client that closes
// its connection is noticed within twice this (one sweep to the next,
// plus the sweep itself), or when a write to it fails.
const sweepEvery = time.Second

// scheduler carries the waiting watch streams of a server without a
// goroutine each. A stream on its path — HTTP/1.1 over plain TCP, taken
// over (ownConn), on the real clock, without Follow or Out, on Linux (see
// ownConn.park) — that has to wait for its next write parks here instead
// (see streamer.waitUntil): its goroutine returns, and the stream is kept
// in a heap by the time it is due. One goroutine sleeps until the
// earliest, and for each due stream runs the rest of its body (st.rest)
// itself: the writes due now, from the exchange's plan in memory, each
// batch in one non-blocking writev (streamer.tryWrite), until the stream
// must wait again, when it goes back in the heap. What could block it
// goes to a new goroutine (streamer.resume, through Server.drive), which
// carries the stream on with the blocking path and parks it again or ends
// it: a write the client does not take at once (the rest of it is written
// with the write timeout, so a slow client never delays the others),
// reading the session file, the end of the stream. A server has one
// scheduler per GOMAXPROCS (shards, so that the writes use every core);
// a stream gets one, round robin, when it takes its connection over.
//
// A parked stream has no reader: every sweepEvery the scheduler reads
// each parked connection without blocking (ownConn.peer), sweepBatch at a
// time between due streams, and ends the streams whose client left (read
// EOF or an error); a write error ends a stream at once. Close ends every
// parked stream (stop).
//
// The heap is guarded by mu; a stream is touched by one goroutine at a
// time: its own until it parks, the scheduler's while it is parked or
// stepped, then the goroutine the scheduler hands it to.
type scheduler struct {
	s       *Server
	mu      sync.Mutex
	h       streamHeap
	closed  bool
	started bool
	wake    chan struct{}
	done    chan struct{}
	due     []*streamer // scratch of loop
	snap    []*streamer // scratch of loop: the streams a sweep checks
	gone    []*streamer // scratch of sweep
	w       rawWriter   // the loop's writev state (see ownConn.tryWrite)
	// stepped counts the streams the scheduler carried on itself, handed
	// those it gave to a goroutine (for tests).
	stepped, handed atomic.Int64
}

// schedStats returns how many streams are parked, and the sums of
// stepped and handed, over the server's shards (for tests).
func (s *Server) schedStats() (parked int, stepped, handed int64) {
	for _, sc := range s.scs {
		sc.mu.Lock()
		parked += len(sc.h)
		sc.mu.Unlock()
		stepped += sc.stepped.Load()
		handed += sc.handed.Load()
	}
	return parked, stepped, handed
}

func newScheduler(s *Server) *scheduler {
	sc := &scheduler{s: s, wake: make(chan struct{}, 1), done: make(chan struct{})}
	sc.w.init()
	return sc
}

// park hands stream st, which parked (see streamer.waitUntil), to the
// scheduler, from the stream's goroutine. It returns false, and st stays
// the caller's, once the server is closing.
func (sc *scheduler) park(st *streamer) bool {
	oc := st.own
	// A deadline left from the blocking path would fail the scheduler's
	// non-blocking writes and peeks once it passed.
	if !oc.deadline.IsZero() {
		_ = oc.conn.SetWriteDeadline(time.Time{})
		oc.deadline = time.Time{}
	}
	if oc.readDeadline {
		_ = oc.conn.SetReadDeadline(time.Time{})
		oc.readDeadline = false
	}
	if st.ctx.Err() != nil {
		return false
	}
	return sc.push(st, true)
}

// push puts st in the heap by its parkAt (zero: never due); wake: from
// another goroutine than the loop, which is told when st is the first due.
func (sc *scheduler) push(st *streamer, wake bool) bool {
	st.due = maxDue
	if !st.parkAt.IsZero() {
		st.due = st.parkAt.UnixNano()
	}
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return false
	}
	if !sc.started {
		sc.started = true
		go sc.loop()
	}
	heap.Push(&sc.h, st)
	first := st.hidx == 0
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

// loop runs the due streams and the sweeps until stop.
func (sc *scheduler) loop() {
	defer close(sc.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	nextSweep := time.Now().Add(sweepEvery)
	var sweep []*streamer // the parked streams a sweep has still to check
	for {
		sc.mu.Lock()
		if sc.closed {
			sc.mu.Unlock()
			return
		}
		now := time.Now()
		due := sc.due[:0]
		for len(sc.h) > 0 && sc.h[0].due <= now.UnixNano() {
			due = append(due, heap.Pop(&sc.h).(*streamer))
		}
		if len(sweep) == 0 && !now.Before(nextSweep) {
			sc.snap = append(sc.snap[:0], sc.h...)
			sweep = sc.snap
			nextSweep = now.Add(sweepEvery)
		}
		wait := nextSweep.Sub(now)
		if len(sc.h) > 0 && sc.h[0].due != maxDue {
			wait = min(wait, time.Duration(sc.h[0].due-now.UnixNano()))
		}
		sc.mu.Unlock()
		for i, st := range due {
			sc.fire(st)
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
// sweep began (see ownConn.peer), and ends those still parked whose client
// left. A stream that left the heap since (due, or ended) is not the
// sweep's any more: its check is dropped.
func (sc *scheduler) sweep(sts []*streamer) {
	gone := sc.gone[:0]
	for _, st := range sts {
		if !st.own.peer(&sc.w) {
			gone = append(gone, st)
		}
	}
	if len(gone) == 0 {
		return
	}
	sc.mu.Lock()
	n := 0
	for _, st := range gone {
		if st.hidx >= 0 && st.hidx < len(sc.h) && sc.h[st.hidx] == st {
			heap.Remove(&sc.h, st.hidx)
			gone[n] = st
			n++
		}
	}
	sc.mu.Unlock()
	for _, st := range gone[:n] {
		st.cancel() // the client left
		sc.end(st, "cancelled")
	}
	clear(gone)
	sc.gone = gone[:0]
}

// fire carries on due stream st: on the scheduler when it only has to
// write, else on a goroutine.
func (sc *scheduler) fire(st *streamer) {
	if st.ctx.Err() != nil {
		sc.end(st, "cancelled")
		return
	}
	st.parked = false
	if !st.needGo && len(st.own.pend) == 0 {
		sc.stepped.Add(1)
		if !sc.step(st) {
			return
		}
		if st.parked && !st.needGo {
			st.parked = false
			if !sc.push(st, false) {
				sc.end(st, "cancelled") // the server closed
			}
			return
		}
		st.parked = false
	}
	sc.handed.Add(1)
	go sc.s.drive(st, st.resume)
}

// step runs st.rest on the scheduler (inSched). A panic there ends the
// stream as on its own goroutine (see Server.drive): step then returns
// false.
func (sc *scheduler) step(st *streamer) (ok bool) {
	st.inSched = true
	defer func() {
		st.inSched = false
		if v := recover(); v != nil {
			sc.s.log.Error("replay: panic serving a stream", "target", truncate(st.target), "panic", v, "stack", string(debug.Stack()))
			go sc.s.drive(st, func() { panic(http.ErrAbortHandler) })
		}
	}()
	st.rest()
	return true
}

// end ends parked stream st (stopped says why) on a goroutine.
func (sc *scheduler) end(st *streamer, stopped string) {
	st.parked, st.needGo = false, false
	if st.stopped == "" {
		st.stopped = stopped
	}
	go sc.s.drive(st, func() {})
}

// stop ends every parked stream and the scheduler's goroutine (Close,
// after cancelling the requests).
func (sc *scheduler) stop() {
	sc.mu.Lock()
	sc.closed = true
	h := sc.h
	sc.h = nil
	started := sc.started
	sc.mu.Unlock()
	for _, st := range h {
		sc.end(st, "cancelled")
	}
	select {
	case sc.wake <- struct{}{}:
	default:
	}
	if started {
		<-sc.done
	}
}

// resume carries on parked stream st on a goroutine of its own (see
// Server.drive): the rest of a write the client did not take at once,
// then st.rest.
func (st *streamer) resume() {
	oc := st.own
	if len(oc.pend) > 0 {
		p := oc.pend
		oc.pend = nil
		if !st.ownWrite(net.Buffers{p}) {
			return
		}
	}
	st.needGo = false
	st.rest()
}

// runRest runs f, the rest of a stream's body, resumably: on the
// scheduler's path (mayPark) the stream parks where it would wait, and f
// is called again when it is due, until it returns without parking. f
// must carry on from where the last call left (and see st.inSched).
func (st *streamer) runRest(f func()) {
	if st.own != nil && st.own.park {
		st.rest = f
	}
	f()
}

// mayPark reports whether st parks where it would wait (see scheduler).
func (st *streamer) mayPark() bool { return st.rest != nil }

// yield parks st for a goroutine to carry it on at once (on the
// scheduler, where it would block).
func (st *streamer) yield() {
	st.parked, st.parkAt, st.needGo = true, time.Time{}, true
}

// streamHeap orders parked streams by due time.
type streamHeap []*streamer

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h streamHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *streamHeap) Push(x any) {
	st := x.(*streamer)
	st.hidx = len(*h)
	*h = append(*h, st)
}
func (h *streamHeap) Pop() any {
	old := *h
	st := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	st.hidx = -1
	return st
}
