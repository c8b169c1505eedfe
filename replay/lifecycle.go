package replay

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/wtrace/wtrace/internal/selfsigned"
)

// Shutdown stops the server gracefully, as kube-apiserver does on
// SIGTERM: /readyz fails at once (its shutdown check), the server goes on
// serving for Options.ShutdownDelay (new clients too), then the listener
// closes, HTTP/2 connections get a GOAWAY, and every open stream ends
// cleanly where it is — a watch over HTTP/1.1 with its terminating chunk,
// over HTTP/2 with END_STREAM — so that informers re-watch, elsewhere
// once the load balancer has moved them. Requests that are not streams
// finish. It returns once every handler has returned and every
// connection is closed, or when ctx is done; then (and in any case) it
// closes the server as Close does, cutting what is left, and returns
// ctx's error if it had to. Close after Shutdown does nothing.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	srv := s.srv
	s.mu.Unlock()
	s.hub.Drain()
	delayShutdown(ctx, s.opts.ShutdownDelay)
	var shut chan error
	if srv != nil {
		// Stops accepting, closes idle connections, sends GOAWAY on HTTP/2
		// connections, and waits for the others to finish.
		shut = make(chan error, 1)
		go func() { shut <- srv.Shutdown(ctx) }()
	}
	// Every stream stops where it is, cleanly (endsClean).
	s.cancel()
	s.hub.Stop()
	done := make(chan struct{})
	go func() {
		s.handlers.wait()
		s.hub.Wait()
		s.world.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if shut != nil {
		if serr := <-shut; serr != nil && err == nil {
			err = serr
		}
	}
	s.Close()
	return err
}

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
	ln := s.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		s.listener = newPausable(ln)
		ln = s.listener
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       idleTimeout(s.opts.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, st http.ConnState) {
			s.met.ConnState(st)
			if s.pert != nil {
				s.pert.connState(c, st)
			}
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
	s.handlers.close()
	if srv != nil {
		_ = srv.Close() // first, so that cancelled streams cannot end cleanly
	}
	s.cancel()
	s.hub.Stop()
	if srv != nil {
		<-s.serveDone
		s.conns.Wait()
	}
	s.handlers.wait()
	s.hub.Wait()
	s.world.Wait()
	s.pert.wait()
	if s.ownFile {
		s.file.Close()
	}
}

// delayShutdown waits d, Options.ShutdownDelay (or until ctx is done),
// while the server serves on with /readyz failing.
func delayShutdown(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
