package stream

import (
	"sync"

	"github.com/wtrace/wtrace/replay/internal/pace"
)

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
