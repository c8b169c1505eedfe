package replay

import (
	"errors"
	"net"
	"net/http"

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

// ops is the Server's operational side: its health endpoints, and
// whether it is shutting down.
type ops struct {
	endpoints *healthz.Endpoints
}

// LatenessBuckets are the upper bounds (seconds) of the event lateness
// histogram (wtrace_replay_event_lateness_seconds): 100 µs to 10 s, about
// three a decade.
var LatenessBuckets = metrics.LatenessBuckets

var errShuttingDown = errors.New("the replay is shutting down")

// initOps builds s's health endpoints and metrics, once its session is
// loaded (the end of New).
func (s *Server) initOps() {
	s.ops = &ops{}
	s.met.Loaded(string(s.writes), s.speed)
	ok := func() error { return nil }
	session := healthz.Check{Name: "session", Func: ok}
	world := healthz.Check{Name: "world", Func: ok}
	shutdown := healthz.Check{Name: "shutdown", Func: func() error {
		if s.hub.Draining() {
			return errShuttingDown
		}
		return nil
	}}
	s.ops.endpoints = &healthz.Endpoints{
		Livez:   []healthz.Check{healthz.Ping},
		Readyz:  []healthz.Check{healthz.Ping, session, world, shutdown},
		Healthz: []healthz.Check{healthz.Ping, session, world},
		Metrics: s.opts.Metrics,
		Logger:  s.log,
	}
}

// serveOps answers r if it asks for one of the Server's own endpoints
// (see above), and reports whether it did.
func (s *Server) serveOps(w http.ResponseWriter, r *http.Request) bool {
	if s.ops == nil || !s.ops.endpoints.Owns(r.URL.Path) {
		return false
	}
	s.ops.endpoints.ServeHTTP(w, r)
	return true
}

// listen is the listener Start and StartTLS serve on: Options.Listener,
// or a new one on addr.
func (s *Server) listen(addr string) (net.Listener, error) {
	if s.opts.Listener != nil {
		return s.opts.Listener, nil
	}
	return net.Listen("tcp", addr)
}
