package fromtape

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
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
		case !stream.ValidField(f.Name, f.Value):
			continue // a damaged or hostile session: never split a response
		case f.Redacted, hopByHop[k], named[k],
			strings.HasPrefix(k, "Proxy-"),
			k == "Content-Encoding" && !keepEncoding:
			continue
		}
		h[k] = append(h[k], f.Value)
	}
	return h
}

// responseStatus is the status code to send for a recorded one: a head
// that was not captured (0), and codes net/http cannot send as a final
// response, become 200.
func responseStatus(code int) int {
	if code < 200 || code > 999 {
		return http.StatusOK
	}
	return code
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

// tapeFeed plays a recorded exchange's writes as they are.
type tapeFeed struct{ rd *writeReader }

func (f *tapeFeed) Peek() (int64, bool) {
	w, ok := f.rd.next()
	if ok {
		f.rd.unread(w)
	}
	return w.At, ok
}

func (f *tapeFeed) Take() (stream.Write, bool) {
	w, _ := f.rd.next()
	return recordedWrite(&w), true
}

func (f *tapeFeed) Changed() <-chan struct{} { return nil }
func (f *tapeFeed) Idle()                    {}
func (f *tapeFeed) WakeAt() time.Time        { return time.Time{} }
func (f *tapeFeed) InMemory() bool           { return f.rd.nonBlocking() }

// recordedWrite is recorded write w as a stream sends it.
func recordedWrite(w *tape.Write) stream.Write {
	n := int(w.Events)
	if w.Event {
		n = 1
	}
	return stream.Write{Data: w.Data, Ext: w.Ext, Events: n, At: w.At}
}

// endOf says how a recorded response ended, for a replay.
func endOf(x *tape.Exchange) stream.End {
	switch x.EndStatus() {
	case formats.EndClosed, formats.EndError:
		return stream.EndAbort
	case formats.EndReset:
		return stream.EndReset
	case formats.EndTruncated:
		if x.Format != 0 {
			return stream.EndHold // the watch was still open when the capture ended
		}
		return stream.EndAbort
	}
	return stream.EndClean
}

// serveExchange sends recorded exchange x, whole or (resume) from body
// offset skip with the timeline starting at capture time base.
func (a *Answerer) serveExchange(st *stream.Stream, r *http.Request, x *tape.Exchange, fl *flow, skip, base int64) {
	status := responseStatus(x.Info.Response.Status)
	if x.Format == 0 {
		a.serveOpaque(st, r, x, status)
		return
	}
	hd := a.rec.headOf(x, status)
	if fl != nil {
		hd = a.watchHead(x, fl)
	}
	if x.EndStatus() == formats.EndComplete {
		st.SetRecordedEnd(x.Info.End) // its last-chunk extensions and trailers, if it ends as recorded
	}
	if !st.Begin(hd) {
		return
	}
	if base == 0 {
		base = x.RespTime()
	}
	a.continueWatch(st, x, fl, skip, base)
}

// serveOpaque sends a non-event body: as recorded (byte for byte, with its
// Content-Encoding) when the client accepts that encoding, else decoded.
func (a *Answerer) serveOpaque(st *stream.Stream, r *http.Request, x *tape.Exchange, status int) {
	resp := x.Info.Response
	gz := strings.EqualFold(resp.Encoding, "gzip")
	decode := gz && !acceptsGzip(r.Header.Get("Accept-Encoding"))
	known := resp.Encoding == "" || gz
	h := st.Header()
	for k, v := range responseHeader(resp.Header, !decode || !known) {
		h[k] = v
	}
	complete := x.EndStatus() == formats.EndComplete
	if complete && !decode && resp.Framing == formats.FramingLength {
		h.Set("Content-Length", strconv.FormatInt(x.Info.BodyBytes, 10))
	}
	if status == http.StatusNoContent || status == http.StatusNotModified || r.Method == http.MethodHead {
		st.WriteHeader(status)
		return
	}
	src, err := a.rec.openSource(x)
	if err != nil {
		h.Del("Content-Length")
		st.Status(http.StatusInternalServerError, "InternalError", "replay: reading session: "+err.Error())
		return
	}
	st.WriteHeader(status)
	if complete {
		st.SetRecordedEnd(x.Info.End) // its trailers (net/http frames the body)
	}
	base := x.RespTime()
	if decode && known {
		zr, err := gzip.NewReader(&sourceReader{src: src, st: st})
		if err != nil {
			st.Stop("gzip: " + err.Error())
			return
		}
		if !st.WaitUntil(st.Deadline(x.EndTime(), base)) {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := zr.Read(buf)
			if n > 0 && !st.Send(buf[:n]) {
				return
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				st.Stop("gzip: " + err.Error())
				st.Abort(false)
				return
			}
		}
	} else if !st.Play(&tapeFeed{rd: a.reader(st, src, 0)}, base) {
		return
	}
	if st.Crossed() {
		return // cut by done, at once: the body is not what was recorded
	}
	k := endOf(x)
	if k == stream.EndHold {
		k = stream.EndAbort
	}
	if k == stream.EndClean {
		return // the body is complete; no need to wait for the recorded end
	}
	st.Finish(k, x.EndTime(), base) // held open instead with Options.Hold
}

// sourceReader reads a source's bytes as a stream (to decode gzip). Bytes
// lost to damage are an error, unless it serves a stream (st), which
// crosses them.
type sourceReader struct {
	src tape.Source
	st  *stream.Stream
	buf []byte
}

func (r *sourceReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		w, ok, err := r.src.Next()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, io.EOF
		}
		if w.Lost != nil {
			if r.st == nil {
				return 0, fmt.Errorf("replay: %v", w.Lost)
			}
			r.st.Cross(w.Lost)
		}
		r.buf = w.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// writeReader reads a stream's writes from body offset skip on, for run
// and runFlow: lost data at or after skip is reported on the stream
// (st.cross) and passed over, writes before skip are dropped, and a write
// that straddles skip is cut there (its resourceVersion marks cleared:
// the events they name may lie before the cut). One write can be pushed
// back (unread) to be read again.
type writeReader struct {
	st   *stream.Stream
	log  *slog.Logger
	src  tape.Source
	skip int64
	held tape.Write
	have bool
}

func (a *Answerer) reader(st *stream.Stream, src tape.Source, skip int64) *writeReader {
	return &writeReader{st: st, log: a.log, src: src, skip: skip}
}

// next returns the next write with data; false at the end of the source
// or when reading it failed (the stream's Stopped says why).
func (r *writeReader) next() (tape.Write, bool) {
	if r.have {
		r.have = false
		return r.held, true
	}
	st, skip := r.st, r.skip
	for {
		w, ok, err := r.src.Next()
		if err != nil {
			st.Stop("reading session: " + err.Error())
			r.log.Warn("replay: reading session", "err", err)
			return w, false
		}
		if !ok {
			return w, false
		}
		if w.Lost != nil {
			if w.Off >= skip {
				st.Cross(w.Lost)
			}
			continue
		}
		if skip > w.Off {
			n := skip - w.Off
			if n >= int64(len(w.Data)) {
				continue
			}
			w.Data, w.Off, w.RV, w.RV0, w.EvOff = w.Data[n:], skip, 0, 0, 0
		}
		if len(w.Data) > 0 {
			return w, true
		}
	}
}

// nonBlocking reports whether next returns without reading the file.
func (r *writeReader) nonBlocking() bool {
	if r.have {
		return true
	}
	_, ok := r.src.(*tape.PlanSource)
	return ok
}

// unread makes w the next write next returns.
func (r *writeReader) unread(w tape.Write) { r.held, r.have = w, true }
