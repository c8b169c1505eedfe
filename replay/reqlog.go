package replay

import (
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/metrics"
	"github.com/wtrace/wtrace/replay/internal/stream"
)

// requestLog keeps the requests a Server answered (the first max; max
// negative keeps none), for Requests, and hands each request its tap.
type requestLog struct {
	max   int
	out   Out // Options.Out: nil for none
	clock Clock
	met   *metrics.Metrics
	seq   atomic.Int64 // numbers the requests in arrival order

	mu      sync.Mutex
	reqs    []Request // the first max answered
	dropped int       // answered requests beyond max
}

// add keeps r, if there is room.
func (l *requestLog) add(r Request) {
	if l.max < 0 {
		return
	}
	l.mu.Lock()
	if len(l.reqs) < l.max {
		l.reqs = append(l.reqs, r)
	} else {
		l.dropped++
	}
	l.mu.Unlock()
}

// list returns the requests kept, in arrival order.
func (l *requestLog) list() []Request {
	l.mu.Lock()
	out := append([]Request(nil), l.reqs...)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// tap follows one request: its entry in the request log, and its bytes
// to the Out.
type tap struct {
	log  *requestLog
	req  Request
	out  OutConn
	keep bool // keep the response body (a write)

	status  int
	chunked bool // the transcript frames the body in chunks
	noBody  bool
	raw     bool // the stream took its connection over: bytes go as they are
	started bool
	buf     []byte // transcript scratch
}

// maxLoggedBody bounds the response body of a write kept in the request
// log (a write's answer is one object: the apiserver's limit on one).
const maxLoggedBody = 3 << 20

// tap starts following request r (whose body was read).
func (l *requestLog) tap(r *http.Request, body []byte, arrival time.Time) *tap {
	t := &tap{log: l, req: Request{Method: r.Method, Arrival: arrival, Exchange: -1}, keep: apipath.IsWrite(r.Method)}
	if l.max >= 0 {
		t.req.Target, t.req.Header = r.URL.RequestURI(), r.Header.Clone()
	}
	t.req.seq = l.seq.Add(1)
	if t.keep {
		t.req.Body = body
	}
	if l.out == nil {
		return t
	}
	server := ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		server = a.String()
	}
	t.out = l.out.Conn(r.RemoteAddr, server)
	b := t.buf[:0]
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.RequestURI...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.Host...)
	b = append(b, "\r\n"...)
	b = appendHeader(b, r.Header, func(k string) bool {
		return k == "Content-Length" || k == "Transfer-Encoding" || k == "Connection" || k == "Host"
	})
	if len(body) > 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	t.out.Data(formats.ClientToServer, b)
	if len(body) > 0 {
		t.out.Data(formats.ClientToServer, body)
	}
	t.buf = b[:0]
	return t
}

// answer notes how a is answered in the Out, before its bytes go out:
// the note of the response's End in the run file (formats.ReplayAnswer).
func (t *tap) answer(a *stream.Answer) {
	n, ok := t.out.(interface{ Note(string) })
	if !ok || a.How == "" {
		return
	}
	note := formats.ReplayAnswer + a.How
	if a.Recorded {
		note += " exchange " + strconv.FormatInt(a.Exchange, 10)
	}
	if a.Transcoded != "" {
		note += " transcoded " + a.Transcoded
	}
	n.Note(note)
}

// appendHeader appends header fields as HTTP/1.1 lines, sorted, without
// those skip names.
func appendHeader(b []byte, h http.Header, skip func(string) bool) []byte {
	keys := make([]string, 0, len(h))
	for k := range h {
		if !skip(http.CanonicalHeaderKey(k)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			if !stream.ValidField(k, v) {
				continue
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// head notes the response head going out through net/http.
func (t *tap) head(status int, h http.Header, method string) {
	if t.started {
		return
	}
	t.started, t.status = true, status
	t.noBody = method == http.MethodHead || status == http.StatusNoContent || status == http.StatusNotModified
	if t.keep {
		t.req.ContentType = h.Get("Content-Type")
	}
	if t.out == nil {
		return
	}
	t.chunked = !t.noBody && h.Get("Content-Length") == ""
	b := t.buf[:0]
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	b = appendHeader(b, h, func(k string) bool { return k == "Transfer-Encoding" || k == "Connection" })
	if t.chunked {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	b = append(b, "\r\n"...)
	t.out.Data(formats.ServerToClient, b)
	t.buf = b[:0]
}

// body notes body bytes going out through net/http (one chunk).
func (t *tap) body(p []byte) {
	if len(p) == 0 || t.noBody {
		return
	}
	if t.keep && len(t.req.Response)+len(p) <= maxLoggedBody {
		t.req.Response = append(t.req.Response, p...)
	}
	if t.out == nil {
		return
	}
	if !t.chunked {
		t.out.Data(formats.ServerToClient, p)
		return
	}
	b := strconv.AppendInt(t.buf[:0], int64(len(p)), 16)
	b = append(b, "\r\n"...)
	t.out.Data(formats.ServerToClient, b)
	t.out.Data(formats.ServerToClient, p)
	t.out.Data(formats.ServerToClient, []byte("\r\n"))
	t.buf = b[:0]
}

// TakenOver notes that the stream took its connection over (status is
// its head's): its bytes go to the Out as they are written (stream.Tap).
func (t *tap) TakenOver(status int) {
	t.started, t.raw, t.status = true, true, status
}

// Records reports whether the tap wants the bytes of a taken-over
// connection (an Out records the run).
func (t *tap) Records() bool { return t.out != nil }

// RawWrite notes bytes written on a taken-over connection.
func (t *tap) RawWrite(bufs [][]byte) {
	if t.out == nil {
		return
	}
	for _, b := range bufs {
		t.out.Data(formats.ServerToClient, b)
	}
}

// finish ends the request: clean says whether the answer ended as it
// should (not cut off by the client leaving, an abort or Close).
func (t *tap) finish(a *stream.Answer, st *stream.Stream, clean bool) {
	t.req.Done = t.log.clock.Now()
	t.req.Status = t.status
	if !t.started {
		t.req.Status = a.Status
	}
	t.req.How = a.How
	if a.Recorded {
		t.req.Exchange = a.Exchange
	}
	t.req.Transcoded = a.Transcoded
	if tc := st.Transcoded(); tc != "" && t.req.Transcoded == "" {
		t.req.Transcoded = tc
	}
	if t.out != nil {
		if clean && t.chunked && !t.raw {
			t.out.Data(formats.ServerToClient, []byte("0\r\n\r\n"))
		}
		t.out.Close(formats.ConnClosed)
	}
	t.log.add(t.req)
}

// tapWriter is the ResponseWriter a handler writes through: what goes out
// through net/http is noted by the tap. http.ResponseController reaches
// the writer under it (Flush, Hijack, deadlines) through Unwrap.
type tapWriter struct {
	http.ResponseWriter
	t      *tap
	method string
}

func (w *tapWriter) WriteHeader(code int) {
	if code >= 200 {
		w.t.head(code, w.ResponseWriter.Header(), w.method)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *tapWriter) Write(p []byte) (int, error) {
	if !w.t.started {
		w.t.head(http.StatusOK, w.ResponseWriter.Header(), w.method)
	}
	n, err := w.ResponseWriter.Write(p)
	w.t.log.met.SentBytes(n)
	w.t.body(p[:n])
	return n, err
}

func (w *tapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
