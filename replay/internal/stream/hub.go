package stream

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/replay/internal/metrics"
	"github.com/wtrace/wtrace/replay/internal/pace"
)

// Options configure a Hub. The zero value runs on the real clock as fast
// as clients read (Speed 0), without a write timeout, logs nothing and
// counts nothing.
type Options struct {
	// Clock is the time source; nil means the real clock (pace.Real).
	Clock pace.Clock
	// Speed scales recorded durations (see Hub.Scale); 0 sends at once.
	Speed float64
	// WriteTimeout bounds one blocking write to a client; 0 or negative:
	// none.
	WriteTimeout time.Duration
	// Hold keeps every stream that Finish would end open instead, until
	// the client's timeoutSeconds, the client leaves, or the server closes.
	Hold bool
	// Logger receives the streams' warnings (damage crossed, panics);
	// nil discards.
	Logger *slog.Logger
	// Metrics counts bytes, events, lateness and taken-over connections;
	// nil counts nothing.
	Metrics *metrics.Metrics
}

// Hub is what the streams of one server share: its clock, speed and
// write timeout, its log and metrics, the schedulers that carry parked
// streams (one shard per GOMAXPROCS), and the taken-over connections that
// wait in reads, for Stop to reach. Safe for concurrent use. It starts
// goroutines (the schedulers' shards, wakers); Stop and Wait end them.
type Hub struct {
	ctx          context.Context // the server's: cancelled when it closes
	clock        pace.Clock
	speed        float64
	writeTimeout time.Duration
	hold         bool
	log          *slog.Logger
	met          *metrics.Metrics

	scs []*pace.Scheduler // the parked streams, one shard per P
	nsc atomic.Uint32     // picks a stream's shard

	ownMu sync.Mutex
	owned map[*ownConn]struct{} // taken-over connections that wait in reads (see ownWait)

	draining atomic.Bool    // Shutdown: streams cancelled from now on end cleanly
	wg       sync.WaitGroup // the hub's goroutines (wakers)
}

// NewHub returns the Hub of a server whose life is ctx: streams taken
// over from net/http live until it is cancelled at the latest.
func NewHub(ctx context.Context, o Options) *Hub {
	h := &Hub{ctx: ctx, clock: o.Clock, speed: o.Speed, writeTimeout: o.WriteTimeout, hold: o.Hold,
		log: o.Logger, met: o.Metrics, owned: map[*ownConn]struct{}{}}
	if h.clock == nil {
		h.clock = pace.Real{}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.scs = make([]*pace.Scheduler, max(1, runtime.GOMAXPROCS(0)))
	for i := range h.scs {
		h.scs[i] = pace.New()
	}
	return h
}

// Now is the hub's clock's time.
func (h *Hub) Now() time.Time { return h.clock.Now() }

// Clock is the hub's clock.
func (h *Hub) Clock() pace.Clock { return h.clock }

// Speed is the speed the hub's streams play at.
func (h *Hub) Speed() float64 { return h.speed }

// Scale maps a recorded duration (ns) to replay time at the hub's speed:
// 0 at Speed 0.
func (h *Hub) Scale(d int64) time.Duration {
	if d <= 0 || h.speed == 0 {
		return 0
	}
	if h.speed == 1 {
		return time.Duration(d)
	}
	f := float64(d) / h.speed
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// Drain makes every stream cancelled from now on end cleanly where it is
// (Shutdown), and Draining report true.
func (h *Hub) Drain() { h.draining.Store(true) }

// Draining reports whether Drain was called.
func (h *Hub) Draining() bool { return h.draining.Load() }

// Stop reaches the streams once the server's context is cancelled: the
// taken-over connections that wait in reads wake at once (draining: a
// write in progress may finish, see Drain; else they are interrupted),
// and the schedulers end every parked stream and stop.
func (h *Hub) Stop() {
	h.ownMu.Lock()
	for oc := range h.owned {
		if h.draining.Load() {
			oc.drain()
		} else {
			oc.interrupt()
		}
	}
	h.ownMu.Unlock()
	for _, sc := range h.scs {
		sc.Stop()
	}
}

// Wait returns once the hub's own goroutines (wakers) have returned,
// after the server's context was cancelled.
func (h *Hub) Wait() { h.wg.Wait() }

// Stats returns how many streams are parked, and how many times the
// schedulers stepped a due stream themselves and handed one to a
// goroutine, over every shard (for tests).
func (h *Hub) Stats() (parked int, stepped, handed int64) {
	for _, sc := range h.scs {
		parked += sc.Len()
		stepped += sc.Stepped.Load()
		handed += sc.Handed.Load()
	}
	return parked, stepped, handed
}
