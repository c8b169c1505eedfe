package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/wtrace/wtrace/frame"
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

func encodeBody(dst []byte, r Record, dt *int64) ([]byte, error) {
	e := enc{b: dst, dt: dt}
	switch r := r.(type) {
	case *Meta:
		if r == nil {
			break
		}
		if err := listErr("label", len(r.Labels)); err != nil {
			return dst, err
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
		return e.b, nil
	case *Conn:
		if r == nil {
			break
		}
		e.uvarint(r.ID)
		e.time(r.Time)
		e.str(r.Client)
		e.str(r.Server)
		e.str(r.Proto)
		e.bool(r.Midstream)
		return e.b, nil
	case *TLS:
		if r == nil {
			break
		}
		e.uvarint(r.Conn)
		e.time(r.Time)
		e.uvarint(uint64(r.Version))
		e.uvarint(uint64(r.Cipher))
		e.str(r.ALPN)
		e.str(r.SNI)
		e.bool(r.Decrypted)
		e.str(r.Note)
		return e.b, nil
	case *Request:
		if r == nil {
			break
		}
		if err := listErr("header", len(r.Header)); err != nil {
			return dst, err
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
		return e.b, nil
	case *Response:
		if r == nil {
			break
		}
		if err := listErr("header", len(r.Header)); err != nil {
			return dst, err
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
		return e.b, nil
	case *Frame:
		if r == nil {
			break
		}
		if err := listErr("redacted", len(r.Redacted)); err != nil {
			return dst, err
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
		return e.b, nil
	case *Body:
		if r == nil {
			break
		}
		e.varint(r.Exchange)
		e.u8(uint8(r.Dir))
		e.time(r.Time)
		e.varint(r.Offset)
		e.bytes(r.Data)
		return e.b, nil
	case *Chunk:
		if r == nil {
			break
		}
		e.varint(r.Exchange)
		e.time(r.Time)
		e.varint(r.Offset)
		e.varint(r.Size)
		e.str(r.Ext)
		return e.b, nil
	case *End:
		if r == nil {
			break
		}
		if err := listErr("trailer", len(r.Trailer)); err != nil {
			return dst, err
		}
		e.varint(r.Exchange)
		e.u8(uint8(r.Dir))
		e.time(r.Time)
		e.u8(uint8(r.Status))
		if err := listErr("redaction", len(r.Redactions)); err != nil {
			return dst, err
		}
		e.varint(r.Size)
		e.bytes(r.Tail)
		e.headers(r.Trailer)
		e.str(r.Note)
		// Since wtrace 0.2 (always written, so that fields added later
		// follow it; a record that ends before it is an older one's).
		e.uvarint(uint64(len(r.Redactions)))
		{
			for _, x := range r.Redactions {
				e.u8(uint8(x.Reason))
				e.str(x.Object)
				e.str(x.Fields)
				e.varint(x.Count)
				e.varint(x.Bytes)
			}
		}
		// Since wtrace 0.3 (always written; a record that ends before it
		// is an older one's).
		e.str(r.LastExt)
		return e.b, nil
	case *ConnEnd:
		if r == nil {
			break
		}
		e.uvarint(r.Conn)
		e.time(r.Time)
		e.u8(uint8(r.Reason))
		e.varint(r.ClientBytes)
		e.varint(r.ServerBytes)
		e.varint(r.LostBytes)
		return e.b, nil
	case *Anomaly:
		if r == nil {
			break
		}
		e.uvarint(r.Conn)
		e.varint(r.Exchange)
		e.u8(uint8(r.Dir))
		e.time(r.Time)
		e.u8(uint8(r.Kind))
		e.varint(r.Offset)
		e.varint(r.Bytes)
		e.str(r.Message)
		return e.b, nil
	case *Summary:
		if r == nil {
			break
		}
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
		return e.b, nil
	default:
		return dst, fmt.Errorf("formats: cannot encode record type %T", r)
	}
	return dst, fmt.Errorf("formats: cannot encode nil %T", r)
}

// dec reads a record body; with a time chain dt, times as differences.
// Errors are sticky: after the first, every method returns a zero value.
type dec struct {
	b   []byte
	i   int
	err error
	dt  *int64
}

// more reports whether bytes are left: a field appended by a later
// version is read only if present.
func (d *dec) more() bool { return d.err == nil && d.i < len(d.b) }

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s at body offset %d", errCorrupt, what, d.i)
	}
}

func (d *dec) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

func (d *dec) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.i:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

// int reads a varint into a Go int (which may be 32 bits wide).
func (d *dec) int(what string) int {
	v := d.varint(what)
	if int64(int(v)) != v {
		d.fail(what)
		return 0
	}
	return int(v)
}

func (d *dec) uint16(what string) uint16 {
	v := d.uvarint(what)
	if v > 0xffff {
		d.fail(what)
		return 0
	}
	return uint16(v)
}

// time reads a record's capture time: absolute, or a difference from the
// chain's.
func (d *dec) time(what string) int64 {
	if d.dt != nil {
		delta := d.varint(what)
		if d.err != nil {
			return 0
		}
		*d.dt += delta
		return *d.dt
	}
	return d.fixed(what)
}

// fixed reads an 8-byte time that is never a difference.
func (d *dec) fixed(what string) int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.i < 8 {
		d.fail(what)
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(d.b[d.i:]))
	d.i += 8
	return v
}

func (d *dec) u8(what string) uint8 {
	if d.err != nil {
		return 0
	}
	if d.i >= len(d.b) {
		d.fail(what)
		return 0
	}
	v := d.b[d.i]
	d.i++
	return v
}

func (d *dec) bool(what string) bool {
	v := d.u8(what)
	if v > 1 {
		d.i--
		d.fail(what)
		return false
	}
	return v == 1
}

// raw reads a length-prefixed byte string; the result aliases d.b (with
// its capacity cut, so appending to it cannot overwrite what follows).
func (d *dec) raw(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.i) {
		d.fail(what + " length")
		return nil
	}
	j := d.i + int(n)
	s := d.b[d.i:j:j]
	d.i = j
	return s
}

// bytes is raw with an empty value read as nil.
func (d *dec) bytes(what string) []byte {
	s := d.raw(what)
	if len(s) == 0 {
		return nil
	}
	return s
}

func (d *dec) str(what string) string { return string(d.raw(what)) }

// count reads a list length, checked against maxListLen and against the
// bytes left (each element takes at least minSize bytes) before the caller
// allocates the list.
func (d *dec) count(what string, minSize int) int {
	n := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if n > maxListLen || n > uint64((len(d.b)-d.i)/minSize) {
		d.fail(what + " count")
		return 0
	}
	return int(n)
}

func (d *dec) headers(what string) []Header {
	n := d.count(what, 4)
	if n == 0 {
		return nil
	}
	hs := make([]Header, n)
	for i := range hs {
		hs[i] = Header{
			Name:     d.str(what),
			Value:    d.str(what),
			Redacted: d.bool(what),
			Len:      d.int(what),
		}
	}
	return hs
}

// known reports whether t is a record type this version decodes.
func known(t Type) bool { return t >= TypeMeta && t <= TypeSummary }

// hasBytes reports whether records of type t hold byte slices, which
// decodeRecord must copy out of a buffer the caller does not own.
func hasBytes(t Type) bool { return t == TypeFrame || t == TypeBody || t == TypeEnd }

// decodeRecord decodes a record body of type t, its time in the chain dt
// (nil: absolute). Bytes after the fields this version knows are ignored
// (later versions append fields). Byte slices in the record alias b if
// owned, else a copy.
func decodeRecord(t Type, b []byte, owned bool, dt *int64) (Record, error) {
	if !owned && hasBytes(t) {
		b = bytes.Clone(b)
	}
	d := &dec{b: b, dt: dt}
	var r Record
	switch t {
	case TypeMeta:
		m := &Meta{
			Tool:          d.str("tool"),
			Recorded:      d.fixed("recorded"),
			Host:          d.str("host"),
			Source:        d.str("source"),
			Description:   d.str("description"),
			CaptureFile:   d.str("capture file"),
			CaptureSHA256: d.str("capture sha256"),
			Redaction:     d.str("redaction"),
		}
		if n := d.count("labels", 2); n > 0 {
			m.Labels = make(map[string]string, n)
			for range n {
				k := d.str("label")
				m.Labels[k] = d.str("label")
			}
		}
		r = m
	case TypeConn:
		r = &Conn{
			ID:        d.uvarint("id"),
			Time:      d.time("time"),
			Client:    d.str("client"),
			Server:    d.str("server"),
			Proto:     d.str("proto"),
			Midstream: d.bool("midstream"),
		}
	case TypeTLS:
		r = &TLS{
			Conn:      d.uvarint("conn"),
			Time:      d.time("time"),
			Version:   d.uint16("version"),
			Cipher:    d.uint16("cipher"),
			ALPN:      d.str("alpn"),
			SNI:       d.str("sni"),
			Decrypted: d.bool("decrypted"),
			Note:      d.str("note"),
		}
	case TypeRequest:
		q := &Request{
			Exchange: d.varint("exchange"),
			Conn:     d.uvarint("conn"),
		}
		if s := d.uvarint("stream"); s > 0xffffffff {
			d.fail("stream")
		} else {
			q.Stream = uint32(s)
		}
		q.Time = d.time("time")
		q.Method = d.str("method")
		q.Target = d.str("target")
		q.Proto = d.str("proto")
		q.Header = d.headers("header")
		q.Missing = d.bool("missing")
		r = q
	case TypeResponse:
		r = &Response{
			Exchange:  d.varint("exchange"),
			Time:      d.time("time"),
			Proto:     d.str("proto"),
			Status:    d.int("status"),
			Reason:    d.str("reason"),
			Header:    d.headers("header"),
			Framing:   BodyFraming(d.u8("framing")),
			Encoding:  d.str("encoding"),
			Events:    frame.Format(d.u8("events")),
			Midstream: d.bool("midstream"),
		}
	case TypeFrame:
		f := &Frame{
			Exchange: d.varint("exchange"),
			Seq:      d.varint("seq"),
			Time:     d.time("time"),
			Offset:   d.varint("offset"),
			Pre:      d.bytes("pre"),
			Data:     d.bytes("data"),
		}
		if n := d.count("redacted", 1); n > 0 {
			f.Redacted = make([]int, n)
			for i := range f.Redacted {
				f.Redacted[i] = d.int("redacted")
			}
		}
		r = f
	case TypeBody:
		r = &Body{
			Exchange: d.varint("exchange"),
			Dir:      Direction(d.u8("dir")),
			Time:     d.time("time"),
			Offset:   d.varint("offset"),
			Data:     d.bytes("data"),
		}
	case TypeChunk:
		r = &Chunk{
			Exchange: d.varint("exchange"),
			Time:     d.time("time"),
			Offset:   d.varint("offset"),
			Size:     d.varint("size"),
			Ext:      d.str("ext"),
		}
	case TypeEnd:
		x := &End{
			Exchange: d.varint("exchange"),
			Dir:      Direction(d.u8("dir")),
			Time:     d.time("time"),
			Status:   EndStatus(d.u8("status")),
			Size:     d.varint("size"),
			Tail:     d.bytes("tail"),
			Trailer:  d.headers("trailer"),
			Note:     d.str("note"),
		}
		if d.more() { // absent in files written before wtrace 0.2
			if n := d.count("redactions", 5); n > 0 {
				x.Redactions = make([]Redaction, n)
				for i := range x.Redactions {
					x.Redactions[i] = Redaction{
						Reason: RedactReason(d.u8("redaction reason")),
						Object: d.str("redaction object"),
						Fields: d.str("redaction fields"),
						Count:  d.varint("redaction count"),
						Bytes:  d.varint("redaction bytes"),
					}
				}
			}
		}
		if d.more() { // absent in files written before wtrace 0.3
			x.LastExt = d.str("last-chunk extensions")
		}
		r = x
	case TypeConnEnd:
		r = &ConnEnd{
			Conn:        d.uvarint("conn"),
			Time:        d.time("time"),
			Reason:      ConnEndReason(d.u8("reason")),
			ClientBytes: d.varint("client bytes"),
			ServerBytes: d.varint("server bytes"),
			LostBytes:   d.varint("lost bytes"),
		}
	case TypeAnomaly:
		r = &Anomaly{
			Conn:     d.uvarint("conn"),
			Exchange: d.varint("exchange"),
			Dir:      Direction(d.u8("dir")),
			Time:     d.time("time"),
			Kind:     AnomalyKind(d.u8("kind")),
			Offset:   d.varint("offset"),
			Bytes:    d.varint("bytes"),
			Message:  d.str("message"),
		}
	case TypeSummary:
		r = &Summary{
			Time:          d.time("time"),
			Packets:       d.varint("packets"),
			Bytes:         d.varint("bytes"),
			Conns:         d.varint("conns"),
			Exchanges:     d.varint("exchanges"),
			Events:        d.varint("events"),
			Anomalies:     d.varint("anomalies"),
			CaptureSHA256: d.str("capture sha256"),
			Note:          d.str("note"),
		}
		if d.more() { // absent in files written before wtrace 0.4
			r.(*Summary).CaptureXXH64 = d.str("capture xxh64")
		}
	default:
		return nil, fmt.Errorf("%w: unknown record type %d", errCorrupt, t)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s record: %w", t, d.err)
	}
	return r, nil
}

// recordExchange returns the exchange a record body of type t names, read
// without decoding the rest. ok is false for types that name no exchange.
func recordExchange(t Type, b []byte) (ex int64, ok bool) {
	d := &dec{b: b}
	switch t {
	case TypeRequest, TypeResponse, TypeFrame, TypeBody, TypeChunk, TypeEnd:
	case TypeAnomaly:
		d.uvarint("conn")
	default:
		return 0, false
	}
	ex = d.varint("exchange")
	return ex, d.err == nil
}

// chainTime reads the time of a record body of type t in the chain dt
// without decoding the rest, for a record skipped (by a filter) whose
// time the records after it need. Types without a capture time (Meta, and
// types this version does not know) leave the chain as it is.
func chainTime(t Type, b []byte, dt *int64) error {
	d := &dec{b: b, dt: dt}
	switch t {
	case TypeConn, TypeTLS, TypeConnEnd:
		d.uvarint("conn")
	case TypeRequest:
		d.varint("exchange")
		d.uvarint("conn")
		d.uvarint("stream")
	case TypeResponse, TypeChunk:
		d.varint("exchange")
	case TypeFrame:
		d.varint("exchange")
		d.varint("seq")
	case TypeBody, TypeEnd:
		d.varint("exchange")
		d.u8("dir")
	case TypeAnomaly:
		d.uvarint("conn")
		d.varint("exchange")
		d.u8("dir")
	case TypeSummary:
	default:
		return nil
	}
	d.time("time")
	if d.err != nil {
		return fmt.Errorf("%s record: %w", t, d.err)
	}
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

// recordFilter selects records by exchange; nil selects every record.
type recordFilter map[int64]bool

// decodeRecords appends the records framed in payload to dst, skipping
// record types this version does not know and, with a filter, records of
// other exchanges. n counts every framed record, decoded or not. Byte
// slices in the records alias payload if alias, else they are copies.
// delta: the payload is a blockDelta's, its times differences.
func decodeRecords(payload []byte, dst []Record, filter recordFilter, alias, delta bool) (out []Record, n int, err error) {
	var (
		prev int64
		dt   *int64
	)
	if delta {
		dt = &prev
	}
	for i := 0; i < len(payload); n++ {
		at := i
		t := Type(payload[i])
		size, k := binary.Uvarint(payload[i+1:])
		if k <= 0 {
			return dst, n, fmt.Errorf("%w: bad length of record %d at payload offset %d", errCorrupt, n, at)
		}
		start := i + 1 + k
		if size > MaxRecordSize || size > uint64(len(payload)-start) {
			return dst, n, fmt.Errorf("%w: record %d at payload offset %d: length %d exceeds the %d bytes left", errCorrupt, n, at, size, len(payload)-start)
		}
		body := payload[start : start+int(size)]
		i = start + int(size)
		if !known(t) {
			continue
		}
		if filter != nil {
			if ex, ok := recordExchange(t, body); !ok || !filter[ex] {
				if dt != nil {
					if err := chainTime(t, body, dt); err != nil {
						return dst, n, fmt.Errorf("record %d at payload offset %d: %w", n, at, err)
					}
				}
				continue
			}
		}
		r, err := decodeRecord(t, body, alias, dt)
		if err != nil {
			return dst, n, fmt.Errorf("record %d at payload offset %d: %w", n, at, err)
		}
		dst = append(dst, r)
	}
	return dst, n, nil
}

// cloneHeaders copies a header list (nil for an empty one).
func cloneHeaders(h []Header) []Header {
	if len(h) == 0 {
		return nil
	}
	return slices.Clone(h)
}
