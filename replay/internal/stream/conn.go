package stream

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/internal/pace"
)

// maxBatch bounds the bytes of due chunks sent in one write call.
const maxBatch = 256 << 10

// ownConn is an HTTP/1.1 connection a watch stream took over from net/http
// (Hijack), so that it writes the chunked framing itself: the chunks that
// are due together go out in one writev while each keeps its recorded
// boundary. net/http can only emit a chunk by flushing the connection, one
// system call per chunk, which is what limits a server with thousands of
// watchers. The stream closes the connection when it ends (its response
// head says Connection: close). It belongs to the stream's goroutine,
// which ServeHTTP hands the stream to (see ServeHTTP); Close reaches the
// connections that wait in reads through Hub.owned.
type ownConn struct {
	conn net.Conn
	tcp  *net.TCPConn // conn itself when plain TCP (writev)
	// selfRead: the stream reads the connection itself while it waits
	// (ownWait), with the read deadline as its timer; otherwise a reader
	// goroutine does, and closes readDone when the client left.
	selfRead bool
	readDone chan struct{}
	rbuf     [64]byte // what the client sends after its request (dropped)
	// stopCancel stops the AfterFunc that unblocks writes on cancellation.
	stopCancel func() bool
	iov        net.Buffers
	out        net.Buffers // being written (consumed by WriteTo)
	hex        []byte      // chunk-size lines of the batch being sent
	buf        []byte      // the batch copied together (TLS)
	deadline   time.Time   // the write deadline set (zero: none)
	// readDeadline: ownWait left a read deadline set.
	readDeadline bool
	// park: the stream parks in the server's scheduler where it would
	// wait (see sched.go), which writes to raw without blocking; pend
	// holds what such a write left unwritten, for a goroutine to write.
	park bool
	raw  syscall.RawConn
	pend []byte
}

// crlf ends a chunk's data.
var crlf = []byte("\r\n")

// head is a response head: status and header fields, and for taken-over
// connections its HTTP/1.1 rendering (status line and fields with
// Transfer-Encoding: chunked and Connection: close; without Date and the
// blank line), built once per recorded exchange and shared.
type Head struct {
	status int
	h      http.Header
	raw    []byte
}

func NewHead(status int, h http.Header) *Head {
	h = h.Clone()
	h.Del("Content-Length")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	var b strings.Builder
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(status))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(status))
	b.WriteString("\r\n")
	h.Write(&b)
	return &Head{status: status, h: h, raw: []byte(b.String())}
}

// takeOver hijacks the request's connection and writes the response head
// for a chunked stream. It returns false (the caller then goes through
// net/http) when the connection cannot be hijacked: HTTP/2, HTTP/1.0, or a
// ResponseWriter that does not support it.
func (st *Stream) takeOver(r *http.Request, hd *Head) bool {
	if !mayTakeOver(r) {
		return false
	}
	// Header fields a wrapping handler set stay, unless the recording has
	// them too.
	if extra := st.w.Header(); len(extra) > 0 {
		h := hd.h.Clone()
		for k, v := range extra {
			if _, ok := h[k]; !ok {
				h[k] = v
			}
		}
		hd = NewHead(hd.status, h)
	}
	conn, brw, err := st.rc.Hijack()
	if err != nil {
		return false
	}
	oc := &ownConn{conn: conn}
	oc.tcp, _ = conn.(*net.TCPConn)
	st.own = oc
	st.hub.met.ConnOpened()
	// net/http's response and connection state are done with: drop them,
	// so that they are freed when ServeHTTP returns (handoff).
	st.w, st.rc, st.r = hijacked{}, hijackedRC, nil
	// On the real clock, a plain TCP stream that waits only for its next
	// write (no Follow) waits in a read of its connection, which notices
	// the client leaving too; otherwise a goroutine reads it.
	_, real := st.hub.clock.(pace.Real)
	oc.selfRead = real && oc.tcp != nil
	// Such a stream, on a goroutine of its own and without an Out, parks
	// in the scheduler while it waits, where the platform allows.
	if oc.selfRead && st.handed && (st.tap == nil || !st.tap.Records()) && pace.Supported {
		if rc, err := oc.tcp.SyscallConn(); err == nil {
			oc.park, oc.raw = true, rc
			scs := st.hub.scs
			st.sc = scs[st.hub.nsc.Add(1)%uint32(len(scs))]
		}
	}
	// A cancelled request (the client left, Close) must not stay blocked
	// in a write to a client that does not read, nor in ownWait: Close
	// interrupts the connections in s.owned; a reader goroutine, the
	// request's cancellation.
	if oc.selfRead {
		st.hub.own(oc)
		oc.stopCancel = func() bool { st.hub.disown(oc); return true }
		if st.ctx.Err() != nil {
			oc.interrupt()
		}
	} else {
		oc.stopCancel = st.afterCancel(oc)
	}
	// Bytes the request's reader holds already are dropped with it; the
	// rest is read from the connection.
	if n := brw.Reader.Buffered(); n > 0 {
		_, _ = brw.Reader.Discard(n)
	}
	if !oc.selfRead {
		oc.readDone = make(chan struct{})
		go func() {
			defer close(oc.readDone)
			for {
				if _, err := conn.Read(oc.rbuf[:]); err != nil {
					st.cancel()
					return
				}
			}
		}()
	}
	if st.handoff != nil {
		st.handoff()
		st.handoff = nil
	}
	date := make([]byte, 0, 64)
	date = append(date, "Date: "...)
	date = time.Now().UTC().AppendFormat(date, http.TimeFormat)
	date = append(date, "\r\n\r\n"...)
	if st.tap != nil {
		st.tap.TakenOver(hd.status)
	}
	return st.ownWrite(net.Buffers{hd.raw, date})
}

// hijacked is the ResponseWriter of a stream that took its connection
// over: everything goes to the connection, nothing through net/http.
type hijacked struct{}

func (hijacked) Header() http.Header                          { return http.Header{} }
func (hijacked) Write([]byte) (int, error)                    { return 0, http.ErrHijacked }
func (hijacked) WriteHeader(int)                              {}
func (hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, http.ErrHijacked }

// hijackedRC is the ResponseController of every hijacked stream.
var hijackedRC = http.NewResponseController(hijacked{})

// ownSend sends each element of batch as one chunk, together.
func (st *Stream) ownSend(batch [][]byte) bool {
	oc := st.own
	oc.iov = oc.iov[:0]
	oc.hex = oc.hex[:0]
	exts := st.exts
	st.exts = st.exts[:0]
	if len(exts) != len(batch) {
		exts = nil // not run's batch: no recorded chunks
	}
	for i, p := range batch {
		oc.hex = strconv.AppendInt(oc.hex, int64(len(p)), 16)
		if exts != nil && exts[i] != "" && validExt(exts[i]) {
			oc.hex = append(append(oc.hex, ';'), exts[i]...)
		}
		oc.hex = append(oc.hex, '\r', '\n')
	}
	h := oc.hex
	for _, p := range batch {
		i := 0
		for h[i] != '\n' {
			i++
		}
		oc.iov = append(oc.iov, h[:i+1:i+1], p, crlf)
		h = h[i+1:]
	}
	return st.ownWrite(oc.iov)
}

// ownWrite writes bufs in one system call where it can (writev on TCP, one
// copy and one TLS record otherwise), with the write deadline.
func (st *Stream) ownWrite(bufs net.Buffers) bool {
	oc := st.own
	if st.inSched {
		// Without blocking, so without a deadline (see scheduler.park).
		var n int64
		for _, b := range bufs {
			n += int64(len(b))
		}
		return st.tryWrite(bufs, n)
	}
	if st.hub.writeTimeout > 0 {
		// Moving the deadline costs a runtime timer update: do it only
		// when it has come within three quarters of the timeout.
		now := time.Now()
		if oc.deadline.Sub(now) < st.hub.writeTimeout*3/4 {
			oc.deadline = now.Add(st.hub.writeTimeout)
			_ = oc.conn.SetWriteDeadline(oc.deadline)
			if st.ctx.Err() != nil {
				oc.interrupt() // cancelled meanwhile: the deadline must stay past
			}
		}
	}
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	if st.tap != nil && st.tap.Records() {
		st.tap.RawWrite(bufs) // before WriteTo consumes bufs
	}
	var err error
	if oc.tcp != nil {
		oc.out = bufs // a field, so that WriteTo's receiver does not escape per call
		_, err = oc.out.WriteTo(oc.tcp)
	} else {
		oc.buf = oc.buf[:0]
		for _, b := range bufs {
			oc.buf = append(oc.buf, b...)
		}
		_, err = oc.conn.Write(oc.buf)
		if cap(oc.buf) > maxBatch*2 {
			oc.buf = nil
		}
	}
	if err != nil {
		st.stopped = "write: " + err.Error()
		return false
	}
	st.bytes += n
	st.hub.met.SentBytes(int(n))
	return true
}

var lastChunk = []byte("0\r\n\r\n")

// recordedLastChunk is the end of a chunked body as recorded: the
// last-chunk with its extensions, then the trailer fields (those whose
// values were redacted left out, as in heads).
func recordedLastChunk(e *formats.End) []byte {
	b := []byte("0")
	if e.LastExt != "" && validExt(e.LastExt) {
		b = append(append(b, ';'), e.LastExt...)
	}
	b = append(b, "\r\n"...)
	for _, f := range e.Trailer {
		if !f.Redacted && validFieldName(f.Name) && validFieldValue(f.Value) {
			b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
		}
	}
	return append(b, "\r\n"...)
}

// validExt reports whether recorded chunk extensions can follow a chunk
// size on the wire: no CR, LF or NUL (the recording's parser checked
// their syntax).
func validExt(ext string) bool { return validFieldValue(ext) }

// ownClose ends a taken-over stream: with the terminating chunk if clean,
// then closes the connection (reset: with SO_LINGER 0, so an RST) and waits
// for the reader goroutine.
func (st *Stream) ownClose(clean, reset bool) {
	oc := st.own
	oc.stopCancel()
	if clean {
		_ = oc.conn.SetWriteDeadline(time.Now().Add(time.Second))
		last := lastChunk
		if st.stopped == "" && st.recEnd != nil && (st.recEnd.LastExt != "" || len(st.recEnd.Trailer) > 0) {
			last = recordedLastChunk(st.recEnd)
		}
		if _, err := oc.conn.Write(last); err == nil && st.tap != nil && st.tap.Records() {
			st.tap.RawWrite([][]byte{last})
		}
	}
	nc := oc.conn
	if reset {
		if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
			nc = u.NetConn()
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = nc.Close()
	st.hub.met.ConnClosed()
	if oc.readDone != nil {
		<-oc.readDone
	}
}

// interrupt ends the connection's blocked and future reads and writes
// (with a deadline in the past).
func (oc *ownConn) interrupt() {
	_ = oc.conn.SetWriteDeadline(time.Unix(1, 0))
	_ = oc.conn.SetReadDeadline(time.Unix(1, 0))
}

// own registers a connection a stream took over (selfRead), for Close to
// interrupt; disown removes it.
func (h *Hub) own(oc *ownConn) {
	h.ownMu.Lock()
	h.owned[oc] = struct{}{}
	h.ownMu.Unlock()
}

func (h *Hub) disown(oc *ownConn) {
	h.ownMu.Lock()
	delete(h.owned, oc)
	h.ownMu.Unlock()
}

// ownWait waits for the clock to reach t (zero: forever) in a read of the
// connection (selfRead), which the read deadline ends at t, and the
// cancellation of the request at once (see takeOver). It returns false if
// the request was cancelled or the client left (then it cancels it).
// Bytes the client sends are dropped.
func (st *Stream) ownWait(t time.Time) bool {
	oc := st.own
	for {
		if !t.IsZero() && !time.Now().Before(t) {
			return st.ctx.Err() == nil
		}
		_ = oc.conn.SetReadDeadline(t)
		oc.readDeadline = !t.IsZero()
		// After setting the deadline: a cancellation from here on moves
		// it to the past.
		if st.ctx.Err() != nil {
			return false
		}
		_, err := oc.conn.Read(oc.rbuf[:])
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			st.cancel() // the client left
			return false
		}
	}
}

// tryWrite is ownWrite on the scheduler (see sched.go): bufs, of n bytes,
// written without blocking. What the client does not take at once goes to
// pend, and the stream yields to a goroutine to write it (see
// Stream.resume); bytes that follow go to pend too, in order.
func (st *Stream) tryWrite(bufs net.Buffers, n int64) bool {
	oc := st.own
	var w int64
	if len(oc.pend) == 0 {
		var err error
		if w, err = st.sc.Writev(oc.raw, bufs); err != nil {
			st.stopped = "write: " + err.Error()
			return false
		}
	}
	st.bytes += w
	st.hub.met.SentBytes(int(w))
	if w == n {
		return true
	}
	for _, b := range bufs {
		if w >= int64(len(b)) {
			w -= int64(len(b))
			continue
		}
		oc.pend = append(oc.pend, b[w:]...)
		w = 0
	}
	st.needGo = true
	return true
}

// afterCancel is context.AfterFunc(ctx, f) whose stop also waits for f
// when it has started: a stream that ends cleanly after its request was
// cancelled (Shutdown) moves its write deadline for the terminating
// chunk after f (ownConn.interrupt) moved it to the past, never before.
func afterCancel(ctx context.Context, f func()) (stop func() bool) {
	done := make(chan struct{})
	stopF := context.AfterFunc(ctx, func() {
		defer close(done)
		f()
	})
	return func() bool {
		if !stopF() {
			<-done
		}
		return true
	}
}

// drainWriteGrace is how long a write in progress when Shutdown cancels
// its stream may still take: a client that reads finishes receiving it
// (then the stream ends with its terminating chunk), one that does not is
// cut after it.
const drainWriteGrace = time.Second

// afterCancel interrupts oc when st's request is cancelled (see
// ownConn.interrupt); while the server shuts down, a write in progress
// gets drainWriteGrace to finish instead, so that the stream can still
// end cleanly after it.
func (st *Stream) afterCancel(oc *ownConn) (stop func() bool) {
	return afterCancel(st.ctx, func() {
		if st.hub.draining.Load() {
			oc.drain()
			return
		}
		oc.interrupt()
	})
}

// drain ends the connection's blocked reads at once, and its writes after
// drainWriteGrace.
func (oc *ownConn) drain() {
	_ = oc.conn.SetWriteDeadline(time.Now().Add(drainWriteGrace))
	_ = oc.conn.SetReadDeadline(time.Unix(1, 0))
}

// Size is about how many bytes hd holds (for a cache's budget).
func (hd *Head) Size() int64 { return int64(len(hd.raw))*2 + 64 }

// Raw is hd's HTTP/1.1 rendering: the status line and header fields,
// without Date and the blank line. The caller must not modify it.
func (hd *Head) Raw() []byte { return hd.raw }
