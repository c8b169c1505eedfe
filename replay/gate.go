package replay

import (
	"sync"
	"sync/atomic"
)

// gate counts the handlers serving requests and lets none in once the
// server closes, so that Close can wait for those in flight. The zero
// value is open.
type gate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	n      atomic.Int64 // handlers in (the tests watch it)
}

// enter registers a handler; false once the gate is closed.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	g.n.Add(1)
	return true
}

// exit releases a handler's place (see enter).
func (g *gate) exit() {
	g.n.Add(-1)
	g.wg.Done()
}

// active returns how many handlers are in.
func (g *gate) active() int64 { return g.n.Load() }

// close lets no new handler in.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// wait returns once every handler that entered has exited.
func (g *gate) wait() { g.wg.Wait() }
