package replay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawResponse is an HTTP/1.1 response read off a plain TCP connection, so
// that tests see the chunks and the way the stream ends exactly as sent.
type rawResponse struct {
	conn    net.Conn
	br      *bufio.Reader
	status  int
	header  http.Header
	chunked bool
}

// rawTimeout bounds a raw connection's life: a test whose server stops
// sending fails with a timeout instead of hanging.
const rawTimeout = 2 * time.Minute

// rawGet sends GET target to the server at base URL u over a new
// connection and reads the response head.
func rawGet(t testing.TB, u, target string, hdr ...string) *rawResponse {
	t.Helper()
	r, err := rawGetErr(u, target, hdr...)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	t.Cleanup(func() { r.conn.Close() })
	return r
}

func rawGetErr(u, target string, hdr ...string) (*rawResponse, error) {
	addr := strings.TrimPrefix(u, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(rawTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, addr)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		c.Close()
		return nil, err
	}
	r := &rawResponse{conn: c, br: bufio.NewReaderSize(c, 64<<10)}
	tp := textproto.NewReader(r.br)
	line, err := tp.ReadLine()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("status line: %w", err)
	}
	_, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if r.status, err = strconv.Atoi(code); err != nil {
		c.Close()
		return nil, fmt.Errorf("status line %q", line)
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("header: %w", err)
	}
	r.header = http.Header(mh)
	r.chunked = strings.EqualFold(r.header.Get("Transfer-Encoding"), "chunked")
	return r, nil
}

// nextChunk returns the data of the next chunk: io.EOF after the last
// (zero-length) chunk, io.ErrUnexpectedEOF if the connection closed before
// it, or the read error (a reset, say).
func (r *rawResponse) nextChunk() ([]byte, error) {
	line, err := r.br.ReadString('\n')
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	sz, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
	n, err := strconv.ParseInt(sz, 16, 64)
	if err != nil || n < 0 || n > 64<<20 {
		return nil, fmt.Errorf("bad chunk size line %q", line)
	}
	if n == 0 {
		// trailer section, then CRLF
		for {
			l, err := r.br.ReadString('\n')
			if err != nil {
				return nil, io.ErrUnexpectedEOF
			}
			if l == "\r\n" {
				return nil, io.EOF
			}
		}
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r.br, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if string(data[n:]) != "\r\n" {
		return nil, fmt.Errorf("chunk of %d bytes not followed by CRLF", n)
	}
	return data[:n], nil
}

// chunks reads chunks until the stream ends, returning them and how it
// ended (io.EOF for a clean end).
func (r *rawResponse) chunks() ([][]byte, error) {
	var cs [][]byte
	for {
		c, err := r.nextChunk()
		if err != nil {
			return cs, err
		}
		cs = append(cs, c)
	}
}

// body reads a Content-Length or chunked body whole.
func (r *rawResponse) body() ([]byte, error) {
	if r.chunked {
		cs, err := r.chunks()
		if err != io.EOF {
			return nil, err
		}
		var b []byte
		for _, c := range cs {
			b = append(b, c...)
		}
		return b, nil
	}
	n, err := strconv.Atoi(r.header.Get("Content-Length"))
	if err != nil {
		return io.ReadAll(r.br)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r.br, b)
	return b, err
}
