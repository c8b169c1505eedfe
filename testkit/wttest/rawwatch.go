package wttest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"
)

// RawWatch sends GET target to base (http://host:port) over HTTP/1.1, on
// a connection of its own (closed when t ends), with the header lines
// given ("Accept: …"), and reads the response head: a chunked 200, or t
// fails. It returns the head and the body as the chunks on the wire
// decode (net/http's chunked reader, over the raw bytes): io.EOF only
// after the terminating chunk, io.ErrUnexpectedEOF when the connection is
// cut — how a test tells a clean end from a cut one.
func RawWatch(t testing.TB, base, target string, header ...string) (*http.Response, io.Reader) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, addr)
	for _, h := range header {
		fmt.Fprintf(c, "%s\r\n", h)
	}
	fmt.Fprint(c, "\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("watch %s: %v", target, err)
	}
	if resp.StatusCode != 200 || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("watch %s: %s %v; want a chunked 200", target, resp.Status, resp.TransferEncoding)
	}
	// ReadResponse would undo the chunking; read the raw bytes instead,
	// so that the terminating chunk is seen, not inferred.
	return resp, httputil.NewChunkedReader(br)
}

// AsyncRead reads a body to its end in a goroutine of its own.
type AsyncRead struct {
	mu   sync.Mutex
	b    []byte
	err  error // nil after io.EOF
	done chan struct{}
}

// ReadAsync starts reading r.
func ReadAsync(r io.Reader) *AsyncRead {
	a := &AsyncRead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			a.mu.Lock()
			a.b = append(a.b, buf[:n]...)
			if err != nil && err != io.EOF {
				a.err = err
			}
			a.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return a
}

// Len is how many bytes were read so far.
func (a *AsyncRead) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.b)
}

// Wait waits until n bytes were read (a minute at most), or fails t.
func (a *AsyncRead) Wait(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := a.Len()
		if got >= n {
			return
		}
		select {
		case <-a.done:
			t.Fatalf("the body ended after %d bytes (%v); want %d", got, a.err, n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes read in a minute; want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Result waits for the end of the body (a minute at most) and returns
// what was read and how it ended: nil for io.EOF.
func (a *AsyncRead) Result() ([]byte, error) {
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		return nil, errors.New("the body did not end within a minute")
	}
	return a.b, a.err
}
