package replay

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wtrace/wtrace/internal/healthz"
	"github.com/wtrace/wtrace/replay/internal/stream"
)

// PreloadOptions configure Preload. The zero value serves plain HTTP and
// no metrics.
type PreloadOptions struct {
	// Certificate, if set, serves HTTPS with it: the one the Server will
	// serve (Options.Certificate), so that a probe over HTTPS is answered
	// while the session loads too.
	Certificate *tls.Certificate
	// Metrics, if set, is served at /metrics meanwhile (the registry the
	// Server will register into).
	Metrics *prometheus.Registry
	// Logger receives failed health checks (Info); nil discards.
	Logger *slog.Logger
}

// Preloader answers on a listener while a session loads: /livez passes,
// /readyz and /healthz fail (their session and world checks: "loading"),
// /metrics is served if it has a registry, and any other request gets
// 503 ServiceUnavailable with a Kubernetes Status, as a starting
// apiserver answers. Handoff passes the listener on to a Server
// (Options.Listener = Listener()) without closing it: a client connecting
// meanwhile waits in the accept queue instead of being refused.
type Preloader struct {
	mux  *muxListener
	srv  *http.Server
	ln   *muxView // the Preloader's view of mux
	next *muxView // the Server's (Listener), open once handed off
}

var errLoading = &loadingError{}

type loadingError struct{}

func (*loadingError) Error() string { return "the session is still loading" }

// Preload starts answering on ln (see Preloader) until Handoff or Close.
func Preload(ln net.Listener, opts PreloadOptions) *Preloader {
	p := &Preloader{mux: newMuxListener(ln)}
	p.ln = p.mux.view(false, nil)
	p.next = p.mux.view(true, make(chan struct{}))
	loading := func() error { return errLoading }
	session := healthz.Check{Name: "session", Func: loading}
	world := healthz.Check{Name: "world", Func: loading}
	ep := &healthz.Endpoints{
		Livez:   []healthz.Check{healthz.Ping},
		Readyz:  []healthz.Check{healthz.Ping, session, world, {Name: "shutdown", Func: func() error { return nil }}},
		Healthz: []healthz.Check{healthz.Ping, session, world},
		Metrics: opts.Metrics,
		Logger:  opts.Logger,
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ep.Owns(r.URL.Path) {
				ep.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Retry-After", "1")
			stream.WriteStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "wtrace replay: "+errLoading.Error())
		}),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(discardOr(opts.Logger).Handler(), slog.LevelDebug),
	}
	var l net.Listener = p.ln
	if opts.Certificate != nil {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*opts.Certificate}, NextProtos: []string{"h2", "http/1.1"}})
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
	}
	p.srv = srv
	go srv.Serve(l)
	return p
}

func discardOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Listener is the listener for the Server that takes over
// (Options.Listener): its Accept waits for Handoff, then takes ln's
// connections; closing it closes ln.
func (p *Preloader) Listener() net.Listener { return p.next }

// Handoff stops the Preloader's server (its open connections are closed
// once idle, within a second): Listener takes ln's connections from now
// on.
func (p *Preloader) Handoff() {
	p.ln.Close() // no connection goes to the Preloader from now on
	close(p.next.gate)
	p.stop()
}

// Close stops the Preloader and closes ln (the session could not be
// loaded).
func (p *Preloader) Close() {
	p.stop()
	p.mux.closeAll()
}

func (p *Preloader) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p.srv.Shutdown(ctx) != nil {
		p.srv.Close()
	}
}

// muxListener hands the connections one listener accepts to its views: a
// view's Close stops that view, and closes the listener if the view owns
// it.
type muxListener struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{} // closed when the accept loop ends
	err   error         // why it ended (read after done)
	once  sync.Once
}

func newMuxListener(ln net.Listener) *muxListener {
	m := &muxListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	go m.loop()
	return m
}

func (m *muxListener) loop() {
	defer close(m.done)
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.err = err
			return
		}
		m.conns <- c // waits for a view to take it
	}
}

func (m *muxListener) view(owns bool, gate chan struct{}) *muxView {
	return &muxView{m: m, owns: owns, gate: gate, closed: make(chan struct{})}
}

func (m *muxListener) closeAll() {
	m.once.Do(func() {
		m.ln.Close()
		go func() { // a connection the loop accepted meanwhile
			for {
				select {
				case c := <-m.conns:
					c.Close()
				case <-m.done:
					return
				}
			}
		}()
	})
}

type muxView struct {
	m      *muxListener
	owns   bool
	gate   chan struct{} // nil, or closed when the view may accept
	closed chan struct{}
	once   sync.Once
}

func (v *muxView) Accept() (net.Conn, error) {
	if v.gate != nil {
		select {
		case <-v.gate:
		case <-v.closed:
			return nil, net.ErrClosed
		}
	}
	select {
	case <-v.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-v.m.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.m.done:
		return nil, v.m.err
	}
}

func (v *muxView) Close() error {
	v.once.Do(func() {
		close(v.closed)
		if v.owns {
			v.m.closeAll()
		}
	})
	return nil
}

func (v *muxView) Addr() net.Addr { return v.m.ln.Addr() }
