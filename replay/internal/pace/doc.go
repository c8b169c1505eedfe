// Package pace is how a replay's streams wait and are written: the Clock
// a replay runs on (Real, or a FakeClock a test moves), and the Scheduler
// that carries waiting streams without a goroutine each — a heap by due
// time, one goroutine that fires each due stream and writes its batches
// with one non-blocking writev each (Writev), and a sweep that notices
// clients that left. A stream that waits for something other than time
// (a watch of the world, for its next change) parks with no due time and
// is made due by Wake, from any goroutine, without a Wake ever lost.
//
// Contract: a Scheduler never blocks on a client: its writes and reads
// are non-blocking, and what could block is the Stream's to hand to a
// goroutine of its own (Stream.Fire). A Stream is touched by one
// goroutine at a time (its owner's until Push, the scheduler's while
// parked or fired). Stop ends every parked stream and returns once the
// scheduler's goroutine has exited. Parking is supported on Linux only
// (Supported); elsewhere a stream keeps its goroutine.
//
// It is internal to package replay, whose streams (package
// replay/internal/stream, sched.go) are its Streams.
package pace
