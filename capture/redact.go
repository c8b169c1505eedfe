package capture

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/redact"
)

// maxHeldEncoded bounds the compressed bytes of one body held while its
// content is checked: a gzip'd body is stored as sent if redaction
// changes nothing in it, which is known only at its end. Past this, or as
// soon as a byte must change, the body is stored re-encoded instead (its
// content redacted, its compressed bytes no longer the wire's).
const maxHeldEncoded = 8 << 20

// redactStream redacts one opaque body (a request body, or a response
// body that is not split into events) by content as it arrives, and
// writes it as Body records. A content-encoded body is decoded to be
// read; it is stored as sent while nothing in it must change (the
// compressed bytes and chunk records are held, up to maxHeldEncoded), and
// re-encoded with the same coding from the moment something must (its
// chunk records are dropped then: they describe the wire's bytes).
type redactStream struct {
	x   *exchange
	dir formats.Direction
	rep *redact.Report
	opt redact.BodyOptions
	enc string // content coding ("" none)

	body *redact.Body // identity bodies, and the re-encoding pass

	// Content-encoded bodies.
	check    *redact.Body // first pass: does anything change? (output discarded)
	checkRep redact.Report
	dec      *pushDecoder
	held     []byte           // compressed bytes, while stored as sent
	chunks   []formats.Record // chunk records held with them
	reenc    bool             // storing a re-encoded body
	zw       io.WriteCloser
	zbuf     bytes.Buffer
	broken   bool // cannot be decoded: the rest is replaced
	brokenAt string
	t        int64
	written  int64 // body bytes seen
}

func (x *exchange) newRedactStream(dir formats.Direction, rep *redact.Report, ct, enc string, assume, midstream bool) *redactStream {
	if strings.EqualFold(strings.TrimSpace(enc), "identity") {
		enc = ""
	}
	r := &redactStream{x: x, dir: dir, rep: rep, enc: enc,
		opt: redact.BodyOptions{ContentType: ct, AssumeSecret: assume, Midstream: midstream}}
	switch {
	case enc == "" || midstream:
		r.body = x.s.secrets.NewBody(r.opt, rep)
	case !supportedEncoding(enc):
		r.fail(fmt.Sprintf("Content-Encoding %q cannot be decoded, so the body cannot be checked for credentials", enc))
	default:
		r.check = x.s.secrets.NewBody(r.opt, &r.checkRep)
		r.dec = newPushDecoder(enc)
	}
	return r
}

func (r *redactStream) emit(p []byte) { r.x.emitBody(r.dir, p, r.t) }

// fail makes the stream replace every byte from here on (and anything
// held).
func (r *redactStream) fail(why string) {
	if r.broken {
		return
	}
	r.broken = true
	r.brokenAt = why
	r.rep.Add(formats.RedactUnparsed, "", why, 1, 0)
	if r.zw != nil {
		r.finishEncoder()
	}
	if len(r.held) > 0 {
		r.filler(r.held)
		r.held = nil
	}
	r.chunks = nil
}

func (r *redactStream) filler(p []byte) {
	b := make([]byte, min(len(p), 64<<10))
	for i := range b {
		b[i] = "-redacted"[i%9]
	}
	r.rep.Add(formats.RedactUnparsed, "", r.brokenAt, 0, int64(len(p)))
	for len(p) > 0 {
		n := min(len(p), len(b))
		r.emit(b[:n])
		p = p[n:]
	}
}

// write takes body bytes as they came off the wire (transfer decoded).
func (r *redactStream) write(p []byte, t int64) {
	r.t = t
	r.written += int64(len(p))
	switch {
	case r.broken:
		r.filler(p)
	case r.body != nil && !r.reenc:
		r.body.Write(p, r.emit)
	case r.reenc:
		r.decode(p)
	default:
		r.held = append(r.held, p...)
		if err := r.dec.write(p, func(q []byte) { r.check.Write(q, discard) }); err != nil {
			r.fail(fmt.Sprintf("content decoding failed: %v", err))
			return
		}
		if r.check.Changed() || len(r.held) > maxHeldEncoded {
			r.startReencode()
		}
	}
}

func discard([]byte) {}

// startReencode switches to storing the body re-encoded: the held bytes
// are decoded again, redacted into rep, and encoded.
func (r *redactStream) startReencode() {
	r.reenc = true
	r.chunks = nil
	r.check = nil
	r.dec.abort()
	r.dec = newPushDecoder(r.enc)
	r.body = r.x.s.secrets.NewBody(r.opt, r.rep)
	if strings.EqualFold(strings.TrimSpace(r.enc), "deflate") {
		r.zw = zlib.NewWriter(&r.zbuf)
	} else {
		r.zw, _ = gzip.NewWriterLevel(&r.zbuf, gzip.BestSpeed)
	}
	h := r.held
	r.held = nil
	r.decode(h)
}

// decode feeds compressed bytes to the re-encoding pass.
func (r *redactStream) decode(p []byte) {
	if err := r.dec.write(p, func(q []byte) { r.body.Write(q, r.encode) }); err != nil {
		r.fail(fmt.Sprintf("content decoding failed: %v", err))
	}
}

// encode compresses redacted bytes and stores what the encoder produced.
func (r *redactStream) encode(q []byte) {
	r.zw.Write(q)
	if r.zbuf.Len() >= 32<<10 {
		r.emit(r.zbuf.Bytes())
		r.zbuf.Reset()
	}
}

func (r *redactStream) finishEncoder() {
	r.zw.Close()
	r.zw = nil
	if r.zbuf.Len() > 0 {
		r.emit(r.zbuf.Bytes())
		r.zbuf.Reset()
	}
}

// chunk takes a chunk record of this (response) body. It reports whether
// the stream keeps it (held, or dropped); false means write it now.
func (r *redactStream) chunk(c formats.Record) bool {
	if r.enc == "" || r.opt.Midstream {
		return false
	}
	if !r.reenc && !r.broken && len(r.chunks) < 1<<16 {
		r.chunks = append(r.chunks, c)
	}
	return true
}

// gap: n body bytes were lost.
func (r *redactStream) gap(n int64, t int64) {
	r.t = t
	switch {
	case r.broken:
	case r.body != nil && !r.reenc:
		r.body.Gap(n, r.emit)
	default:
		if !r.reenc {
			r.startReencode()
		}
		r.body.Close(false, r.encode)
		r.finishEncoder()
		r.fail(fmt.Sprintf("%d compressed bytes lost: the rest cannot be decoded", n))
	}
}

// close ends the body (complete: its framing said so) and reports whether
// it was stored re-encoded.
func (r *redactStream) close(complete bool, t int64) (reencoded bool) {
	r.t = t
	switch {
	case r.written == 0:
		for _, c := range r.chunks {
			r.x.s.emit(c)
		}
		r.chunks = nil
		return false
	case r.broken:
		return false
	case r.body != nil && !r.reenc:
		r.body.Close(complete, r.emit)
		return false
	case !r.reenc:
		err := r.dec.close(func(q []byte) { r.check.Write(q, discard) })
		if err != nil && complete {
			r.fail(fmt.Sprintf("content decoding failed at the end of the body: %v", err))
			return false
		}
		r.check.Close(complete && err == nil, discard)
		if !r.check.Changed() {
			r.rep.Merge(&r.checkRep)
			r.emit(r.held)
			r.held = nil
			for _, c := range r.chunks {
				r.x.s.emit(c)
			}
			r.chunks = nil
			return false
		}
		r.startReencode()
	}
	err := r.dec.close(func(q []byte) { r.body.Write(q, r.encode) })
	r.body.Close(complete && err == nil, r.encode)
	r.finishEncoder()
	return true
}
