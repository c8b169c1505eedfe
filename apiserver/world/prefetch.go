package world

import (
	"net/http"
	"runtime"
	"sync"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// prefetchMin is the smallest body the loader reads ahead: below it, a
// worker's hand-off costs more than the read.
var prefetchMin int64 = 16 << 10 // a variable for TestPrefetchSame

// bodyPrefetch reads the response bodies Load will ask for (loader.body:
// LIST and GET bodies, answers to writes) ahead of it, on workers: their
// records' blocks decompressed, their gzip decoded. Load takes them in
// exchange order; one it passes over is dropped. At most GOMAXPROCS+1
// bodies are read and not yet taken. Not safe for concurrent use (Load's
// goroutine takes); the workers read the File, which is.
type bodyPrefetch struct {
	pos   map[int64]int // exchange ID → index in xs
	xs    []*formats.ExchangeInfo
	res   []chan bodyResult // one each, buffered
	next  int               // the index of the next body Load may take
	slots chan struct{}     // a body read ahead and not yet taken holds one
	stop  chan struct{}
	wg    sync.WaitGroup
	// last is the body taken last (a write's answer is asked for twice).
	lastID  int64
	last    bodyResult
	hasLast bool
}

type bodyResult struct {
	b   []byte
	err error
}

// prefetchable reports whether Load will read x's body whole (see
// loader.exchange) and it is worth reading ahead.
func prefetchable(x *formats.ExchangeInfo, until int64) bool {
	if x.Response == nil || x.Response.Events != frame.Unknown || x.Request.Missing ||
		x.End == nil || x.End.Status != formats.EndComplete ||
		x.Response.Status < 200 || x.Response.Status > 299 ||
		x.BodyBytes < prefetchMin || x.BodyBytes > maxBody {
		return false
	}
	if until != 0 && (x.Request.Time >= until || x.Response.Time >= until || x.End.Time >= until) {
		return false
	}
	switch x.Request.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch:
		return bodyFormat(x.Response.Header) != frame.Unknown
	}
	return false
}

// startPrefetch starts reading ahead the bodies of idx's exchanges that
// Load will read; nil when there are none.
func startPrefetch(f *formats.File, cache *formats.BlockCache, idx *formats.Index, until int64) *bodyPrefetch {
	p := &bodyPrefetch{pos: map[int64]int{}, stop: make(chan struct{})}
	for i := range idx.Exchanges {
		if x := &idx.Exchanges[i]; prefetchable(x, until) {
			p.pos[x.Request.Exchange] = len(p.xs)
			p.xs = append(p.xs, x)
		}
	}
	if len(p.xs) == 0 {
		return nil
	}
	p.res = make([]chan bodyResult, len(p.xs))
	for i := range p.res {
		p.res[i] = make(chan bodyResult, 1)
	}
	p.slots = make(chan struct{}, runtime.GOMAXPROCS(0)+1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i, x := range p.xs {
			select {
			case p.slots <- struct{}{}:
			case <-p.stop:
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				b, err := readBody(f, cache, x)
				p.res[i] <- bodyResult{b, err}
			}()
		}
	}()
	return p
}

// take returns x's body if it was read ahead (ok), after dropping those
// Load passed over.
func (p *bodyPrefetch) take(x *formats.ExchangeInfo) (b []byte, err error, ok bool) {
	id := x.Request.Exchange
	if p.hasLast && p.lastID == id {
		return p.last.b, p.last.err, true
	}
	i, found := p.pos[id]
	if !found || i < p.next {
		return nil, nil, false
	}
	for ; p.next < i; p.next++ {
		<-p.res[p.next]
		p.res[p.next] = nil
		<-p.slots
	}
	r := <-p.res[i]
	p.res[i] = nil
	<-p.slots
	p.next = i + 1
	p.lastID, p.last, p.hasLast = id, r, true
	return r.b, r.err, true
}

// close stops the read-ahead and waits for its workers; the bodies not
// taken are dropped.
func (p *bodyPrefetch) close() {
	close(p.stop) // the producer launches no more than the free slots
	p.wg.Wait()
	p.res, p.last = nil, bodyResult{}
}
