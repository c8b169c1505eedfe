package replay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/healthz"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/replay/internal/fromtape"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/metrics"
	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/replay/internal/stream"
)

// Server serves a recorded session over HTTP. Create it with New or Open;
// serve with Start or StartTLS (or mount Handler in a server of your own);
// stop with Close. Safe for concurrent use: each request is served by its
// own handler goroutine on its own timeline; requests share only immutable
// decoded exchanges, the matching cursors (behind a mutex, never held while
// writing) and the session file.
type Server struct {
	// URL is the base URL of the started server ("http://127.0.0.1:41234"),
	// "" before Start or StartTLS.
	URL string

	opts         Options
	ctl          *control // the control endpoint (control.go); nil without Options.Control
	file         *formats.File
	ownFile      bool
	log          *slog.Logger
	clock        Clock
	speed        float64
	writeTimeout time.Duration
	ctx          context.Context
	cancel       context.CancelFunc
	writes       Writes
	store        *world.Store        // the session's world; nil with WritesRecorded
	tape         *fromtape.Answerer  // the tape's answers (package replay/internal/fromtape)
	world        *fromworld.Answerer // the world's answers (package replay/internal/fromworld)
	reqs         *requestLog         // the requests answered (see Requests, out.go)
	met          *metrics.Metrics    // nil: no metrics (see replay/internal/metrics)
	ops          *healthz.Endpoints  // the Server's own endpoints (see health.go)
	pert         *perturbation       // a perturbed run (perturbed.go); nil: none

	handlers gate // the handlers serving requests (gate.go)

	filter *hostfilter.Filter // the hosts and paths Handler serves (guard.go)
	hub    *stream.Hub        // what the streams share (package replay/internal/stream)

	mu        sync.Mutex // guards the fields below
	closed    bool
	started   bool
	conns     sync.WaitGroup
	srv       *http.Server
	listener  *pausable // the listener the Server opened itself (restart pauses it); nil: Options.Listener
	serveDone chan struct{}
	certPEM   []byte
}

var errClosed = errors.New("replay: server closed")

// ErrStarted is returned by Start and StartTLS on a server that was already
// started or closed.
var ErrStarted = errors.New("replay: server already started or closed")

// New returns a Server for session f. It reads f's index, checks the
// checksums of every block (reading the file once, see Losses), reads a
// little of its data (the kinds of the resources, for synthesized
// discovery, and the exchanges that damage touches); it does not listen
// yet. The caller keeps ownership of f and must not close it
// before Close returns.
func New(f *formats.File, opts Options) (*Server, error) {
	if opts.Speed < 0 || math.IsNaN(opts.Speed) || math.IsInf(opts.Speed, 0) {
		return nil, fmt.Errorf("replay: speed %v: must be a finite number ≥ 0 (0: as fast as possible)", opts.Speed)
	}
	writes, err := ParseWrites(string(opts.Writes))
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, file: f, speed: opts.Speed, writes: writes}
	if s.filter, err = newGuard(opts.AcceptHosts, opts.RejectPaths); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if opts.Control != nil {
		s.ctl = &control{s: s, c: *opts.Control}
	}
	maxRequests := opts.MaxRequests
	if maxRequests == 0 {
		maxRequests = DefaultMaxRequests
	}
	s.log = opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.clock = opts.Clock
	if s.clock == nil {
		s.clock = pace.Real{}
	}
	s.writeTimeout = opts.WriteTimeout
	if s.writeTimeout == 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	budget := opts.CacheBytes
	if budget <= 0 {
		budget = DefaultCacheBytes
	}
	mids := world.MidstreamTargets(f)
	pace, err := ParsePace(string(opts.Pace))
	if err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.met = metrics.New(opts.Metrics)
	s.hub = stream.NewHub(s.ctx, stream.Options{Clock: s.clock, Speed: s.speed, WriteTimeout: s.writeTimeout,
		Hold: opts.Hold, Logger: s.log, Metrics: s.met})
	live := writes == WritesAnswer || writes == WritesApply
	if live && opts.Loop {
		return nil, fmt.Errorf("replay: Loop replays recorded streams, which a replay that answers writes (--writes %s) does not serve: use --writes reject or recorded", writes)
	}
	if writes != WritesRecorded {
		st, err := world.Load(f, world.Options{Now: s.clock.Now, MaxBytes: opts.StateBytes, Live: live,
			Clients: opts.Clients, NoClients: opts.NoClients, Midstream: mids, User: opts.User})
		if err != nil {
			return nil, fmt.Errorf("replay: loading the session's objects (--writes %s): %w", writes, err)
		}
		s.store = st
	}
	s.world = fromworld.New(s.ctx, s.store, s.hub, fromworld.Options{Live: live, Pace: pace, QuietWindow: opts.QuietWindow,
		WriteLatency: opts.WriteLatency, Logger: s.log})
	if s.tape, err = fromtape.New(f, mids, s.store, s.world, s.hub, fromtape.Options{Loop: opts.Loop,
		EventChunks: opts.EventChunks, CacheBytes: budget, Logger: s.log}); err != nil {
		return nil, err
	}
	if err := newPerturbation(s); err != nil {
		return nil, err
	}
	s.reqs = &requestLog{max: maxRequests, out: opts.Out, clock: s.clock, met: s.met}
	s.met.Loaded(string(s.writes), s.speed)
	s.ops = newEndpoints(s.hub.Draining, opts.Metrics, s.log)
	if s.pert != nil {
		s.ops.Readyz = append(s.ops.Readyz, healthz.Check{Name: "perturb", Func: s.pert.readyCheck})
	}
	bindOut(s)
	return s, nil
}

// Open opens the session file at path and returns a Server for it, which
// closes the file on Close.
func Open(path string, opts Options) (*Server, error) {
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	s, err := New(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.ownFile = true
	return s, nil
}

// CertPEM returns the PEM certificate StartTLS serves (nil before it, or
// for plain HTTP).
func (s *Server) CertPEM() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.certPEM
}

// Kubeconfig returns a kubeconfig for the started server: its URL, the
// certificate as certificate-authority-data (HTTPS) and a dummy token user.
func (s *Server) Kubeconfig() []byte {
	return kubeconfig(s.URL, s.CertPEM())
}

// Client returns a new HTTP client for the started server that trusts the
// server's certificate (HTTPS, with HTTP/2).
func (s *Server) Client() *http.Client {
	tr := &http.Transport{ForceAttemptHTTP2: true}
	if pemBytes := s.CertPEM(); pemBytes != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Transport: tr}
}

// EnvironmentDone returns a channel closed once every change of the
// environment was applied (nil for a replay that does not answer writes).
func (s *Server) EnvironmentDone() <-chan struct{} { return s.world.EnvironmentDone() }

// Settle waits until the environment was played (a replay that answers
// writes) and the clients have then been quiet for window: no request but
// watches in flight, and none begun or ended (the run is over). It
// returns false when done is closed first or the server closes. A
// perturbation that cut the clients off (watches ended, a restart, the
// controller restarted) keeps the run busy until a client's next request:
// a client backing off is not a client done.
func (s *Server) Settle(done <-chan struct{}, window time.Duration) bool {
	return s.world.Settle(done, window)
}

// Environment says what the replay did with the recording's environment
// so far: the changes applied and dropped (a dropped one names its
// reason), the clients under test. nil for a replay that does not answer
// writes.
func (s *Server) Environment() *EnvironmentReport { return s.world.Environment() }

// EnvironmentReport is what Server.Environment returns: the environment's
// changes applied and dropped, the clients under test.
type EnvironmentReport = fromworld.EnvironmentReport

// Requests returns the requests answered so far (the first
// Options.MaxRequests), in the order they arrived. A request still being
// answered (an open watch) is not among them yet.
func (s *Server) Requests() []Request { return s.reqs.list() }

// Writes returns the writes among Requests.
func (s *Server) Writes() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.IsWrite() {
			out = append(out, r)
		}
	}
	return out
}

// Losses returns what the session's damage lost of the exchanges the
// server answers from, found by New, by exchange and then body offset.
// Empty for a sound file. The caller must not modify it.
func (s *Server) Losses() []*Loss { return s.tape.Losses() }

// ServerCloser is an Out that outlives the Servers recording into it: New
// hands it each Server (BindServer), and the Out closes them — ending
// every answer as Close ends it — before it ends its own recording, so
// that the order in which a Server and its Out are closed does not matter.
// record.Recorder is one.
type ServerCloser interface {
	Out
	BindServer(*Server)
}

// bindOut hands s to its Out, if the Out closes the Servers it records.
func bindOut(s *Server) {
	if b, ok := s.opts.Out.(ServerCloser); ok {
		b.BindServer(s)
	}
}
