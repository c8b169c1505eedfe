package replay

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// hopByHop lists the header fields a proxy or server must not forward
// (RFC 9110 §7.6.1) plus the ones net/http sets from the framing it chooses.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Transfer-Encoding":   true,
	"Te":                  true,
	"Trailer":             true,
	"Upgrade":             true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Content-Length":      true,
	"Date":                true, // net/http sends the current date
}

// responseHeader returns the recorded header fields a replay sends: without
// hop-by-hop fields (and those the recorded Connection field named), without
// redacted values, without HTTP/2 pseudo-headers, without Content-Length and
// Date (set by the caller and by net/http), and without Content-Encoding
// when keepEncoding is false.
func responseHeader(rec []formats.Header, keepEncoding bool) http.Header {
	h := http.Header{}
	named := map[string]bool{}
	for _, f := range rec {
		if http.CanonicalHeaderKey(f.Name) == "Connection" {
			for _, n := range strings.Split(f.Value, ",") {
				named[http.CanonicalHeaderKey(strings.TrimSpace(n))] = true
			}
		}
	}
	for _, f := range rec {
		k := http.CanonicalHeaderKey(f.Name)
		switch {
		case f.Redacted, strings.HasPrefix(f.Name, ":"), hopByHop[k], named[k],
			strings.HasPrefix(k, "Proxy-"),
			k == "Content-Encoding" && !keepEncoding:
			continue
		}
		h[k] = append(h[k], f.Value)
	}
	return h
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip
// (RFC 9110 §12.5.3: listed, or "*", with a non-zero q).
func acceptsGzip(ae string) bool {
	gz, star := -1.0, -1.0
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			gz = q
		case "*":
			star = q
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// endKind is how a served response ends.
type endKind int

const (
	endClean endKind = iota // terminating chunk / END_STREAM
	endAbort                // connection closed without the terminating chunk (FIN)
	endReset                // connection reset (RST)
	endHold                 // stay open until timeoutSeconds, the client leaves, or Close
)

func (k endKind) String() string {
	switch k {
	case endAbort:
		return "abort"
	case endReset:
		return "reset"
	case endHold:
		return "hold"
	}
	return "clean"
}

// streamer writes one response with its timing. It belongs to the handler
// goroutine of one request; nothing on its write path is shared with other
// requests except immutable plans.
type streamer struct {
	s         *Server
	w         http.ResponseWriter
	rc        *http.ResponseController
	ctx       context.Context
	arrival   time.Time
	timeoutAt time.Time // zero: none
	timer     Timer
	shift     time.Duration // added to every deadline (loop passes)
	bytes     int64
	writes    int64
	stopped   string // why the stream stopped early ("" if it did not)
}

func (s *Server) newStreamer(ctx context.Context, w http.ResponseWriter, q query, arrival time.Time) *streamer {
	st := &streamer{s: s, w: w, rc: http.NewResponseController(w), ctx: ctx, arrival: arrival}
	if q.timeout > 0 {
		st.timeoutAt = arrival.Add(q.timeout)
	}
	return st
}

// scale maps a recorded duration to replay time at the server's speed.
func (s *Server) scale(d int64) time.Duration {
	if d <= 0 || s.speed == 0 {
		return 0
	}
	if s.speed == 1 {
		return time.Duration(d)
	}
	f := float64(d) / s.speed
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// deadline is when a byte recorded at capture time t goes out, on a timeline
// whose capture time base maps to the request's arrival.
func (st *streamer) deadline(t, base int64) time.Time {
	return st.arrival.Add(st.shift + st.s.scale(t-base))
}

// waitUntil waits for the clock to reach t. It returns false if the
// client's timeoutSeconds passes first (stopped = "timeout") or the request
// is cancelled (stopped = "cancelled").
func (st *streamer) waitUntil(t time.Time) bool {
	limit := t
	timeout := false
	if !st.timeoutAt.IsZero() && !st.timeoutAt.After(t) {
		limit, timeout = st.timeoutAt, true
	}
	if d := limit.Sub(st.s.clock.Now()); d > 0 {
		if st.timer == nil {
			st.timer = st.s.clock.NewTimer(d)
		} else {
			st.timer.Reset(d)
		}
		select {
		case <-st.timer.C():
		case <-st.ctx.Done():
			st.timer.Stop()
			st.stopped = "cancelled"
			return false
		}
	} else if st.ctx.Err() != nil {
		st.stopped = "cancelled"
		return false
	}
	if timeout {
		st.stopped = "timeout"
		return false
	}
	return true
}

// hold waits until the client's timeoutSeconds, the client leaves, or the
// server closes.
func (st *streamer) hold() {
	if st.timeoutAt.IsZero() {
		<-st.ctx.Done()
		st.stopped = "cancelled"
		return
	}
	st.waitUntil(st.timeoutAt.Add(time.Hour)) // stops at timeoutAt
}

// send writes p and flushes it: one HTTP/1.1 chunk (or HTTP/2 DATA frame)
// per call, since the response buffer is empty before each write. A client
// that cannot take p within the write timeout is dropped.
func (st *streamer) send(p []byte) bool {
	if len(p) == 0 {
		return true
	}
	if st.s.writeTimeout > 0 {
		_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.writeTimeout))
	}
	if _, err := st.w.Write(p); err != nil {
		st.stopped = "write: " + err.Error()
		return false
	}
	if err := st.rc.Flush(); err != nil {
		st.stopped = "flush: " + err.Error()
		return false
	}
	st.bytes += int64(len(p))
	st.writes++
	return true
}

// flushHeader sends the response head now (watch responses start with it,
// as the apiserver's do).
func (st *streamer) flushHeader() bool {
	if err := st.rc.Flush(); err != nil {
		st.stopped = "flush: " + err.Error()
		return false
	}
	return true
}

// run sends src's writes on the timeline that maps capture time base to the
// request's arrival, skipping body bytes before offset skip. It returns
// false if the stream stopped early.
func (st *streamer) run(src source, base, skip int64) bool {
	for {
		w, ok, err := src.next()
		if err != nil {
			st.stopped = "reading session: " + err.Error()
			st.s.log.Warn("replay: reading session", "err", err)
			return false
		}
		if !ok {
			return true
		}
		data := w.data
		if skip > w.off {
			n := skip - w.off
			if n >= int64(len(data)) {
				continue
			}
			data = data[n:]
		}
		if !st.waitUntil(st.deadline(w.at, base)) {
			return false
		}
		if !st.send(data) {
			return false
		}
	}
}

// finish ends the response as kind says, at capture time endAt on the
// timeline of base.
func (st *streamer) finish(kind endKind, endAt, base int64) {
	if kind == endHold || st.s.opts.Hold {
		st.hold()
		return
	}
	if !st.waitUntil(st.deadline(endAt, base)) {
		return
	}
	switch kind {
	case endAbort:
		st.abort(false)
	case endReset:
		st.abort(true)
	}
}

// abort ends the response without its terminating chunk: the connection is
// closed (FIN), or reset (RST) with SO_LINGER 0. Over HTTP/2 (which cannot
// be hijacked) the stream is reset with RST_STREAM through
// http.ErrAbortHandler, which net/http recovers without logging.
func (st *streamer) abort(reset bool) {
	conn, _, err := st.rc.Hijack()
	if err != nil {
		st.stopped = "aborted"
		panic(http.ErrAbortHandler)
	}
	if reset {
		nc := conn
		if u, ok := conn.(interface{ NetConn() net.Conn }); ok {
			nc = u.NetConn() // TLS: reset the TCP connection under it
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
		st.stopped = "reset"
		return
	}
	_ = conn.Close()
	st.stopped = "aborted"
}

// endOf says how a recorded response ended, for a replay.
func endOf(x *recorded) endKind {
	switch x.endStatus() {
	case formats.EndClosed, formats.EndError:
		return endAbort
	case formats.EndReset:
		return endReset
	case formats.EndTruncated:
		if x.format != 0 {
			return endHold // the watch was still open when the capture ended
		}
		return endAbort
	}
	return endClean
}

// openSource returns exchange x's writes: from the shared plan cache when
// the exchange is small enough, else streamed from the file.
func (s *Server) openSource(x *recorded) (source, error) {
	if x.info.BodyBytes <= s.maxPlan {
		v, err := s.cache.get("plan:"+strconv.FormatInt(x.id, 10), func() (any, int64, error) {
			p, err := buildPlan(s.file, x, s.opts.EventChunks)
			if err != nil {
				return nil, 0, err
			}
			return p, p.size, nil
		})
		if err != nil {
			return nil, err
		}
		return &planSource{p: v.(*plan)}, nil
	}
	return newProducer(s.file, x, s.opts.EventChunks), nil
}

// serveExchange sends recorded exchange x, whole or (resume) from body
// offset skip with the timeline starting at capture time base.
func (s *Server) serveExchange(st *streamer, r *http.Request, x *recorded, skip, base int64) {
	status := x.info.Response.Status
	if status <= 0 {
		status = http.StatusOK // the head was not captured
	}
	if x.format == 0 {
		s.serveOpaque(st, r, x, status)
		return
	}
	h := st.w.Header()
	for k, v := range responseHeader(x.info.Response.Header, false) {
		h[k] = v
	}
	st.w.WriteHeader(status)
	if !st.flushHeader() {
		return
	}
	if base == 0 {
		base = x.respTime()
	}
	s.continueWatch(st, x, skip, base)
}

// serveOpaque sends a non-event body: as recorded (byte for byte, with its
// Content-Encoding) when the client accepts that encoding, else decoded.
func (s *Server) serveOpaque(st *streamer, r *http.Request, x *recorded, status int) {
	resp := x.info.Response
	gz := strings.EqualFold(resp.Encoding, "gzip")
	decode := gz && !acceptsGzip(r.Header.Get("Accept-Encoding"))
	known := resp.Encoding == "" || gz
	h := st.w.Header()
	for k, v := range responseHeader(resp.Header, !decode || !known) {
		h[k] = v
	}
	complete := x.endStatus() == formats.EndComplete
	if complete && !decode && resp.Framing == formats.FramingLength {
		h.Set("Content-Length", strconv.FormatInt(x.info.BodyBytes, 10))
	}
	if status == http.StatusNoContent || status == http.StatusNotModified || r.Method == http.MethodHead {
		st.w.WriteHeader(status)
		return
	}
	src, err := s.openSource(x)
	if err != nil {
		h.Del("Content-Length")
		writeStatus(st.w, http.StatusInternalServerError, "InternalError", "replay: reading session: "+err.Error())
		return
	}
	st.w.WriteHeader(status)
	base := x.respTime()
	if decode && known {
		zr, err := gzip.NewReader(&sourceReader{src: src})
		if err != nil {
			st.stopped = "gzip: " + err.Error()
			return
		}
		if !st.waitUntil(st.deadline(x.endTime(), base)) {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := zr.Read(buf)
			if n > 0 && !st.send(buf[:n]) {
				return
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				st.stopped = "gzip: " + err.Error()
				st.abort(false)
				return
			}
		}
	} else if !st.run(src, base, 0) {
		return
	}
	k := endOf(x)
	if k == endHold {
		k = endAbort
	}
	if k == endClean {
		return // the body is complete; no need to wait for the recorded end
	}
	if s.opts.Hold {
		st.hold()
		return
	}
	st.finish(k, x.endTime(), base)
}

// sourceReader reads a source's bytes as a stream (to decode gzip).
type sourceReader struct {
	src source
	buf []byte
}

func (r *sourceReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		w, ok, err := r.src.next()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, io.EOF
		}
		r.buf = w.data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

var errClosed = errors.New("replay: server closed")
