package replay

// A watch of the world on the scheduler's path (see sched.go) parks
// between its events like a recorded one, with no goroutine of its own:
// until the time of its next recorded change (a watch that paces them),
// its client's timeoutSeconds, or a change of the world, whichever comes
// first. The world's changes reach it through the server's waker: one
// goroutine that waits on world.Store.Changed and wakes every parked
// watch of the world (pace.Scheduler.Wake), which then sends what it has
// (world.Watch.Take: one encoding of a change for all the watches that
// send it in the same encoding) and parks again. Ten thousand watchers of
// a resource thus cost one goroutine per shard and one writev each per
// change, not ten thousand goroutines taking the world's lock in turn.
