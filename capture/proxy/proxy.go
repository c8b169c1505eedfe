package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/internal/selfsigned"
)

// DefaultListen is the address a zero Options listens on, like kubectl proxy.
const DefaultListen = "127.0.0.1:8001"

// readHeaderTimeout bounds how long a client may take to send a request
// head (a stalled client must not hold a connection forever). Bodies and
// responses have no timeout: watches last as long as they last.
const readHeaderTimeout = 30 * time.Second

// Sentinel errors of LoadConfig, for callers that explain them.
var (
	// ErrNoKubeconfig: no kubeconfig was found, or it is empty.
	ErrNoKubeconfig = errors.New("proxy: no kubeconfig found")
	// ErrNoContext: the kubeconfig names no current context and none was
	// given.
	ErrNoContext = errors.New("proxy: the kubeconfig has no current context")
	// ErrContextNotFound: the context asked for is not in the kubeconfig.
	ErrContextNotFound = errors.New("proxy: context not found in the kubeconfig")
)

// Cluster is what LoadConfig found: the client configuration, and names
// to show.
type Cluster struct {
	Config   *rest.Config
	Context  string   // the context used
	Contexts []string // every context of the kubeconfig, sorted
	Server   string   // the apiserver URL, without credentials (userinfo removed, query credentials replaced as a request's)
}

// LoadConfig loads a kubeconfig the way kubectl does: path, or the
// KUBECONFIG variable, or ~/.kube/config; context, or the current one.
// Client certificates, tokens and exec plugins come with the returned
// config (New builds the transport with rest.TransportFor).
func LoadConfig(path, context string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("proxy: reading the kubeconfig: %w", err)
	}
	cl := &Cluster{Context: context}
	for name := range raw.Contexts {
		cl.Contexts = append(cl.Contexts, name)
	}
	sort.Strings(cl.Contexts)
	if cl.Context == "" {
		cl.Context = raw.CurrentContext
	}
	switch {
	case len(raw.Contexts) == 0 && len(raw.Clusters) == 0:
		return nil, ErrNoKubeconfig
	case cl.Context == "":
		return nil, ErrNoContext
	case raw.Contexts[cl.Context] == nil:
		return nil, fmt.Errorf("%w: %q", ErrContextNotFound, cl.Context)
	}
	cfg, err := cc.ClientConfig()
	switch {
	case err != nil && clientcmd.IsContextNotFound(err):
		return nil, fmt.Errorf("%w: %v", ErrContextNotFound, err)
	case err != nil && clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("%w: %v", ErrNoKubeconfig, err)
	case err != nil:
		return nil, fmt.Errorf("proxy: kubeconfig context %q: %w", cl.Context, err)
	}
	cl.Config = cfg
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: kubeconfig context %q: %w", cl.Context, err)
	}
	u.User = nil
	// A credential in the URL's query (?access_token=…) is removed as a
	// request's is: Server names the cluster in the session's Meta.
	cl.Server = redact.Target(u.String(), &redact.Report{})
	return cl, nil
}

// Options configure a Proxy. The zero value listens on DefaultListen,
// serves plain HTTP/1.1, records nothing and logs nothing.
type Options struct {
	// Listen is the address to listen on; "" means DefaultListen.
	Listen string
	// TLS serves HTTPS with Certificate, or a generated self-signed one
	// (see CertPEM): HTTP/2 to clients that offer it in ALPN (client-go
	// over HTTPS does), HTTP/1.1 to the others. The tee records either.
	TLS         bool
	Certificate *tls.Certificate
	// Tee, if set, records every client connection: each byte read from
	// or written to a client (after TLS) goes to a TeeConn.
	Tee *capture.Tee
	// Logger receives one Debug line per request and Warn lines for
	// upstream errors and refused requests; nil discards.
	Logger *slog.Logger
	// AcceptHosts are the hosts whose requests the proxy serves, as
	// kubectl proxy's --accept-hosts: regular expressions matched against
	// the Host without its port (package internal/hostfilter). nil means
	// localhost, 127.0.0.1 and [::1]. A request with another Host gets 403
	// Forbidden, as from kubectl proxy: a web page whose name resolves to
	// 127.0.0.1 (DNS rebinding) cannot make the proxy fetch with the
	// kubeconfig's credentials.
	AcceptHosts []string
	// RejectPaths are paths refused with 403 Forbidden (websocket
	// upgrades included), as kubectl proxy's --reject-paths: nil means
	// exec, attach and portforward of pods; an empty list refuses none.
	RejectPaths []string
}

// Proxy is a reverse proxy to one apiserver, like kubectl proxy: clients
// talk plain HTTP/1.1 (or HTTPS) to it on loopback, and it forwards each
// request with the kubeconfig's credentials (the client's own
// Authorization and Proxy-Authorization headers are not forwarded).
// Responses are flushed to the client after every read from upstream, so
// watch events keep their timing. Upstream may be HTTP/1.1 or HTTP/2.
//
// Start it with Start (or Serve), stop it with Shutdown or Close. Safe for
// concurrent use.
type Proxy struct {
	// URL is the proxy's base URL ("http://127.0.0.1:8001"), set by Start
	// and Serve.
	URL string

	opts    Options
	log     *slog.Logger
	target  *url.URL
	srv     *http.Server
	tlsCfg  *tls.Config
	certPEM []byte

	h2 *http2.Server // with TLS: serves the connections that chose h2

	mu       sync.Mutex
	started  bool
	done     chan struct{}
	active   int        // handlers running
	short    int        // handlers running that are not watches
	idle     *sync.Cond // signalled when active drops to 0
	ln       *listener
	draining bool                    // Shutdown began: watches end at their next event boundary
	watches  map[*drainBody]struct{} // the watches being proxied (drain.go)
}

// New returns a Proxy forwarding to the apiserver of cfg, with its
// credentials. It does not listen yet.
func New(cfg *rest.Config, opts Options) (*Proxy, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	target, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: transport: %w", err)
	}
	filter, err := hostfilter.New(opts.AcceptHosts, opts.RejectPaths)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{opts: opts, log: opts.Logger, target: target, done: make(chan struct{}), watches: map[*drainBody]struct{}{}}
	p.idle = sync.NewCond(&p.mu)
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = ""
			// The proxy authenticates with the kubeconfig's credentials.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Proxy-Authorization")
		},
		ModifyResponse: func(res *http.Response) error {
			if d, ok := res.Request.Context().Value(drainKey{}).(*drainBody); ok {
				d.follow(res)
			}
			return nil
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      log.New(slogWriter{p.log}, "", 0),
		ErrorHandler:  p.upstreamError,
	}
	p.srv = &http.Server{
		Handler: filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			watch := isWatch(r)
			p.mu.Lock()
			p.active++
			if !watch {
				p.short++
			}
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				if !watch {
					p.short--
				}
				if p.active--; p.active == 0 {
					p.idle.Broadcast()
				}
				p.mu.Unlock()
			}()
			p.log.Debug("request", "method", r.Method, "target", r.URL.RequestURI(), "client", r.RemoteAddr)
			if watch {
				ctx, cancel := context.WithCancel(r.Context())
				d := &drainBody{cancel: cancel}
				r = r.WithContext(context.WithValue(ctx, drainKey{}, d))
				p.track(d)
				defer p.untrack(d)
			}
			rp.ServeHTTP(w, r)
		}), p.log),
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          log.New(slogWriter{p.log}, "", 0),
	}
	if opts.TLS {
		cert := opts.Certificate
		if cert == nil {
			host, _, _ := net.SplitHostPort(opts.Listen)
			c, pemBytes, err := selfsigned.New("wtrace proxy", host, time.Now())
			if err != nil {
				return nil, fmt.Errorf("proxy: %w", err)
			}
			cert, p.certPEM = &c, pemBytes
		} else if len(cert.Certificate) > 0 {
			p.certPEM = selfsigned.PEM(cert.Certificate[0])
		}
		// HTTP/2 for clients that offer it, as the apiserver does. The
		// connections are wrapped (the tee), so net/http would not see
		// them as TLS: the listener serves h2 itself (serveH2).
		p.tlsCfg = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		p.h2 = &http2.Server{}
		// So that Shutdown sends the HTTP/2 connections a GOAWAY (net/http
		// never sees them as TLS: TLSNextProto is not used).
		if err := http2.ConfigureServer(p.srv, p.h2); err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
	}
	return p, nil
}

// upstreamError answers a request the apiserver could not be asked, with
// a Kubernetes Status (so clients show a sensible message).
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Value(drainKey{}) != nil && p.isDraining():
		// A watch asked to end (Shutdown) before its answer came: the
		// client retries, elsewhere.
		code, err = http.StatusServiceUnavailable, errDraining
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, context.Canceled):
		return // the client went away
	default:
		p.log.Warn("upstream request failed", "method", r.Method, "target", r.URL.RequestURI(), "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": "wtrace proxy: " + err.Error(), "reason": "ServiceUnavailable", "code": code,
	})
}

// track registers a watch being proxied (drained at once when Shutdown
// has begun); untrack forgets it.
func (p *Proxy) track(d *drainBody) {
	p.mu.Lock()
	p.watches[d] = struct{}{}
	draining := p.draining
	p.mu.Unlock()
	if draining {
		d.drain()
	}
}

func (p *Proxy) untrack(d *drainBody) {
	p.mu.Lock()
	delete(p.watches, d)
	p.mu.Unlock()
	d.cancel()
}

func (p *Proxy) isDraining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.draining
}

// Target returns the apiserver URL requests go to (without credentials:
// as Cluster.Server).
func (p *Proxy) Target() string {
	u := *p.target
	u.User = nil
	return redact.Target(u.String(), &redact.Report{})
}

// CertPEM returns the PEM certificate served with TLS (nil without TLS).
func (p *Proxy) CertPEM() []byte { return p.certPEM }

// WriteCertFile writes CertPEM into a file of the temporary directory, for
// kubectl --certificate-authority, and returns its path ("" when the proxy
// serves plain HTTP). The caller removes it.
func (p *Proxy) WriteCertFile() (string, error) {
	if p.certPEM == nil {
		return "", nil
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("wtrace-proxy-%d.crt", os.Getpid()))
	return path, os.WriteFile(path, p.certPEM, 0o644)
}

// Start listens on Options.Listen and serves in the background.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", p.opts.Listen)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	return p.Serve(ln)
}

// Serve serves on ln in the background (the Proxy closes ln).
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		ln.Close()
		return errors.New("proxy: already started")
	}
	p.started = true
	p.mu.Unlock()
	scheme := "http"
	if p.tlsCfg != nil {
		scheme = "https"
	}
	p.URL = scheme + "://" + ln.Addr().String()
	wl := &listener{Listener: ln, tee: p.opts.Tee, tls: p.tlsCfg, p: p,
		conns: make(chan net.Conn), errs: make(chan error, 1), closed: make(chan struct{}), h2conns: map[net.Conn]bool{}}
	p.mu.Lock()
	p.ln = wl
	p.mu.Unlock()
	if p.tlsCfg != nil {
		go wl.acceptTLS()
	}
	go func() {
		defer close(p.done)
		p.srv.Serve(wl)
	}()
	return nil
}

// Shutdown stops accepting connections and ends every request in flight
// cleanly, as wtrace replay and kube-apiserver do: a watch at its next
// event boundary, with its terminating chunk over HTTP/1.1 and END_STREAM
// over HTTP/2 (see drain.go), the other requests (a LIST, a create) once
// they finish. It waits for them until ctx is done, then closes every
// connection (cutting what is left) and waits for the handlers to return.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.srv.SetKeepAlivesEnabled(false)
	p.mu.Lock()
	ln := p.ln
	p.draining = true
	watches := make([]*drainBody, 0, len(p.watches))
	for d := range p.watches {
		watches = append(watches, d)
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, d := range watches {
		d.drain()
	}
	// GOAWAY to the HTTP/2 connections; waits for the HTTP/1.1 ones.
	p.srv.Shutdown(ctx)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		n := p.active
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return p.Close()
		case <-tick.C:
		}
	}
	return p.Close()
}

// isWatch reports whether kube-apiserver serves r as a watch stream
// (apipath.Request.Watch): the proxy counts the requests in flight that
// are not.
func isWatch(r *http.Request) bool { return apipath.IsWatch(r.Method, r.RequestURI) }

// Close closes the listener and every connection, and returns once every
// handler has returned.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	p.mu.Lock()
	wl := p.ln
	p.mu.Unlock()
	if wl != nil {
		wl.closeH2() // net/http does not know the HTTP/2 connections
	}
	p.mu.Lock()
	started := p.started
	p.started = true // a later Start fails
	p.mu.Unlock()
	if started {
		<-p.done
	}
	p.mu.Lock()
	for p.active > 0 {
		p.idle.Wait()
	}
	p.mu.Unlock()
	return err
}

// listener wraps accepted connections: TLS (if configured), then the tee,
// so the tee sees plaintext. With TLS, the handshake runs in a goroutine
// of its own per connection (a slow client does not hold the others up);
// a connection whose client chose HTTP/2 in ALPN is served by the
// Proxy's http2.Server (serveH2), the others are handed to net/http
// through Accept.
type listener struct {
	net.Listener
	tee *capture.Tee
	tls *tls.Config
	p   *Proxy

	conns     chan net.Conn // TLS: HTTP/1.1 connections, handshake done
	errs      chan error    // TLS: the accept loop's error
	closed    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	h2conns map[net.Conn]bool // served by serveH2
	h2wg    sync.WaitGroup
	h2done  bool
}

func (l *listener) Accept() (net.Conn, error) {
	if l.tls == nil {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		return l.wrap(c, "http/1.1"), nil
	}
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// wrap hands the connection's plaintext to the tee, if any.
func (l *listener) wrap(c net.Conn, proto string) net.Conn {
	if l.tee == nil {
		return c
	}
	return newTeeConn(c, l.tee.Conn(c.RemoteAddr().String(), c.LocalAddr().String(), proto))
}

// acceptTLS accepts TCP connections and starts each one's handshake.
func (l *listener) acceptTLS() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.errs <- err
			return
		}
		go l.handshake(c)
	}
}

// handshake completes TLS (within readHeaderTimeout) and routes the
// connection by the protocol the client chose.
func (l *listener) handshake(raw net.Conn) {
	tc := tls.Server(raw, l.tls)
	ctx, cancel := context.WithTimeout(context.Background(), readHeaderTimeout)
	go func() {
		select {
		case <-l.closed: // Close ends handshakes in progress
			cancel()
		case <-ctx.Done():
		}
	}()
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		tc.Close()
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		l.serveH2(l.wrap(tc, "h2"))
		return
	}
	select {
	case l.conns <- l.wrap(tc, "http/1.1"):
	case <-l.closed:
		tc.Close()
	}
}

// serveH2 serves one HTTP/2 connection with the Proxy's handler until it
// ends; closeH2 ends them all.
func (l *listener) serveH2(c net.Conn) {
	l.mu.Lock()
	if l.h2done {
		l.mu.Unlock()
		c.Close()
		return
	}
	l.h2conns[c] = true
	l.h2wg.Add(1)
	l.mu.Unlock()
	defer func() {
		c.Close()
		l.mu.Lock()
		delete(l.h2conns, c)
		l.mu.Unlock()
		l.h2wg.Done()
	}()
	l.p.h2.ServeConn(c, &http2.ServeConnOpts{Handler: l.p.srv.Handler, BaseConfig: l.p.srv})
}

// closeH2 closes the HTTP/2 connections and waits for their servers.
func (l *listener) closeH2() {
	l.mu.Lock()
	l.h2done = true
	for c := range l.h2conns {
		c.Close()
	}
	l.mu.Unlock()
	l.h2wg.Wait()
}

// teeConn hands every byte read from and written to the client to the
// tee. Close waits for the reads and writes in flight (which the close
// ends) so that their bytes are recorded before the connection's end.
type teeConn struct {
	net.Conn
	tc       *capture.TeeConn
	once     sync.Once
	mu       sync.Mutex
	inflight int
	closed   bool
	drained  *sync.Cond
}

func newTeeConn(c net.Conn, tc *capture.TeeConn) *teeConn {
	t := &teeConn{Conn: c, tc: tc}
	t.drained = sync.NewCond(&t.mu)
	return t
}

func (c *teeConn) begin() {
	c.mu.Lock()
	c.inflight++
	c.mu.Unlock()
}

func (c *teeConn) end() {
	c.mu.Lock()
	if c.inflight--; c.inflight == 0 && c.closed {
		c.drained.Broadcast()
	}
	c.mu.Unlock()
}

func (c *teeConn) Read(p []byte) (int, error) {
	c.begin()
	defer c.end()
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.tc.Data(formats.ClientToServer, p[:n])
	}
	return n, err
}

func (c *teeConn) Write(p []byte) (int, error) {
	c.begin()
	defer c.end()
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.tc.Data(formats.ServerToClient, p[:n])
	}
	return n, err
}

func (c *teeConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		for c.inflight > 0 {
			c.drained.Wait()
		}
		c.mu.Unlock()
		c.tc.Close(formats.ConnClosed)
	})
	return err
}

// slogWriter turns the standard logger's lines (net/http's) into Debug
// records.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
