package fromworld

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
)

// DeliveryWait bounds how long a write's answer waits for its watch events
// to have gone out (see deliveries).
const DeliveryWait = 100 * time.Millisecond

// deliveries holds a write's answer until the watch events it caused have
// gone out to every watcher of the world (DeliveryWait at most): a client
// that reads its informer's cache right after its write's answer finds
// its write there, as it mostly does against a real apiserver, whose
// writes take etcd's milliseconds while its watch cache follows within
// one. Without it, a replay that answers at once sends the answer before
// the event, and controllers that sync again at once act on caches a
// write behind (conflicts a real run does not have).
type deliveries struct {
	mu      sync.Mutex
	watches map[*world.Watch]struct{}
	ch      chan struct{} // closed and replaced when a watch caught up, while a write waits
	waiting atomic.Int32  // writes in wait
}

func newDeliveries() *deliveries {
	return &deliveries{watches: map[*world.Watch]struct{}{}, ch: make(chan struct{})}
}

func (d *deliveries) add(wt *world.Watch) {
	d.mu.Lock()
	d.watches[wt] = struct{}{}
	d.mu.Unlock()
}

func (d *deliveries) remove(wt *world.Watch) {
	d.mu.Lock()
	delete(d.watches, wt)
	d.mu.Unlock()
	d.caughtUp()
}

// caughtUp says that a watch has sent everything it had. It costs an
// atomic load while no write waits (every watcher calls it at every
// change).
func (d *deliveries) caughtUp() {
	if d.waiting.Load() == 0 {
		return
	}
	d.mu.Lock()
	close(d.ch)
	d.ch = make(chan struct{})
	d.mu.Unlock()
}

// deliveryGrace is how long a write's answer waits after its events went
// out: the time a client's informer takes to take an event into its cache
// (a millisecond or two), so that the worker that gets the answer finds
// its write there.
const deliveryGrace = 2 * time.Millisecond

// wait returns once every watch has caught up to served resourceVersion
// rv (and deliveryGrace has passed), after DeliveryWait, or when done is
// closed.
func (d *deliveries) wait(rv uint64, done <-chan struct{}) {
	// Counted before the first look at the watches: a watch that catches
	// up after it closes the channel that look took.
	d.waiting.Add(1)
	defer d.waiting.Add(-1)
	defer func() {
		t := time.NewTimer(deliveryGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}()
	deadline := time.NewTimer(DeliveryWait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		behind := false
		for wt := range d.watches {
			if wt.Caught() < rv {
				behind = true
				break
			}
		}
		ch := d.ch
		d.mu.Unlock()
		if !behind {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		case <-done:
			return
		}
	}
}

// writeLatency holds a write until Options.WriteLatency (by default the
// recorded apiserver's median) has passed since arrival: it lands in the
// world (its events sent, its answer written) no sooner than it did in
// the recorded apiserver.
func (a *Answerer) writeLatency(arrival time.Time, done <-chan struct{}) {
	d := a.opts.WriteLatency
	if d == 0 {
		d = a.store.Environment().WriteLatency
	}
	wait := arrival.Add(d).Sub(a.clock.Now())
	if d <= 0 || wait <= 0 {
		return
	}
	t := a.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C():
	case <-done:
	case <-a.ctx.Done():
	}
}
