package capture

import (
	"time"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// DefaultKeyLogWait is Options.KeyLogWait's default when a KeyLogSource
// is set: how long (capture time) a TLS connection whose secrets are not
// in the key log yet holds its records for them. A client writes its
// secrets while the handshake runs, within milliseconds; a reader of the
// file sees them at its next refresh. Ten seconds covers a slow writer
// and a busy machine, and bounds what a connection whose client does not
// log its keys at all holds (each at most tlsdec.DefaultMaxKeyWait per
// direction).
const DefaultKeyLogWait = 10 * time.Second

// keyLogRefreshEvery bounds how often (capture time) a KeyLogSource is
// read while connections wait for secrets.
const keyLogRefreshEvery = 20 * time.Millisecond

// KeyLogSource is a key log that grows while recording (a file clients
// are still writing, tlsdec.KeyLogFile): Refresh adds what was appended
// to the Options.KeyLog it feeds.
type KeyLogSource interface {
	Refresh() error
}

// keyWaiter holds the TLS connections that wait for their secrets
// (Options.KeyLogWait) and retries them when the key log grows; a
// connection that waited longer than the wait is given up. Used by the
// Recorder's goroutine only.
type keyWaiter struct {
	keys    *tlsdec.KeyLog
	source  KeyLogSource
	wait    int64 // nanoseconds of capture time
	conns   map[*tlsConn]int64
	gen     uint64 // the key log's generation at the last retry
	refresh int64  // capture time of the last source refresh
	errs    int    // source refresh errors (the first is logged)
}

// newKeyWaiter returns the waiter for opts, or nil when connections do not
// wait (no KeyLogSource and no KeyLogWait).
func newKeyWaiter(opts Options) *keyWaiter {
	wait := opts.KeyLogWait
	if wait == 0 && opts.KeyLogSource != nil {
		wait = DefaultKeyLogWait
	}
	if wait <= 0 || opts.KeyLog == nil {
		return nil
	}
	return &keyWaiter{keys: opts.KeyLog, source: opts.KeyLogSource, wait: int64(wait), conns: map[*tlsConn]int64{}}
}

// enabled reports whether TLS connections wait for their secrets.
func (w *keyWaiter) enabled() bool { return w != nil }

// add registers a connection that started waiting at t.
func (w *keyWaiter) add(c *tlsConn, t int64) {
	if _, ok := w.conns[c]; !ok {
		w.conns[c] = t
	}
}

// tick is called as capture time passes (every packet, and between
// packets of a live capture): while connections wait, the source is
// re-read (at most every keyLogRefreshEvery), connections are retried
// when the key log grew, and those that waited past the wait are given up.
func (w *keyWaiter) tick(now int64) {
	if w == nil || len(w.conns) == 0 {
		return
	}
	if w.source != nil && now-w.refresh >= int64(keyLogRefreshEvery) {
		w.refresh = now
		if err := w.source.Refresh(); err != nil {
			w.errs++
		}
	}
	if g := w.keys.Generation(); g != w.gen {
		w.gen = g
		for c := range w.conns {
			c.retry(now)
			if !c.dec.WaitingKeys() {
				w.release(c, now)
			}
		}
	}
	for c, since := range w.conns {
		if now-since > w.wait {
			c.stopWaiting(now)
			w.release(c, now)
		}
	}
}

// release ends c's wait; a connection that is over is finished now.
func (w *keyWaiter) release(c *tlsConn, now int64) {
	delete(w.conns, c)
	if c.ended {
		c.ended = false
		c.finish(c.endSt, c.endT)
		c.endThen()
	}
}

// connEnder is a protoHandler whose end may wait: finishThen calls finish,
// then then (the connection's end record), maybe later.
type connEnder interface {
	finishThen(st formats.EndStatus, t int64, then func())
}

// defer_ reports whether the end of c must wait for its secrets: its
// connection is over, but records wait for secrets that the key log may
// still get (a client that writes its key log late, or at its exit). The
// source is read once more first. then runs after c's finish.
func (w *keyWaiter) defer_(c *tlsConn, st formats.EndStatus, t int64, then func()) bool {
	if w == nil || c.ended {
		return false
	}
	if _, ok := w.conns[c]; !ok {
		return false
	}
	if w.source != nil {
		if err := w.source.Refresh(); err != nil {
			w.errs++
		}
	}
	c.retry(t)
	if !c.dec.WaitingKeys() {
		delete(w.conns, c)
		return false
	}
	c.ended, c.endSt, c.endT, c.endThen = true, st, t, then
	return true
}

// close gives every waiting connection a last chance (the capture ends):
// the source is read once more, connections retried, then given up and
// those that are over finished.
func (w *keyWaiter) close(now int64) {
	if w == nil || len(w.conns) == 0 {
		return
	}
	if w.source != nil {
		if err := w.source.Refresh(); err != nil {
			w.errs++
		}
	}
	for c := range w.conns {
		c.retry(now)
		c.stopWaiting(now)
		w.release(c, now)
	}
}

// Tick tells the Recorder that capture time has reached now without a
// packet (a live capture calls it between packets): TLS connections that
// wait for their secrets (Options.KeyLogWait) are retried, the
// KeyLogSource re-read, and waits past their bound given up. With
// Options.Workers, it also writes the records of every packet fed so far
// (otherwise they wait for a batch to fill). It returns the Sink's error,
// if any.
func (r *Recorder) Tick(now int64) error {
	r.s.keyWait.tick(now)
	r.drain()
	return r.s.err
}
