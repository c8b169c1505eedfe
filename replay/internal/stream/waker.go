package stream

import (
	"sync"

	"github.com/wtrace/wtrace/replay/internal/pace"
)

// Waker wakes parked streams that wait for something other than time (a
// watch of the world, for its next change): one goroutine waits on the
// channel changed returns and, each time it is closed, wakes every stream
// added (pace.Scheduler.Wake, which never loses a wake between a stream's
// last look and its Push), which then sends what it has and parks again.
// Ten thousand such streams thus cost one goroutine, not ten thousand.
// Its goroutine starts with the first stream added, and ends with the
// hub's context (Hub.Wait). Safe for concurrent use.
type Waker struct {
	hub     *Hub
	changed func() <-chan struct{}
	mu      sync.Mutex
	sts     map[*Stream]struct{}
	started bool
	// byShard is the goroutine's scratch: the streams to wake, by shard.
	byShard map[*pace.Scheduler][]pace.Stream
}

// NewWaker returns a Waker of streams woken each time the channel
// changed returns (a new one each call: the next change's) is closed.
func (h *Hub) NewWaker(changed func() <-chan struct{}) *Waker {
	return &Waker{hub: h, changed: changed}
}

// Add makes st, a stream on the scheduler's path (Parks), one to wake.
func (k *Waker) Add(st *Stream) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sts == nil {
		k.sts = map[*Stream]struct{}{}
	}
	k.sts[st] = struct{}{}
	if !k.started {
		k.started = true
		k.hub.wg.Add(1)
		go k.run()
	}
}

// Remove forgets st (its stream ended).
func (k *Waker) Remove(st *Stream) {
	k.mu.Lock()
	delete(k.sts, st)
	k.mu.Unlock()
}

// run wakes the streams at each change until the hub's context ends. The
// next change's channel is taken before the streams are woken: a change
// that lands while they wake is either seen by their look, which comes
// after, or closes that channel.
func (k *Waker) run() {
	defer k.hub.wg.Done()
	ch := k.changed()
	k.byShard = map[*pace.Scheduler][]pace.Stream{}
	for {
		select {
		case <-ch:
		case <-k.hub.ctx.Done():
			return
		}
		ch = k.changed()
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
