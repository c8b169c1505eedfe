package formats

// Reading record bodies (the layout in codec.go, FORMAT.md §5): a record
// of each type, a time chain through a block's records, and a block's
// records decoded, filtered by exchange.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/wtrace/wtrace/frame"
)

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
		r = d.meta()
	case TypeConn:
		r = d.conn()
	case TypeTLS:
		r = d.tls()
	case TypeRequest:
		r = d.request()
	case TypeResponse:
		r = d.response()
	case TypeFrame:
		r = d.frame()
	case TypeBody:
		r = d.body()
	case TypeChunk:
		r = d.chunk()
	case TypeEnd:
		r = d.end()
	case TypeConnEnd:
		r = d.connEnd()
	case TypeAnomaly:
		r = d.anomaly()
	case TypeSummary:
		r = d.summary()
	default:
		return nil, fmt.Errorf("%w: unknown record type %d", errCorrupt, t)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s record: %w", t, d.err)
	}
	return r, nil
}

// meta reads the fields of a Meta record.
func (d *dec) meta() *Meta {
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
	return m
}

// conn reads the fields of a Conn record.
func (d *dec) conn() *Conn {
	return &Conn{
		ID:        d.uvarint("id"),
		Time:      d.time("time"),
		Client:    d.str("client"),
		Server:    d.str("server"),
		Proto:     d.str("proto"),
		Midstream: d.bool("midstream"),
	}
}

// tls reads the fields of a TLS record.
func (d *dec) tls() *TLS {
	return &TLS{
		Conn:      d.uvarint("conn"),
		Time:      d.time("time"),
		Version:   d.uint16("version"),
		Cipher:    d.uint16("cipher"),
		ALPN:      d.str("alpn"),
		SNI:       d.str("sni"),
		Decrypted: d.bool("decrypted"),
		Note:      d.str("note"),
	}
}

// request reads the fields of a Request record.
func (d *dec) request() *Request {
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
	return q
}

// response reads the fields of a Response record.
func (d *dec) response() *Response {
	return &Response{
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
}

// frame reads the fields of a Frame record.
func (d *dec) frame() *Frame {
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
	return f
}

// body reads the fields of a Body record.
func (d *dec) body() *Body {
	return &Body{
		Exchange: d.varint("exchange"),
		Dir:      Direction(d.u8("dir")),
		Time:     d.time("time"),
		Offset:   d.varint("offset"),
		Data:     d.bytes("data"),
	}
}

// chunk reads the fields of a Chunk record.
func (d *dec) chunk() *Chunk {
	return &Chunk{
		Exchange: d.varint("exchange"),
		Time:     d.time("time"),
		Offset:   d.varint("offset"),
		Size:     d.varint("size"),
		Ext:      d.str("ext"),
	}
}

// end reads the fields of a End record.
func (d *dec) end() *End {
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
	return x
}

// connEnd reads the fields of a ConnEnd record.
func (d *dec) connEnd() *ConnEnd {
	return &ConnEnd{
		Conn:        d.uvarint("conn"),
		Time:        d.time("time"),
		Reason:      ConnEndReason(d.u8("reason")),
		ClientBytes: d.varint("client bytes"),
		ServerBytes: d.varint("server bytes"),
		LostBytes:   d.varint("lost bytes"),
	}
}

// anomaly reads the fields of a Anomaly record.
func (d *dec) anomaly() *Anomaly {
	return &Anomaly{
		Conn:     d.uvarint("conn"),
		Exchange: d.varint("exchange"),
		Dir:      Direction(d.u8("dir")),
		Time:     d.time("time"),
		Kind:     AnomalyKind(d.u8("kind")),
		Offset:   d.varint("offset"),
		Bytes:    d.varint("bytes"),
		Message:  d.str("message"),
	}
}

// summary reads the fields of a Summary record.
func (d *dec) summary() *Summary {
	x := &Summary{
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
		x.CaptureXXH64 = d.str("capture xxh64")
	}
	return x
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
