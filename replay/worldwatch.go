package replay

import (
	"sync"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/internal/pace"
)

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

// storeWatchCont is where a world watch on the scheduler's path is (see
// serveStoreWatch): its rest, run each time it is due or woken.
type storeWatchCont struct {
	st *streamer
	wt *world.Watch
}

// step sends the watch's events that are due (together: sendDue), and parks (see waitUntil)
// when it has none: with no time when it waits for the world to change,
// at the next recorded change's time otherwise. The waker wakes it at
// each change. It ends the stream at the client's timeoutSeconds, when
// the client leaves or on a write error.
func (c *storeWatchCont) step() {
	st, s, wt := c.st, c.st.s, c.wt
	for {
		next, pending, more, ok := st.sendDue(wt)
		switch {
		case !ok:
			return
		case pending:
			if !st.waitUntil(st.wakeAt(st.deadline(next.Time, wt.Origin()))) {
				return // parked until then (or woken), or the stream ended
			}
		case !more:
			s.deliv.caughtUp()
			st.waitUntil(st.wakeAt(time.Time{})) // parks until woken (or its next bookmark), or ends the stream
			return
		}
	}
}

// waker wakes the parked watches of the world at each of its changes (see
// above). Its goroutine starts with the first watch, and ends with the
// server.
type waker struct {
	s       *Server
	mu      sync.Mutex
	sts     map[*streamer]struct{}
	started bool
	// byShard is the goroutine's scratch: the watches to wake, by shard.
	byShard map[*pace.Scheduler][]pace.Stream
}

// add makes st, a world watch on the scheduler's path, one to wake.
func (k *waker) add(st *streamer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sts == nil {
		k.sts = map[*streamer]struct{}{}
	}
	k.sts[st] = struct{}{}
	if !k.started {
		k.started = true
		k.s.handlers.Add(1)
		go k.run()
	}
}

// remove forgets st (its stream ended).
func (k *waker) remove(st *streamer) {
	k.mu.Lock()
	delete(k.sts, st)
	k.mu.Unlock()
}

// run wakes the watches at each change until the server closes. The next
// change's channel is taken before the watches are woken: a change that
// lands while they wake is either seen by their Next, which comes after,
// or closes that channel.
func (k *waker) run() {
	defer k.s.handlers.Done()
	ch := k.s.store.Changed()
	k.byShard = map[*pace.Scheduler][]pace.Stream{}
	for {
		select {
		case <-ch:
		case <-k.s.ctx.Done():
			return
		}
		ch = k.s.store.Changed()
		k.mu.Lock()
		for st := range k.sts {
			k.byShard[st.sc] = append(k.byShard[st.sc], st)
		}
		k.mu.Unlock()
		for sc, sts := range k.byShard {
			sc.Wake(sts)
			clear(sts)
			k.byShard[sc] = sts[:0]
		}
	}
}
