package replay

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wtrace/wtrace/internal/healthz"
	"github.com/wtrace/wtrace/replay/internal/metrics"
)

// A Server answers /livez, /readyz and /healthz itself, as kube-apiserver
// does (package internal/healthz: "ok", ?verbose, ?exclude, /readyz/NAME,
// 500 with the failing checks), and /metrics when Options.Metrics is set;
// a recorded exchange of those paths is not served. The checks:
//
//	livez    ping
//	readyz   ping, session, world, shutdown
//	healthz  ping, session, world
//
// session and world pass once New has read the session and loaded its
// world (before, nothing listens: see Preload for a listener that answers
// while a session loads); shutdown fails from the moment Shutdown is
// called, so that a load balancer stops sending new clients while the
// open watches end.

// LatenessBuckets are the upper bounds (seconds) of the event lateness
// histogram (wtrace_replay_event_lateness_seconds): 100 µs to 10 s, about
// three a decade.
var LatenessBuckets = metrics.LatenessBuckets

var errShuttingDown = errors.New("the replay is shutting down")

// newEndpoints builds a loaded Server's health endpoints (see above):
// shutdown fails once draining reports true.
func newEndpoints(draining func() bool, reg *prometheus.Registry, log *slog.Logger) *healthz.Endpoints {
	ok := func() error { return nil }
	session := healthz.Check{Name: "session", Func: ok}
	world := healthz.Check{Name: "world", Func: ok}
	shutdown := healthz.Check{Name: "shutdown", Func: func() error {
		if draining() {
			return errShuttingDown
		}
		return nil
	}}
	return &healthz.Endpoints{
		Livez:   []healthz.Check{healthz.Ping},
		Readyz:  []healthz.Check{healthz.Ping, session, world, shutdown},
		Healthz: []healthz.Check{healthz.Ping, session, world},
		Metrics: reg,
		Logger:  log,
	}
}
