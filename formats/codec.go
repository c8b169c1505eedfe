package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sort"
)

// Record bodies: each field in a fixed order per type, as FORMAT.md lists
// them. Integers of unsigned Go types are uvarints, of signed types zig-zag
// varints (encoding/binary), times are 8-byte little-endian, strings and
// byte slices a uvarint length then the bytes, bools and small enums one
// byte. In the data blocks of version 3 (blockDelta) a record's time is
// instead the varint of its difference from the time of the timed record
// before it in the block (FORMAT.md §5.1): a time chain (*int64, the time
// before) threads through the records of a block; nil means absolute
// times (earlier versions' blocks, and record bodies in the index).

// maxListLen bounds the element count of a list inside a record (headers,
// trailers, labels, redacted lengths), checked before the list is
// allocated. Go's net/http accepts 1 MiB of request headers
// (http.DefaultMaxHeaderBytes), which holds far fewer fields; a Secret is at
// most 1 MiB (etcd's request limit is 1.5 MiB), so it cannot hold more
// redacted values either.
const maxListLen = 1 << 20

// enc appends a record body to b; with a time chain dt, times as
// differences.
type enc struct {
	b  []byte
	dt *int64
}

func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }

// time appends a record's capture time: absolute, or the difference from
// the chain's (wrapping, so that any two times round-trip).
func (e *enc) time(v int64) {
	if e.dt == nil {
		e.fixed(v)
		return
	}
	e.varint(v - *e.dt)
	*e.dt = v
}

// fixed appends an 8-byte time that is never a difference (Meta's
// wall-clock Recorded).
func (e *enc) fixed(v int64)  { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) u8(v uint8)     { e.b = append(e.b, v) }
func (e *enc) bytes(v []byte) { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }

func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *enc) headers(hs []Header) {
	e.uvarint(uint64(len(hs)))
	for _, h := range hs {
		e.str(h.Name)
		e.str(h.Value)
		e.bool(h.Redacted)
		e.varint(int64(h.Len))
	}
}

// listErr checks a list's length before it is written, so that what is
// written can be read back.
func listErr(what string, n int) error {
	if n > maxListLen {
		return fmt.Errorf("formats: %s list of %d elements exceeds the limit of %d", what, n, maxListLen)
	}
	return nil
}

// appendBody appends the body of r (without type and length) to dst, its
// time absolute.
func appendBody(dst []byte, r Record) ([]byte, error) { return appendBodyChain(dst, r, nil) }

// appendBodyChain appends the body of r to dst, its time in the chain dt
// (nil: absolute). On an error, dst and *dt are as they were.
func appendBodyChain(dst []byte, r Record, dt *int64) ([]byte, error) {
	var saved int64
	if dt != nil {
		saved = *dt
	}
	b, err := encodeBody(dst, r, dt)
	if err != nil && dt != nil {
		*dt = saved
	}
	return b, err
}

// encodeBody appends the body of record r, its time in the chain dt
// (nil: absolute).
func encodeBody(dst []byte, r Record, dt *int64) ([]byte, error) {
	e := enc{b: dst, dt: dt}
	var err error
	switch r := r.(type) {
	case *Meta:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.meta(r)
	case *Conn:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.conn(r)
	case *TLS:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.tls(r)
	case *Request:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.request(r)
	case *Response:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.response(r)
	case *Frame:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.frame(r)
	case *Body:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.body(r)
	case *Chunk:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.chunk(r)
	case *End:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.end(r)
	case *ConnEnd:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.connEnd(r)
	case *Anomaly:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.anomaly(r)
	case *Summary:
		if r == nil {
			return dst, errNilRecord(r)
		}
		err = e.summary(r)
	default:
		return dst, fmt.Errorf("formats: cannot encode record type %T", r)
	}
	if err != nil {
		return dst, err
	}
	return e.b, nil
}

// errNilRecord is the error of encoding a nil record.
func errNilRecord(r Record) error { return fmt.Errorf("formats: cannot encode nil %T", r) }

// meta appends the fields of r.
func (e *enc) meta(r *Meta) error {
	if err := listErr("label", len(r.Labels)); err != nil {
		return err
	}
	e.str(r.Tool)
	e.fixed(r.Recorded)
	e.str(r.Host)
	e.str(r.Source)
	e.str(r.Description)
	e.str(r.CaptureFile)
	e.str(r.CaptureSHA256)
	e.str(r.Redaction)
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(r.Labels[k])
	}
	return nil
}

// conn appends the fields of r.
func (e *enc) conn(r *Conn) error {
	e.uvarint(r.ID)
	e.time(r.Time)
	e.str(r.Client)
	e.str(r.Server)
	e.str(r.Proto)
	e.bool(r.Midstream)
	return nil
}

// tls appends the fields of r.
func (e *enc) tls(r *TLS) error {
	e.uvarint(r.Conn)
	e.time(r.Time)
	e.uvarint(uint64(r.Version))
	e.uvarint(uint64(r.Cipher))
	e.str(r.ALPN)
	e.str(r.SNI)
	e.bool(r.Decrypted)
	e.str(r.Note)
	return nil
}

// request appends the fields of r.
func (e *enc) request(r *Request) error {
	if err := listErr("header", len(r.Header)); err != nil {
		return err
	}
	e.varint(r.Exchange)
	e.uvarint(r.Conn)
	e.uvarint(uint64(r.Stream))
	e.time(r.Time)
	e.str(r.Method)
	e.str(r.Target)
	e.str(r.Proto)
	e.headers(r.Header)
	e.bool(r.Missing)
	return nil
}

// response appends the fields of r.
func (e *enc) response(r *Response) error {
	if err := listErr("header", len(r.Header)); err != nil {
		return err
	}
	e.varint(r.Exchange)
	e.time(r.Time)
	e.str(r.Proto)
	e.varint(int64(r.Status))
	e.str(r.Reason)
	e.headers(r.Header)
	e.u8(uint8(r.Framing))
	e.str(r.Encoding)
	e.u8(uint8(r.Events))
	e.bool(r.Midstream)
	return nil
}

// frame appends the fields of r.
func (e *enc) frame(r *Frame) error {
	if err := listErr("redacted", len(r.Redacted)); err != nil {
		return err
	}
	e.varint(r.Exchange)
	e.varint(r.Seq)
	e.time(r.Time)
	e.varint(r.Offset)
	e.bytes(r.Pre)
	e.bytes(r.Data)
	e.uvarint(uint64(len(r.Redacted)))
	for _, n := range r.Redacted {
		e.varint(int64(n))
	}
	return nil
}

// body appends the fields of r.
func (e *enc) body(r *Body) error {
	e.varint(r.Exchange)
	e.u8(uint8(r.Dir))
	e.time(r.Time)
	e.varint(r.Offset)
	e.bytes(r.Data)
	return nil
}

// chunk appends the fields of r.
func (e *enc) chunk(r *Chunk) error {
	e.varint(r.Exchange)
	e.time(r.Time)
	e.varint(r.Offset)
	e.varint(r.Size)
	e.str(r.Ext)
	return nil
}

// end appends the fields of r.
func (e *enc) end(r *End) error {
	if err := listErr("trailer", len(r.Trailer)); err != nil {
		return err
	}
	e.varint(r.Exchange)
	e.u8(uint8(r.Dir))
	e.time(r.Time)
	e.u8(uint8(r.Status))
	if err := listErr("redaction", len(r.Redactions)); err != nil {
		return err
	}
	e.varint(r.Size)
	e.bytes(r.Tail)
	e.headers(r.Trailer)
	e.str(r.Note)
	// Since wtrace 0.2 (always written, so that fields added later
	// follow it; a record that ends before it is an older one's).
	e.uvarint(uint64(len(r.Redactions)))
	for _, x := range r.Redactions {
		e.u8(uint8(x.Reason))
		e.str(x.Object)
		e.str(x.Fields)
		e.varint(x.Count)
		e.varint(x.Bytes)
	}
	// Since wtrace 0.3 (always written; a record that ends before it
	// is an older one's).
	e.str(r.LastExt)
	return nil
}

// connEnd appends the fields of r.
func (e *enc) connEnd(r *ConnEnd) error {
	e.uvarint(r.Conn)
	e.time(r.Time)
	e.u8(uint8(r.Reason))
	e.varint(r.ClientBytes)
	e.varint(r.ServerBytes)
	e.varint(r.LostBytes)
	return nil
}

// anomaly appends the fields of r.
func (e *enc) anomaly(r *Anomaly) error {
	e.uvarint(r.Conn)
	e.varint(r.Exchange)
	e.u8(uint8(r.Dir))
	e.time(r.Time)
	e.u8(uint8(r.Kind))
	e.varint(r.Offset)
	e.varint(r.Bytes)
	e.str(r.Message)
	return nil
}

// summary appends the fields of r.
func (e *enc) summary(r *Summary) error {
	e.time(r.Time)
	e.varint(r.Packets)
	e.varint(r.Bytes)
	e.varint(r.Conns)
	e.varint(r.Exchanges)
	e.varint(r.Events)
	e.varint(r.Anomalies)
	e.str(r.CaptureSHA256)
	e.str(r.Note)
	e.str(r.CaptureXXH64)
	return nil
}

// recordTime returns a record's capture time; ok is false for records
// without one (Meta's Recorded is wall-clock time, not capture time).
func recordTime(r Record) (t int64, ok bool) {
	switch r := r.(type) {
	case *Conn:
		return r.Time, true
	case *TLS:
		return r.Time, true
	case *Request:
		return r.Time, true
	case *Response:
		return r.Time, true
	case *Frame:
		return r.Time, true
	case *Body:
		return r.Time, true
	case *Chunk:
		return r.Time, true
	case *End:
		return r.Time, true
	case *ConnEnd:
		return r.Time, true
	case *Anomaly:
		return r.Time, true
	case *Summary:
		return r.Time, true
	}
	return 0, false
}

// appendRecord appends r framed as a record (type, length, body) to dst,
// using scratch for the body, its time in the chain dt (nil: absolute); it
// returns dst and the scratch buffer. On an error, *dt is as it was.
func appendRecord(dst, scratch []byte, r Record, dt *int64) ([]byte, []byte, error) {
	if est := bodySizeHint(r); est > 0 {
		return appendRecordInPlace(dst, r, est, dt), scratch, nil
	}
	var saved int64
	if dt != nil {
		saved = *dt
	}
	body, err := appendBodyChain(scratch[:0], r, dt)
	if err != nil {
		return dst, body, err
	}
	if len(body) > MaxRecordSize {
		if dt != nil {
			*dt = saved
		}
		return dst, body, fmt.Errorf("formats: %s record of %d bytes exceeds MaxRecordSize (%d)", r.Type(), len(body), MaxRecordSize)
	}
	dst = append(dst, byte(r.Type()))
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...), body, nil
}

// bodySizeHint is about the size of r's body when r is a record whose
// bytes dominate a session (Frame, Body) and cannot fail to encode, else 0:
// appendRecord then encodes it in place instead of through scratch.
func bodySizeHint(r Record) int {
	const fields = 48 // the other fields, roughly
	switch r := r.(type) {
	case *Frame:
		if r == nil || len(r.Redacted) > 1<<10 {
			break
		}
		if n := len(r.Pre) + len(r.Data) + 10*len(r.Redacted); n <= MaxRecordSize-fields {
			return n + fields
		}
	}
	return 0
}

// appendRecordInPlace appends r framed as a record to dst, encoding its
// body in place after a length of the size est needs; if the body's length
// needs another size (est was off across a varint boundary), the body is
// moved once.
func appendRecordInPlace(dst []byte, r Record, est int, dt *int64) []byte {
	start := len(dst)
	k := uvarintLen(uint64(est))
	dst = append(dst, byte(r.Type()))
	dst = append(dst, make([]byte, k)...)
	at := len(dst)
	dst, _ = appendBodyChain(dst, r, dt) // bodySizeHint admits only records that encode
	n := len(dst) - at
	if kk := uvarintLen(uint64(n)); kk != k {
		body := bytes.Clone(dst[at:])
		dst = append(dst[:start+1], make([]byte, kk)...)
		dst = append(dst, body...)
		k = kk
	}
	binary.PutUvarint(dst[start+1:start+1+k], uint64(n))
	return dst
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }
