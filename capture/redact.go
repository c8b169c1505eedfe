package capture

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/formats"
)

const (
	// maxHeldEncoded bounds the compressed bytes of one body held while
	// its content is checked. A gzip'd body is stored as sent while
	// redaction changes nothing in it; as soon as a byte must change, it
	// is stored re-encoded from its start instead, which needs its
	// compressed bytes. Past this many, the bytes whose content has been
	// checked are stored as sent and released; should a byte after them
	// then need to change, the rest of the body is replaced (fail closed)
	// rather than re-encoded. A Secret list names its kind in its first
	// bytes, so only a body whose first credential comes this late (a
	// large mixed List) is cut that way.
	maxHeldEncoded = 4 << 20
	// decodeAhead bounds the content the compressed bytes a decoder has
	// consumed may encode beyond what it has handed out: flate's 32 KiB
	// window not yet flushed, a 258-byte match, and the 16 bytes its
	// bufio.Reader reads ahead (see newPushDecoder), which expand to at
	// most 16 × 1032 bytes (a 258-byte match in two bits). That is 49,538
	// bytes; compressed bytes are released only once the content they
	// may encode, this margin included, was checked.
	decodeAhead = 64 << 10
	// ckptEvery spaces the checkpoints (compressed bytes consumed, content
	// decoded) kept for releasing.
	ckptEvery = 16 << 10
)

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
	held     blocks           // compressed bytes, while stored as sent
	chunks   []formats.Record // chunk records held with them
	reenc    bool             // storing a re-encoded body
	zw       io.WriteCloser
	zbuf     bytes.Buffer
	broken   bool // cannot be decoded: the rest is replaced
	brokenAt string
	t        int64
	written  int64 // body bytes seen

	// Releasing a large body as sent: heldOff is the compressed offset of
	// held[0], decoded counts the content decoded, checked the content the
	// check pass has released unchanged, ckpts the (consumed, decoded)
	// pairs to release by.
	releasing bool
	heldOff   int64
	decoded   int64
	checked   int64
	ckpts     []ckpt
}

type ckpt struct{ consumed, decoded int64 }

func (x *exchange) newRedactStream(dir formats.Direction, rep *redact.Report, ct, enc string, assume, midstream bool) *redactStream {
	if strings.EqualFold(strings.TrimSpace(enc), "identity") {
		enc = ""
	}
	// An exchange whose request addresses Secrets (x.secret): its bodies,
	// the response's too, are judged whatever their Content-Type says (a
	// JSON or YAML Secret served as text, or untyped).
	r := &redactStream{x: x, dir: dir, rep: rep, enc: enc,
		opt: redact.BodyOptions{ContentType: ct, AssumeSecret: assume, SecretPath: x.secret, Midstream: midstream}}
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
	if r.held.n > 0 {
		r.filler(r.held.n)
		r.held.reset()
	}
	r.chunks = nil
}

// filler stores n replaced bytes.
func (r *redactStream) filler(n int) {
	b := make([]byte, min(n, 64<<10))
	for i := range b {
		b[i] = "-redacted"[i%9]
	}
	r.rep.Add(formats.RedactUnparsed, "", r.brokenAt, 0, int64(n))
	for n > 0 {
		k := min(n, len(b))
		r.emit(b[:k])
		n -= k
	}
}

// blocks holds bytes in blocks of 64 KiB: growing never copies, and
// memory stays within a block of the bytes held.
type blocks struct {
	bs [][]byte
	n  int
}

func (b *blocks) write(p []byte) {
	b.n += len(p)
	for len(p) > 0 {
		if len(b.bs) == 0 || len(b.bs[len(b.bs)-1]) == cap(b.bs[len(b.bs)-1]) {
			b.bs = append(b.bs, make([]byte, 0, 64<<10))
		}
		last := &b.bs[len(b.bs)-1]
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
}

// emit calls fn with the first n bytes and forgets them.
func (b *blocks) emit(n int, fn func([]byte)) {
	b.n -= n
	for n > 0 {
		k := min(n, len(b.bs[0]))
		fn(b.bs[0][:k])
		n -= k
		if k == len(b.bs[0]) {
			b.bs[0] = nil
			b.bs = b.bs[1:]
		} else {
			b.bs[0] = b.bs[0][k:]
		}
	}
}

func (b *blocks) reset() { b.bs, b.n = nil, 0 }

// write takes body bytes as they came off the wire (transfer decoded).
func (r *redactStream) write(p []byte, t int64) {
	r.t = t
	r.written += int64(len(p))
	switch {
	case r.broken:
		r.filler(len(p))
	case r.body != nil && !r.reenc:
		r.body.Write(p, r.emit)
	case r.reenc:
		r.decode(p)
	default:
		r.held.write(p)
		if err := r.dec.write(p, func(q []byte) { r.decoded += int64(len(q)); r.check.Write(q, r.count) }); err != nil {
			r.fail(fmt.Sprintf("content decoding failed: %v", err))
			return
		}
		consumed := r.written
		if n := len(r.ckpts); n == 0 || consumed-r.ckpts[n-1].consumed >= ckptEvery {
			r.ckpts = append(r.ckpts, ckpt{consumed, r.decoded})
		}
		switch {
		case r.check.Changed() && r.heldOff > 0:
			r.fail(fmt.Sprintf("a credential after the first %d compressed bytes, already stored as sent", r.heldOff))
		case r.check.Changed():
			r.startReencode()
		case r.held.n > maxHeldEncoded || r.releasing:
			r.releasing = true
			r.release()
		}
	}
}

func discard([]byte) {}

// count notes content the check pass released unchanged.
func (r *redactStream) count(q []byte) { r.checked += int64(len(q)) }

// release stores the compressed bytes whose whole content has been
// checked unchanged (see decodeAhead), and the chunk records held so far.
func (r *redactStream) release() {
	k := -1
	for i, c := range r.ckpts {
		if r.checked >= c.decoded+decodeAhead {
			k = i
		}
	}
	if k < 0 {
		return
	}
	upto := r.ckpts[k].consumed
	r.ckpts = r.ckpts[k+1:]
	if n := int(upto - r.heldOff); n > 0 {
		r.held.emit(n, r.emit)
		r.heldOff = upto
	}
	for _, c := range r.chunks {
		r.x.s.emit(c)
	}
	r.chunks = nil
}

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
	r.held.reset()
	for _, b := range h.bs {
		if !r.broken {
			r.decode(b)
		}
	}
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

// holdsChunks reports whether the stream takes the chunk records of this
// (response) body (chunk); false means write them now.
func (r *redactStream) holdsChunks() bool {
	return r.enc != "" && !r.opt.Midstream && !r.releasing
}

// chunk takes a chunk record of this (response) body, when holdsChunks: it
// keeps it (held) or drops it.
func (r *redactStream) chunk(c formats.Record) {
	if !r.reenc && !r.broken && len(r.chunks) < 1<<16 {
		r.chunks = append(r.chunks, c)
	}
}

// gap: n body bytes were lost.
func (r *redactStream) gap(n int64, t int64) {
	r.t = t
	switch {
	case r.broken:
	case r.body != nil && !r.reenc:
		r.body.Gap(n, r.emit)
	default:
		if !r.reenc && r.heldOff == 0 {
			r.startReencode()
		}
		if r.reenc {
			r.body.Close(false, r.encode)
			r.finishEncoder()
		}
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
		if r.check.Changed() && r.heldOff > 0 {
			r.fail(fmt.Sprintf("a credential after the first %d compressed bytes, already stored as sent", r.heldOff))
			return false
		}
		if !r.check.Changed() {
			r.rep.Merge(&r.checkRep)
			r.held.emit(r.held.n, r.emit)
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
