package replay

import (
	"net"
	"sync"
	"time"
)

// pausable is the listener a Server opens itself (Options.Listener
// unset): a restart (perturbation restart) closes it for its downtime and
// listens on the same address again after, so that a client connecting
// meanwhile is refused (ECONNREFUSED), as by a kube-apiserver that is
// down — client-go's reflector then retries its watch from where it was,
// without a relist (reflector.go, isWatchErrorRetriable), where a
// connection accepted and closed would make it list again. Safe for
// concurrent use.
type pausable struct {
	addr net.Addr

	mu     sync.Mutex
	ln     net.Listener  // nil while paused
	resume chan struct{} // closed when listening again (or closed)
	closed bool
}

// relistenTries and relistenEvery bound how long Resume tries to listen
// on the address again (another process may hold it a moment).
const (
	relistenTries = 100
	relistenEvery = 20 * time.Millisecond
)

func newPausable(ln net.Listener) *pausable {
	return &pausable{addr: ln.Addr(), ln: ln}
}

func (p *pausable) Accept() (net.Conn, error) {
	for {
		p.mu.Lock()
		ln, resume, closed := p.ln, p.resume, p.closed
		p.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if ln == nil {
			<-resume
			continue
		}
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		p.mu.Lock()
		paused := p.ln != ln && !p.closed
		p.mu.Unlock()
		if !paused {
			return nil, err
		}
	}
}

func (p *pausable) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.ln == nil {
		close(p.resume)
		return nil
	}
	return p.ln.Close()
}

func (p *pausable) Addr() net.Addr { return p.addr }

// Pause stops listening: connections are refused until Resume.
func (p *pausable) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln, p.resume = nil, make(chan struct{})
}

// Resume listens on the address again; false if it could not.
func (p *pausable) Resume() bool {
	var ln net.Listener
	var err error
	for i := 0; i < relistenTries; i++ {
		if ln, err = net.Listen(p.addr.Network(), p.addr.String()); err == nil {
			break
		}
		time.Sleep(relistenEvery)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln != nil {
		if ln != nil {
			ln.Close()
		}
		return !p.closed
	}
	if err != nil {
		return false
	}
	p.ln = ln
	close(p.resume)
	return true
}
