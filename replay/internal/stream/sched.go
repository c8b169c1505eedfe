package stream

import (
	"net"
	"net/http"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/wtrace/wtrace/replay/internal/pace"
)

// The scheduler's path (see package replay/internal/pace): a stream on
// it — HTTP/1.1 over plain TCP, taken over (ownConn), on the real clock,
// without Follow or Out, on Linux (see ownConn.park) — that has to wait
// for its next write parks in its shard's pace.Scheduler instead (see
// Stream.waitUntil): its goroutine returns, and the scheduler's
// goroutine, when the stream is due, runs the rest of its body (st.rest)
// itself: the writes due now, from the exchange's plan in memory, each
// batch in one non-blocking writev (Stream.tryWrite), until the stream
// must wait again. What could block it goes to a new goroutine
// (Stream.resume, through Stream.drive), which carries the stream on
// with the blocking path and parks it again or ends it: a write the
// client does not take at once (the rest of it is written with the write
// timeout, so a slow client never delays the others), reading the session
// file, the end of the stream. A stream gets a shard, round robin, when it
// takes its connection over. The Stream is the scheduler's
// pace.Stream.

// park hands stream st, which parked (see Stream.waitUntil), to its
// scheduler, from the stream's goroutine. It returns false, and st stays
// the caller's, once the server is closing.
func (st *Stream) park() bool {
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
	return st.sc.Push(st)
}

// Slot, Due and Conn are st's place in the scheduler, when it is due
// (parkAt) and its connection (pace.Stream).
func (st *Stream) Slot() *pace.Slot      { return &st.slot }
func (st *Stream) Due() time.Time        { return st.parkAt }
func (st *Stream) Conn() syscall.RawConn { return st.own.raw }

// Fire carries on due stream st (pace.Stream): on the scheduler when it
// only has to write, else on a goroutine. It returns true when st parked
// again.
func (st *Stream) Fire() bool {
	if st.ctx.Err() != nil {
		st.endParked("cancelled")
		return false
	}
	st.parked = false
	if !st.needGo && len(st.own.pend) == 0 {
		st.sc.Stepped.Add(1)
		if !st.step() {
			return false
		}
		if st.parked && !st.needGo {
			st.parked = false
			return true
		}
		st.parked = false
	}
	st.sc.Handed.Add(1)
	go st.drive(st.resume)
	return false
}

// step runs st.rest on the scheduler (inSched). A panic there ends the
// stream as on its own goroutine (see Stream.drive): step then returns
// false.
func (st *Stream) step() (ok bool) {
	st.inSched = true
	defer func() {
		st.inSched = false
		if v := recover(); v != nil {
			st.hub.log.Error("replay: panic serving a stream", "target", Truncate(st.target), "panic", v, "stack", string(debug.Stack()))
			go st.drive(func() { panic(http.ErrAbortHandler) })
		}
	}()
	st.rest()
	return true
}

// End ends parked stream st (pace.Stream): its client left, or the
// server closes.
func (st *Stream) End(left bool) {
	if left {
		st.cancel()
	}
	st.endParked("cancelled")
}

// end ends parked stream st (stopped says why) on a goroutine.
func (st *Stream) endParked(stopped string) {
	st.parked, st.needGo = false, false
	if st.stopped == "" {
		st.stopped = stopped
	}
	go st.drive(func() {})
}

// resume carries on parked stream st on a goroutine of its own (see
// Stream.drive): the rest of a write the client did not take at once,
// then st.rest.
func (st *Stream) resume() {
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
func (st *Stream) RunRest(f func()) {
	if st.own != nil && st.own.park {
		st.rest = f
	}
	f()
}

// mayPark reports whether st parks where it would wait (see sched.go).
func (st *Stream) mayPark() bool { return st.rest != nil }

// yield parks st for a goroutine to carry it on at once (on the
// scheduler, where it would block).
func (st *Stream) Yield() {
	st.parked, st.parkAt, st.needGo = true, time.Time{}, true
}
