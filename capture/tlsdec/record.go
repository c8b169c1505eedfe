package tlsdec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// The record layer: framing each direction's bytes into records, header
// checks (a record damaged in place is resynchronized from), and failure.

// Record layer limits.
const (
	// MaxPlaintext bounds a record's plaintext, 2^14 bytes (RFC 8446 §5.1,
	// RFC 5246 §6.2.1); a decrypted TLS 1.3 record may add its one-byte
	// content type.
	MaxPlaintext = 1 << 14
	// MaxCiphertext13 bounds a TLS 1.3 record: 2^14 + 256 (RFC 8446 §5.2).
	MaxCiphertext13 = 1<<14 + 256
	// MaxCiphertext12 bounds a TLS 1.2 record: 2^14 + 2048 (RFC 5246
	// §6.2.3). It is also the bound while the version is not yet known.
	MaxCiphertext12 = 1<<14 + 2048
	// DefaultMaxPending is Options.MaxPending's default: enough for a
	// client's whole first flight, 0-RTT data included, which is what can
	// arrive before the server's hello when the caller feeds one direction
	// ahead of the other.
	DefaultMaxPending = 256 << 10
	// DefaultMaxKeyWait is Options.MaxKeyWait's default: what one
	// direction holds while the key log does not have its secrets yet.
	// Clients log their secrets while the handshake runs, so what arrives
	// before a reader of the key log sees them is the rest of the
	// handshake and the first requests and responses: far less than this.
	// Over every connection the caller bounds the total (capture: the
	// connections waiting at once, Options.MaxConns).
	DefaultMaxKeyWait = 1 << 20

	// maxAlerts bounds the alerts Info keeps; all are counted.
	maxAlerts = 16
	// maxNotes bounds the distinct notes kept.
	maxNotes = 8
)

// Content types (RFC 8446 §5.1).
const (
	typeCCS       = 20
	typeAlert     = 21
	typeHandshake = 22
	typeAppData   = 23
	typeHeartbeat = 24 // RFC 6520
)

// pendRec is a complete record held in half.pend.
type pendRec struct {
	hdr        [5]byte
	start, end int // body in half.pend
	no, off, t int64
}

// rec is a complete record being processed.
type rec struct {
	hdr [5]byte
	no  int64 // index in this direction
	off int64 // stream offset of the header
	t   int64
}

// recBuf holds a record body, or a whole record with its header.
type recBuf [5 + MaxCiphertext12]byte

// bufPool holds record-sized buffers: one is borrowed while a record is
// split across Feed calls or a direction resynchronises after a gap, and
// one for each decryption, so an idle Conn holds none.
var bufPool = sync.Pool{New: func() any { return new(recBuf) }}

// parse cuts p, the next bytes of h, into records and processes them.
func (c *Conn) parse(h *half, p []byte, t int64) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for !h.lost {
		if h.hdrN < 5 {
			if len(p) == 0 {
				break
			}
			if h.hdrN == 0 {
				h.recOff = h.off
			}
			n := copy(h.hdr[h.hdrN:], p)
			h.hdrN += n
			h.off += int64(n)
			p = p[n:]
			if h.hdrN < 5 {
				break
			}
			if err := c.checkHeader(h); err != nil {
				keep(err)
				break
			}
			if h.bad != "" {
				hdr := h.hdr
				keep(c.resyncInPlace(h, h.recNo, h.recOff, [][]byte{hdr[:], p}, t))
				return first
			}
		}
		var body []byte
		if h.bodyN == 0 && len(p) >= h.need {
			// The whole body is in p: no copy.
			body, p = p[:h.need], p[h.need:]
			h.off += int64(h.need)
		} else {
			if len(p) == 0 {
				break
			}
			if h.body == nil {
				h.body = bufPool.Get().(*recBuf)
			}
			n := copy(h.body[h.bodyN:h.need], p)
			h.bodyN += n
			h.off += int64(n)
			p = p[n:]
			if h.bodyN < h.need {
				break
			}
			body = h.body[:h.need]
		}
		r := rec{hdr: h.hdr, no: h.recNo, off: h.recOff, t: t}
		h.recNo++
		h.stats.Records++
		h.noteRecord(5 + h.need)
		h.hdrN, h.bodyN = 0, 0
		keep(c.onRecord(h, &r, body))
		if h.bad != "" {
			keep(c.resyncRecord(h, r, body, p, t))
			return first
		}
		if h.body != nil {
			bufPool.Put(h.body)
			h.body = nil
		}
	}
	if h.lost {
		// Count what was not parsed.
		h.off += int64(len(p))
	}
	return first
}

// checkHeader validates a complete record header (RFC 8446 §5.1, RFC 5246
// §6.2.1) before anything is buffered.
func (c *Conn) checkHeader(h *half) error {
	typ, ver := h.hdr[0], binary.BigEndian.Uint16(h.hdr[1:3])
	n := int(binary.BigEndian.Uint16(h.hdr[3:5]))
	if !h.started {
		// The first record must carry the hello (or, from a server, an
		// alert); anything else is not the start of a TLS stream.
		if (typ != typeHandshake && typ != typeAlert) || ver>>8 != 3 || ver&0xff > 4 || n == 0 {
			return c.lose(h, ErrNotTLS, fmt.Sprintf("% x", h.hdr[:]))
		}
		h.started = true
	}
	limit := MaxCiphertext12
	if c.version == versionTLS13 {
		limit = MaxCiphertext13
	}
	var bad string
	switch {
	case typ < typeCCS || typ > typeHeartbeat:
		bad = fmt.Sprintf("content type %d", typ)
	case ver>>8 != 3 || ver&0xff > 4:
		bad = fmt.Sprintf("record version %#04x", ver)
	case n > limit:
		bad = fmt.Sprintf("record length %d exceeds %d", n, limit)
	}
	if bad != "" {
		if c.damagedInPlace(h, bad) {
			return nil
		}
		return c.lose(h, ErrMalformed, bad)
	}
	h.need = n
	return nil
}

// damagedInPlace reports whether the record of h being parsed, which is
// wrong (why), is taken for one damaged in place, to resynchronize from
// (h.bad is set): h uses its application keys and records have
// authenticated under them (else the keys, not the record, may be what is
// wrong: h fails as before).
func (c *Conn) damagedInPlace(h *half, why string) bool {
	if k := c.resyncKeys(h); k == nil || k.seq == 0 {
		return false
	}
	h.bad = why
	return true
}

// lose ends parsing of h: record boundaries are unknown from here on.
func (c *Conn) lose(h *half, sentinel error, detail string) error {
	var err error = &Error{Dir: h.dir, Record: h.recNo, Offset: h.recOff, Err: fmt.Errorf("%w: %s", sentinel, detail)}
	if errors.Is(sentinel, ErrNotTLS) {
		c.note("%s does not start with a TLS record (not TLS, or the capture began mid-connection)", h.dir)
	} else {
		c.note("%s record %d at offset %d: %s; rest not parsed", h.dir, h.recNo, h.recOff, detail)
	}
	h.lost = true
	h.hdrN = 0
	if h.err == nil {
		h.err = err
	} else {
		err = nil // this direction already reported its error
	}
	c.releaseBufs(h)
	if p := c.pump(); p != nil {
		return errors.Join(err, p)
	}
	return err
}

// fail ends decryption of h after an error at record r; later records are
// counted as undecryptable. It returns the error, or nil if h already
// reported one (a held record may fail after its direction was lost).
func (c *Conn) fail(h *half, r *rec, sentinel error, detail string) error {
	err := &Error{Dir: h.dir, Record: r.no, Offset: r.off, Err: fmt.Errorf("%w: %s", sentinel, detail)}
	c.note("%s record %d at offset %d: %s; later records not decrypted", h.dir, r.no, r.off,
		strings.TrimPrefix(err.Err.Error(), "tlsdec: "))
	h.failed = true
	if h.err != nil {
		return nil // this direction already reported its error
	}
	h.err = err
	return err
}

func (c *Conn) releaseBufs(h *half) {
	if h.body != nil {
		bufPool.Put(h.body)
		h.body = nil
	}
	h.bodyN = 0
	h.hs.buf = nil
}
