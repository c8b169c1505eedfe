package replay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/internal/selfsigned"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/metrics"
	"github.com/wtrace/wtrace/replay/internal/pace"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// DefaultListen is the address Start and StartTLS listen on when
// Options.Listen is empty: loopback, a free port.
const DefaultListen = "127.0.0.1:0"

// DefaultWriteTimeout is the WriteTimeout a zero Options means.
const DefaultWriteTimeout = 30 * time.Second

// DefaultIdleTimeout is the IdleTimeout a zero Options means: kube-apiserver's
// (k8s.io/apiserver SecureServingInfo.Serve, HTTP/1.1 and HTTP/2 alike), which
// matches the keep-alive timeout of Go's http.DefaultTransport.
const DefaultIdleTimeout = 90 * time.Second

// DefaultCacheBytes is the CacheBytes a zero Options means.
const DefaultCacheBytes = 64 << 20

// DefaultMaxRequests is the MaxRequests a zero Options means.
const DefaultMaxRequests = 100000

// Options configure a Server. The zero value serves as fast as each client
// reads (Speed 0), reproduces the recorded chunk boundaries, ends each
// stream the way it was recorded, listens on 127.0.0.1 (a free port) and
// logs nothing.
type Options struct {
	// Speed scales the recorded timing: 1 replays it as recorded, 10 ten
	// times faster, 0.5 at half speed. 0 (the zero value) sends every byte
	// as soon as the client reads it, with no waiting at all. Negative, NaN
	// and infinite values are an error.
	Speed float64
	// Loop restarts a watch stream that reached its recorded end from its
	// first event, on a timeline shifted by the exchange's recorded
	// duration, forever (until the client's timeoutSeconds, the client
	// leaves, or Close). Per-request cursors (see the package doc) wrap
	// around instead of repeating the last exchange.
	Loop bool
	// Hold keeps every watch stream open after its last recorded byte
	// (and every other body that did not end cleanly), instead of ending it
	// the way it was recorded, until the client's timeoutSeconds (then a
	// clean end, as the apiserver does), the client leaves, or Close.
	Hold bool
	// EventChunks sends one chunk per watch event (and per stored body
	// piece). The zero value reproduces the recorded chunk boundaries, each
	// chunk at its recorded time.
	EventChunks bool
	// Clock is the time source; nil means the wall clock. A FakeClock runs
	// replays in virtual time.
	Clock Clock
	// Logger receives one Info line per request (method, target, how it was
	// answered, exchange, status), warnings for requests nothing matches
	// (with the closest recorded candidates), and Debug lines when streams
	// end. nil discards.
	Logger *slog.Logger
	// Listen is the address Start and StartTLS listen on; "" means
	// DefaultListen (127.0.0.1, a free port).
	Listen string
	// Certificate is the TLS certificate StartTLS serves; nil generates a
	// self-signed ECDSA P-256 certificate for 127.0.0.1, ::1 and localhost
	// (and the Listen host), which is its own CA.
	Certificate *tls.Certificate
	// WriteTimeout bounds how long one write to a client may block (a
	// client that stopped reading); the client is then disconnected. 0 means
	// DefaultWriteTimeout; negative disables the limit.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request (over HTTP/2, with no stream open: a GOAWAY
	// first). A connection serving a request — a watch, however quiet —
	// is not idle. 0 means DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration
	// CacheBytes bounds the memory holding decoded exchanges (timed writes,
	// synthesized lists) shared by all clients. Exchanges larger than a
	// quarter of it are streamed from the file for each client instead.
	// 0 means DefaultCacheBytes.
	CacheBytes int64
	// Writes says how requests that change the world (POST, PUT, PATCH,
	// DELETE) are answered and what watchers see of them: WritesAnswer
	// (the zero value), WritesApply, WritesReject or WritesRecorded (see
	// the package doc).
	Writes Writes
	// StateBytes bounds the memory of the session's world (every version
	// of every object the session shows, and the clients' writes): New
	// fails beyond it. 0 means world.DefaultMaxBytes (1 GiB). Not used
	// with WritesRecorded, which keeps no world.
	StateBytes int64
	// Out, if set, receives every request the clients make and every
	// response the replay sends, as the bytes of an HTTP/1.1 exchange on a
	// connection of its own (see Out): a recording of the run.
	Out Out
	// MaxRequests bounds the requests Server.Requests keeps (the first
	// ones); 0 means DefaultMaxRequests, negative keeps none.
	MaxRequests int
	// AcceptHosts are the hosts Handler serves (regular expressions
	// matched against the Host without its port, as kubectl proxy's
	// --accept-hosts); nil means localhost, 127.0.0.1 and [::1]. Other
	// hosts get 403 Forbidden (DNS rebinding, see guard.go).
	AcceptHosts []string
	// RejectPaths are paths Handler refuses with 403 Forbidden (as kubectl
	// proxy's --reject-paths); nil means exec, attach and portforward of
	// pods, an empty list none.
	RejectPaths []string
	// Metrics, if set, is the Prometheus registry the Server registers
	// its metrics in (wtrace_replay_*: see replay/internal/metrics; Servers sharing a
	// registry share them) and serves at /metrics. nil (the zero value)
	// means no metrics, and /metrics is a path like any other.
	Metrics *prometheus.Registry
	// Control, if set, serves the control endpoint at /wtrace/v1/ (see
	// Control and docs/CONTROL.md): what a test in another process, in
	// any language, drives the replay with. nil (the zero value) serves
	// none: /wtrace/ paths are then a client's like any other.
	Control *Control
	// ShutdownDelay is how long Shutdown goes on serving, with /readyz
	// failing, before it closes the listener and ends the streams — as
	// kube-apiserver's --shutdown-delay-duration: the time a load
	// balancer (a Service's endpoints) takes to see the failed readiness
	// and stop sending new clients, so that none is refused meanwhile. It
	// counts in Shutdown's context. 0 (the zero value) means none.
	ShutdownDelay time.Duration
	// Listener, if set, is what Start and StartTLS serve on instead of
	// listening on Listen (Preloader.Listener, to serve on the port that
	// answered probes while the session loaded); Close closes it once
	// served.
	Listener net.Listener
	// Pace says when the environment's changes are applied to the world
	// of a replay that answers writes: PaceRecorded (the zero value: at
	// their recorded times, scaled by Speed) or PaceQuiet (each once the
	// clients have been quiet for QuietWindow). See the package doc.
	Pace Pace
	// QuietWindow is how long the clients must have been quiet before
	// PaceQuiet applies the next change; 0 means DefaultQuietWindow.
	QuietWindow time.Duration
	// Clients picks the clients under test in the recording (see
	// world.Options.Clients): their writes, and the versions of objects
	// those made, are the expected output of a run and never replayed.
	// nil picks every client of a session recorded through the proxy (or
	// of a replay's run), none of a capture; NoClients picks none.
	Clients   []world.Client
	NoClients bool
	// WriteLatency is how long a replay that answers writes holds a
	// write before it lands in the world (its answer and its watch
	// events then), as an apiserver's write waits for etcd: controllers
	// that race each other and their own caches meet the interleavings
	// they met when recorded. 0 means the median of the recorded writes
	// of the clients under test (a few milliseconds); negative, none.
	WriteLatency time.Duration
}

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
	m            *tape.Matcher
	losses       []*tape.Loss
	disc         *discovery.Docs
	cache        *tape.Cache
	ctx          context.Context
	cancel       context.CancelFunc
	writes       Writes
	store        *world.Store // the session's world; nil with WritesRecorded
	env          *envDriver   // applies the environment to a Live world (WritesAnswer, WritesApply); nil otherwise
	act          *activity    // what the clients are doing (PaceQuiet, Settle)
	deliv        *deliveries  // the world's watches, for a write's answer to wait for its events
	waker        waker        // wakes the world's parked watches at its changes (see worldwatch.go)
	maxRequests  int
	seq          atomic.Int64     // numbers the requests in arrival order
	rec          *recording       // what is derived from the recorded exchanges (cached)
	met          *metrics.Metrics // nil: no metrics (see replay/internal/metrics)
	ops          *ops             // health endpoints, shutdown (see health.go)

	active atomic.Int64 // requests being served

	filter *hostfilter.Filter // the hosts and paths Handler serves (guard.go)

	ownMu sync.Mutex
	owned map[*ownConn]struct{} // taken-over connections that wait in reads (see ownWait)
	scs   []*pace.Scheduler     // the parked streams (see scheduler), one shard per P
	nsc   atomic.Uint32         // picks a stream's shard

	mu        sync.Mutex // guards the fields below and m.cursors
	closed    bool
	started   bool
	handlers  sync.WaitGroup
	conns     sync.WaitGroup
	srv       *http.Server
	serveDone chan struct{}
	certPEM   []byte
	requests  []Request // the first maxRequests answered
	dropped   int       // answered requests beyond maxRequests
}

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
	s := &Server{opts: opts, file: f, speed: opts.Speed, writes: writes, owned: map[*ownConn]struct{}{}}
	if s.filter, err = newGuard(opts); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if opts.Control != nil {
		s.ctl = &control{s: s, c: *opts.Control}
	}
	s.maxRequests = opts.MaxRequests
	if s.maxRequests == 0 {
		s.maxRequests = DefaultMaxRequests
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
	s.cache = tape.NewCache(budget)
	mids := world.MidstreamTargets(f)
	s.m = tape.NewMatcher(f, mids)
	s.rec = &recording{file: f, m: s.m, cache: s.cache, maxPlan: budget / 4, eventChunks: opts.EventChunks, annotate: func() bool { return s.store != nil }}
	if s.losses, err = tape.FindLosses(s.file, s.m); err != nil {
		return nil, err
	}
	pace, err := ParsePace(string(opts.Pace))
	if err != nil {
		return nil, err
	}
	s.act = newActivity()
	s.deliv = newDeliveries()
	s.waker.s = s
	live := writes == WritesAnswer || writes == WritesApply
	if live && opts.Loop {
		return nil, fmt.Errorf("replay: Loop replays recorded streams, which a replay that answers writes (--writes %s) does not serve: use --writes reject or recorded", writes)
	}
	if writes != WritesRecorded {
		st, err := world.Load(f, world.Options{Now: s.clock.Now, MaxBytes: opts.StateBytes, Live: live,
			Clients: opts.Clients, NoClients: opts.NoClients, Midstream: mids})
		if err != nil {
			return nil, fmt.Errorf("replay: loading the session's objects (--writes %s): %w", writes, err)
		}
		s.store = st
		if live {
			s.env = newEnvDriver(s, pace, opts.QuietWindow)
		}
	}
	s.disc = discovery.New(f, s.m, s.store)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.scs = newShards()
	s.initOps()
	bindOut(s) // outbind.go
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

// Handler returns the server's HTTP handler, behind its Host and path
// filter (Options.AcceptHosts, RejectPaths), to mount in a server of your
// own. Close still cancels the requests it is serving and waits for them.
func (s *Server) Handler() http.Handler { return s.guard(http.HandlerFunc(s.ServeHTTP)) }

// Start listens on Options.Listen (default 127.0.0.1, a free port) and
// serves HTTP (HTTP/1.1, and h2c is not offered) in the background. It sets
// URL.
func (s *Server) Start() error { return s.start(false) }

// StartTLS is Start with HTTPS, offering HTTP/2 and HTTP/1.1 through ALPN,
// with Options.Certificate or a generated self-signed one (see CertPEM and
// Kubeconfig).
func (s *Server) StartTLS() error { return s.start(true) }

func (s *Server) start(useTLS bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return ErrStarted
	}
	addr := s.opts.Listen
	if addr == "" {
		addr = DefaultListen
	}
	ln, err := s.listen(addr)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       idleTimeout(s.opts.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, st http.ConnState) {
			s.met.ConnState(st)
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.conns.Done()
			}
		},
	}
	scheme := "http"
	if useTLS {
		cert := s.opts.Certificate
		if cert == nil {
			host, _, _ := net.SplitHostPort(addr)
			c, pemBytes, err := selfsigned.New("wtrace replay", host, time.Now())
			if err != nil {
				ln.Close()
				return err
			}
			cert, s.certPEM = &c, pemBytes
		} else if len(cert.Certificate) > 0 {
			s.certPEM = selfsigned.PEM(cert.Certificate[0])
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}}
		ln = tls.NewListener(ln, srv.TLSConfig)
		scheme = "https"
		// http.Server configures HTTP/2 for TLS listeners it is handed
		// through ServeTLS; with a ready TLS listener we enable it here.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
	}
	s.srv = srv
	s.started = true
	s.serveDone = make(chan struct{})
	s.URL = scheme + "://" + ln.Addr().String()
	go func() {
		defer close(s.serveDone)
		_ = srv.Serve(ln)
	}()
	return nil
}

// idleTimeout is the http.Server IdleTimeout for Options.IdleTimeout d.
func idleTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultIdleTimeout
	case d < 0:
		// http.Server falls back to ReadTimeout (unset: none).
		return 0
	}
	return d
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

// Close stops the server: it stops listening, cancels every request in
// flight (watches end at once, without their terminating chunk), closes
// all connections, and returns once every handler goroutine has returned.
// It closes the session file if Open opened it. Safe to call more than
// once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close() // first, so that cancelled streams cannot end cleanly
	}
	s.cancel()
	s.interruptOwned()
	for _, sc := range s.scs {
		sc.Stop()
	}
	if srv != nil {
		<-s.serveDone
		s.conns.Wait()
	}
	s.handlers.Wait()
	if s.ownFile {
		s.file.Close()
	}
}

// enter registers a handler; false once the server is closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}
