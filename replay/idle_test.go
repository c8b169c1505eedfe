package replay

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleConnections: keep-alive connections that wait for a next request
// are closed after Options.IdleTimeout, over HTTP/1.1 and HTTP/2, while a
// watch that sends nothing for many idle timeouts stays open.
func TestIdleConnections(t *testing.T) {
	path := corpusSession(t, "basic-json")
	const idle = 200 * time.Millisecond
	// A watch from the newest resourceVersion: nothing left to send, it
	// stays open and quiet (no timeoutSeconds).
	f := openSession(t, path)
	evs := sessionEvents(t, f, exchangeByTarget(t, f, "GET", "watch=true"))
	quietWatch := "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=" + evs[len(evs)-1].meta.ResourceVersion

	t.Run("HTTP/1.1", func(t *testing.T) {
		srv := newTestServer(t, path, Options{Writes: WritesReject, IdleTimeout: idle})
		addr := strings.TrimPrefix(srv.URL, "http://")
		const n = 300
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			conns[i] = c
			// One request, answered whole, and the connection kept.
			fmt.Fprintf(c, "GET /version HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("connection %d: status %d, close %v; want 200 and keep-alive", i, resp.StatusCode, resp.Close)
			}
		}
		watch := rawGet(t, srv.URL, quietWatch)
		if watch.status != 200 {
			t.Fatalf("watch: status %d", watch.status)
		}
		// Every idle connection is closed by the server: a read sees EOF.
		var wg sync.WaitGroup
		var closed atomic.Int64
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err == io.EOF {
					closed.Add(1)
				}
			}()
		}
		wg.Wait()
		if closed.Load() != n {
			t.Fatalf("%d of %d idle connections closed after 30 s; want all (idle timeout %v)", closed.Load(), n, idle)
		}
		// The watch saw many idle timeouts go by and is still open.
		time.Sleep(5 * idle)
		watch.conn.SetReadDeadline(time.Now().Add(idle))
		if _, err := watch.br.ReadByte(); !isTimeout(err) {
			t.Errorf("quiet watch: read %v; want it open (a read timeout)", err)
		}
	})

	t.Run("HTTP/2", func(t *testing.T) {
		srv, err := Open(path, Options{Writes: WritesReject, IdleTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		if err := srv.StartTLS(); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(srv.CertPEM())
		// client returns an HTTP/2 client whose one connection reports
		// when the server closed it.
		client := func(gone *atomic.Bool) *http.Client {
			tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool}}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &watchedConn{Conn: c, gone: gone}, nil
			}
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		}
		const n = 20
		gone := make([]atomic.Bool, n)
		for i := range gone {
			resp, err := client(&gone[i]).Get(srv.URL + "/version")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("%s; want HTTP/2", resp.Proto)
			}
		}
		var watchGone atomic.Bool
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+quietWatch, nil)
		resp, err := client(&watchGone).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			left := 0
			for i := range gone {
				if !gone[i].Load() {
					left++
				}
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d idle HTTP/2 connections still open after 30 s (idle timeout %v)", left, n, idle)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(5 * idle)
		if watchGone.Load() {
			t.Errorf("the connection of a quiet HTTP/2 watch was closed as idle")
		}
	})
}

// watchedConn notes when a read fails or the client closes it: the
// server closed the connection (the client's transport closes it when it
// reads the TLS close_notify; it has no idle timeout of its own).
type watchedConn struct {
	net.Conn
	gone *atomic.Bool
}

func (c *watchedConn) Close() error {
	c.gone.Store(true)
	return c.Conn.Close()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.gone.Store(true)
	}
	return n, err
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
