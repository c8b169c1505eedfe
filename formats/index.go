package formats

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/wtrace/wtrace/frame"
)

// Index is what a file's index (or a forward scan, for a file without one)
// says about the session. It is small compared with the file: O(blocks +
// connections + exchanges + anomalies).
type Index struct {
	Meta      *Meta    // the first Meta record; nil if it was lost
	Summary   *Summary // the last Summary record; nil if the file was not closed cleanly
	Blocks    []BlockInfo
	Conns     []ConnInfo     // by Conn.ID order
	Exchanges []ExchangeInfo // by exchange ID order
	Anomalies []Anomaly
}

// BlockInfo locates one data block.
type BlockInfo struct {
	Offset  int64 // file offset of the block header
	Size    int64 // bytes on disk, header included
	Records int
	First   int64 // smallest record Time in the block (0 if no timed records)
	Last    int64 // largest record Time in the block
}

// ConnInfo gathers what is known of one connection. A connection that
// records name but no Conn record announced has only Conn.ID set.
type ConnInfo struct {
	Conn      Conn
	TLS       *TLS     // nil if plaintext or unknown; the last TLS record
	End       *ConnEnd // nil if the file ended first
	Exchanges []int64  // exchange IDs on this connection, in the order their Requests were written
	Anomalies int      // Anomaly records naming this connection (including those of its exchanges)
}

// ExchangeInfo summarises one exchange. An exchange that records name but no
// Request record announced has Request.Exchange set and Request.Missing
// true (and Request.Conn from an Anomaly naming it, if any).
type ExchangeInfo struct {
	Request    Request   // Header included
	Response   *Response // nil if no response head was seen; the last Response record
	RequestEnd *End      // End with Dir ClientToServer; Tail is not kept in the index
	End        *End      // response end (Dir ServerToClient); nil if the file ended first; Tail is not kept
	Frames     int64     // watch events
	// FrameTypes counts events by type ("ADDED", …), read from each
	// Frame's Data: JSON's top-level "type", protobuf WatchEvent field 1.
	// Events whose type cannot be read count in Frames only. nil if none.
	FrameTypes map[string]int64
	// BodyBytes counts the response body bytes stored: Body records with
	// Dir ServerToClient, or Pre+Data of Frames, plus the response End's
	// Tail.
	BodyBytes   int64
	Chunks      int64
	First, Last int64 // smallest and largest Time of its records
	Blocks      []int // indexes into Index.Blocks holding any of its records, ascending
	Anomalies   int   // Anomaly records naming this exchange
}

// indexBuilder builds an Index from records as they are written or read.
// It copies what it keeps. Connections and exchanges are held in maps while
// records may still change them; a Writer's builder (spill set) moves each
// one out, encoded and compressed, once it is finished (see spill.go), so
// that its memory follows what is open rather than the session's history.
type indexBuilder struct {
	idx   Index // Meta, Summary, Blocks, Anomalies; Conns and Exchanges at finish
	conns map[uint64]*openConn
	exs   map[int64]*openEx
	spill *spill // nil: keep everything (readers)

	// Counts over the whole session, finished entries included.
	nConns, nExchanges, frames int64
	tick                       uint64 // records added, for openEx.used
}

// maxOpenExchanges bounds the exchanges a Writer's builder holds as
// values: past it, the least recently used half of them is spilled (and
// taken back if a record names them again), so that thousands of
// pipelined requests or open watches cost their encoded entries only.
// A variable for tests.
var maxOpenExchanges = 4096

type openConn struct {
	ConnInfo
	announced bool
}

type openEx struct {
	ExchangeInfo
	conn   uint64
	linked bool // listed in its connection's Exchanges
	format frame.Format
	used   uint64 // indexBuilder.tick when a record last named it
}

func newIndexBuilder() *indexBuilder {
	return &indexBuilder{conns: map[uint64]*openConn{}, exs: map[int64]*openEx{}}
}

func (b *indexBuilder) addBlock(bi BlockInfo) { b.idx.Blocks = append(b.idx.Blocks, bi) }

func (b *indexBuilder) conn(id uint64) *openConn {
	c := b.conns[id]
	if c == nil {
		c = b.spill.reopenConn(id)
		if c == nil {
			c = &openConn{ConnInfo: ConnInfo{Conn: Conn{ID: id}}}
			b.nConns++
		}
		b.conns[id] = c
	}
	return c
}

// exchange returns the exchange id, creating it if needed, and notes that
// a record of time t in block block belongs to it.
func (b *indexBuilder) exchange(id int64, block int, t int64) *openEx {
	x := b.exs[id]
	if x == nil {
		x = b.spill.reopenExchange(id)
		if x == nil {
			x = &openEx{ExchangeInfo: ExchangeInfo{
				Request: Request{Exchange: id, Missing: true},
				First:   t,
				Last:    t,
			}}
			b.nExchanges++
		}
		b.exs[id] = x
		if b.spill != nil && len(b.exs) > maxOpenExchanges {
			x.used = b.tick
			b.shed()
		}
	}
	x.used = b.tick
	if n := len(x.Blocks); n == 0 || x.Blocks[n-1] != block {
		x.Blocks = append(x.Blocks, block)
	}
	x.First = min(x.First, t)
	x.Last = max(x.Last, t)
	return x
}

// link lists exchange x on connection conn, once.
func (b *indexBuilder) link(x *openEx, conn uint64) {
	if x.linked {
		return
	}
	x.linked, x.conn = true, conn
	c := b.conn(conn)
	c.Exchanges = append(c.Exchanges, x.Request.Exchange)
}

// add notes record r, stored in the data block numbered block (an index
// into idx.Blocks once that block is added).
func (b *indexBuilder) add(r Record, block int) {
	b.tick++
	switch r := r.(type) {
	case *Meta:
		if b.idx.Meta == nil {
			b.idx.Meta = cloneMeta(r)
		}
	case *Summary:
		s := *r
		b.idx.Summary = &s
	case *Conn:
		c := b.conn(r.ID)
		if !c.announced {
			c.announced = true
			c.Conn = *r
		}
	case *TLS:
		c := b.conn(r.Conn)
		t := *r
		c.TLS = &t
	case *ConnEnd:
		c := b.conn(r.Conn)
		e := *r
		c.End = &e
		if b.spill != nil {
			b.finishConn(c)
		}
	case *Request:
		x := b.exchange(r.Exchange, block, r.Time)
		x.Request = *r
		x.Request.Header = cloneHeaders(r.Header)
		b.link(x, r.Conn)
	case *Response:
		x := b.exchange(r.Exchange, block, r.Time)
		resp := *r
		resp.Header = cloneHeaders(r.Header)
		x.Response = &resp
		x.format = r.Events
	case *Frame:
		x := b.exchange(r.Exchange, block, r.Time)
		x.Frames++
		b.frames++
		x.BodyBytes += int64(len(r.Pre) + len(r.Data))
		if typ, ok := frame.PeekType(x.format, r.Data); ok {
			if x.FrameTypes == nil {
				x.FrameTypes = map[string]int64{}
			}
			x.FrameTypes[internType(typ)]++
		}
	case *Body:
		x := b.exchange(r.Exchange, block, r.Time)
		if r.Dir == ServerToClient {
			x.BodyBytes += int64(len(r.Data))
		}
	case *Chunk:
		x := b.exchange(r.Exchange, block, r.Time)
		x.Chunks++
	case *End:
		x := b.exchange(r.Exchange, block, r.Time)
		e := *r
		e.Tail = nil
		e.Trailer = cloneHeaders(r.Trailer)
		if r.Dir == ServerToClient {
			x.End = &e
			x.BodyBytes += int64(len(r.Tail))
		} else {
			x.RequestEnd = &e
		}
		if b.spill != nil && x.End != nil && (x.RequestEnd != nil || x.Request.Missing) {
			b.spill.putExchange(x)
			delete(b.exs, x.Request.Exchange)
		}
	case *Anomaly:
		b.idx.Anomalies = append(b.idx.Anomalies, *r)
		c := b.conn(r.Conn)
		c.Anomalies++
		if r.Exchange != NoExchange {
			x := b.exchange(r.Exchange, block, r.Time)
			x.Anomalies++
			if !x.linked && x.Request.Missing {
				x.Request.Conn = r.Conn
				b.link(x, r.Conn)
			}
		}
	}
}

// shed spills the least recently used half of the open exchanges.
func (b *indexBuilder) shed() {
	xs := make([]*openEx, 0, len(b.exs))
	for _, x := range b.exs {
		xs = append(xs, x)
	}
	slices.SortFunc(xs, func(p, q *openEx) int { return cmp.Compare(p.used, q.used) })
	for _, x := range xs[:len(xs)/2] {
		b.spill.putExchange(x)
		delete(b.exs, x.Request.Exchange)
	}
}

// finishConn moves a connection that ended, and its exchanges still open,
// to the spill.
func (b *indexBuilder) finishConn(c *openConn) {
	for _, id := range c.Exchanges {
		if x := b.exs[id]; x != nil {
			b.spill.putExchange(x)
			delete(b.exs, id)
		}
	}
	b.spill.putConn(c)
	delete(b.conns, c.Conn.ID)
}

// finish returns the index, sorted. The builder must not be used after.
// A builder with a spill writes its index with writeIndex instead.
func (b *indexBuilder) finish() *Index {
	b.idx.Conns = make([]ConnInfo, 0, len(b.conns))
	for _, c := range b.conns {
		b.idx.Conns = append(b.idx.Conns, c.ConnInfo)
	}
	b.idx.Exchanges = make([]ExchangeInfo, 0, len(b.exs))
	for _, x := range b.exs {
		b.idx.Exchanges = append(b.idx.Exchanges, x.ExchangeInfo)
	}
	sort.Slice(b.idx.Conns, func(i, j int) bool { return b.idx.Conns[i].Conn.ID < b.idx.Conns[j].Conn.ID })
	sort.Slice(b.idx.Exchanges, func(i, j int) bool {
		return b.idx.Exchanges[i].Request.Exchange < b.idx.Exchanges[j].Request.Exchange
	})
	b.conns, b.exs = nil, nil
	return &b.idx
}

// internType returns typ as a string, without allocating for the five
// Kubernetes watch event types.
func internType(typ []byte) string {
	switch string(typ) {
	case "ADDED":
		return "ADDED"
	case "MODIFIED":
		return "MODIFIED"
	case "DELETED":
		return "DELETED"
	case "BOOKMARK":
		return "BOOKMARK"
	case "ERROR":
		return "ERROR"
	}
	return string(typ)
}

func cloneMeta(m *Meta) *Meta {
	c := *m
	if len(m.Labels) > 0 {
		c.Labels = maps.Clone(m.Labels)
	} else {
		c.Labels = nil
	}
	return &c
}

// Index entry types (FORMAT.md, "Index block"). Meta, Summary and Anomaly
// entries use their record type and body.
const (
	entryBlock    = 0x40
	entryConn     = 0x41
	entryExchange = 0x42
)

// appendEntry appends an index entry: type, uvarint length, body.
func appendEntry(dst []byte, typ byte, body []byte) []byte {
	dst = append(dst, typ)
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

// appendIndex appends the index payload for idx to dst.
func appendIndex(dst []byte, idx *Index) ([]byte, error) {
	dst, err := appendHead(dst, idx)
	var scratch []byte
	record := func(typ byte, r Record) {
		if err != nil {
			return
		}
		scratch, err = appendBody(scratch[:0], r)
		dst = appendEntry(dst, typ, scratch)
	}
	for i := range idx.Conns {
		if err == nil {
			dst, err = appendConnEntry(dst, &idx.Conns[i])
		}
	}
	for i := range idx.Exchanges {
		if err == nil {
			dst, err = appendExchangeEntry(dst, &idx.Exchanges[i])
		}
	}
	for i := range idx.Anomalies {
		record(byte(TypeAnomaly), &idx.Anomalies[i])
	}
	return dst, err
}

// appendHead appends the index entries that come before the connections:
// Meta, Summary, blocks.
func appendHead(dst []byte, idx *Index) ([]byte, error) {
	var scratch []byte
	var err error
	record := func(typ byte, r Record) {
		if err != nil {
			return
		}
		scratch, err = appendBody(scratch[:0], r)
		dst = appendEntry(dst, typ, scratch)
	}
	if idx.Meta != nil {
		record(byte(TypeMeta), idx.Meta)
	}
	if idx.Summary != nil {
		record(byte(TypeSummary), idx.Summary)
	}
	for _, bi := range idx.Blocks {
		e := enc{b: scratch[:0]}
		e.varint(bi.Offset)
		e.varint(bi.Size)
		e.varint(int64(bi.Records))
		e.time(bi.First)
		e.time(bi.Last)
		scratch = e.b
		dst = appendEntry(dst, entryBlock, scratch)
	}
	return dst, err
}

// nestedBody appends an encoded record body (or nothing, for absent) as a
// length-prefixed field of e.
func nestedBody(e *enc, present bool, r Record) error {
	if !present {
		e.bytes(nil)
		return nil
	}
	var sub [256]byte
	b, err := appendBody(sub[:0], r)
	e.bytes(b)
	return err
}

// appendConnEntry appends the index entry of one connection.
func appendConnEntry(dst []byte, c *ConnInfo) ([]byte, error) {
	e := enc{b: dst}
	e.b = append(e.b, entryConn, 0, 0, 0, 0, 0) // length patched below
	start := len(e.b)
	err := nestedBody(&e, true, &c.Conn)
	if err == nil {
		err = nestedBody(&e, c.TLS != nil, c.TLS)
	}
	if err == nil {
		err = nestedBody(&e, c.End != nil, c.End)
	}
	e.uvarint(uint64(len(c.Exchanges)))
	for _, x := range c.Exchanges {
		e.varint(x)
	}
	e.varint(int64(c.Anomalies))
	return patchEntry(e.b, start), err
}

// appendExchangeEntry appends the index entry of one exchange.
func appendExchangeEntry(dst []byte, x *ExchangeInfo) ([]byte, error) {
	e := enc{b: dst}
	e.b = append(e.b, entryExchange, 0, 0, 0, 0, 0)
	start := len(e.b)
	err := nestedBody(&e, true, &x.Request)
	if err == nil {
		err = nestedBody(&e, x.Response != nil, x.Response)
	}
	if err == nil {
		err = nestedBody(&e, x.RequestEnd != nil, x.RequestEnd)
	}
	if err == nil {
		err = nestedBody(&e, x.End != nil, x.End)
	}
	e.varint(x.Frames)
	var typesBuf [8]string
	types := typesBuf[:0]
	for k := range x.FrameTypes {
		types = append(types, k)
	}
	sort.Strings(types)
	e.uvarint(uint64(len(types)))
	for _, k := range types {
		e.str(k)
		e.varint(x.FrameTypes[k])
	}
	e.varint(x.BodyBytes)
	e.varint(x.Chunks)
	e.time(x.First)
	e.time(x.Last)
	e.uvarint(uint64(len(x.Blocks)))
	prev := 0
	for _, b := range x.Blocks {
		e.varint(int64(b - prev))
		prev = b
	}
	e.varint(int64(x.Anomalies))
	return patchEntry(e.b, start), err
}

// patchEntry writes the uvarint length of the entry body b[start:] into
// the 5 bytes reserved before it, moving the body down when the length
// takes fewer.
func patchEntry(b []byte, start int) []byte {
	n := len(b) - start
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	hdr := start - 5
	copy(b[hdr:], l[:k])
	if k < 5 {
		copy(b[hdr+k:], b[start:])
		b = b[:len(b)-(5-k)]
	}
	return b
}

// nested decodes a length-prefixed record body of type t; ok is false for
// an empty field (a nil pointer in the index).
func (d *dec) nested(t Type) (r Record, ok bool) {
	b := d.raw(t.String())
	if d.err != nil || len(b) == 0 {
		return nil, false
	}
	r, err := decodeRecord(t, b, false, nil)
	if err != nil {
		d.err = err
		return nil, false
	}
	return r, true
}

// decodeIndex decodes an index payload. Entry types it does not know are
// skipped, as are bytes after the fields it knows.
func decodeIndex(b []byte) (*Index, error) {
	idx := &Index{}
	for i := 0; i < len(b); {
		typ := b[i]
		size, k := binary.Uvarint(b[i+1:])
		if k <= 0 || size > uint64(len(b)-i-1-k) {
			return nil, fmt.Errorf("%w: bad index entry length at payload offset %d", errCorrupt, i)
		}
		start := i + 1 + k
		body := b[start : start+int(size)]
		d := &dec{b: body}
		switch typ {
		case byte(TypeMeta), byte(TypeSummary), byte(TypeAnomaly):
			r, err := decodeRecord(Type(typ), body, false, nil)
			if err != nil {
				return nil, fmt.Errorf("index entry at payload offset %d: %w", i, err)
			}
			switch r := r.(type) {
			case *Meta:
				idx.Meta = r
			case *Summary:
				idx.Summary = r
			case *Anomaly:
				idx.Anomalies = append(idx.Anomalies, *r)
			}
		case entryBlock:
			idx.Blocks = append(idx.Blocks, BlockInfo{
				Offset:  d.varint("block offset"),
				Size:    d.varint("block size"),
				Records: d.int("block records"),
				First:   d.time("block first"),
				Last:    d.time("block last"),
			})
		case entryConn:
			idx.Conns = append(idx.Conns, decodeConnEntry(d))
		case entryExchange:
			idx.Exchanges = append(idx.Exchanges, decodeExchangeEntry(d))
		}
		if d.err != nil {
			return nil, fmt.Errorf("index entry at payload offset %d: %w", i, d.err)
		}
		i = start + int(size)
	}
	return idx, nil
}

// decodeConnEntry decodes the body of a connection entry; errors are
// left in d.
func decodeConnEntry(d *dec) ConnInfo {
	var c ConnInfo
	if r, ok := d.nested(TypeConn); ok {
		c.Conn = *r.(*Conn)
	} else {
		d.fail("conn")
	}
	if r, ok := d.nested(TypeTLS); ok {
		c.TLS = r.(*TLS)
	}
	if r, ok := d.nested(TypeConnEnd); ok {
		c.End = r.(*ConnEnd)
	}
	if n := d.count("exchanges", 1); n > 0 {
		c.Exchanges = make([]int64, n)
		for j := range c.Exchanges {
			c.Exchanges[j] = d.varint("exchange")
		}
	}
	c.Anomalies = d.int("anomalies")
	return c
}

// decodeExchangeEntry decodes the body of an exchange entry; errors are
// left in d.
func decodeExchangeEntry(d *dec) ExchangeInfo {
	var x ExchangeInfo
	if r, ok := d.nested(TypeRequest); ok {
		x.Request = *r.(*Request)
	} else {
		d.fail("request")
	}
	if r, ok := d.nested(TypeResponse); ok {
		x.Response = r.(*Response)
	}
	if r, ok := d.nested(TypeEnd); ok {
		x.RequestEnd = r.(*End)
	}
	if r, ok := d.nested(TypeEnd); ok {
		x.End = r.(*End)
	}
	x.Frames = d.varint("frames")
	if n := d.count("frame types", 2); n > 0 {
		x.FrameTypes = make(map[string]int64, n)
		for range n {
			k := d.str("frame type")
			x.FrameTypes[k] = d.varint("frame type count")
		}
	}
	x.BodyBytes = d.varint("body bytes")
	x.Chunks = d.varint("chunks")
	x.First = d.time("first")
	x.Last = d.time("last")
	if n := d.count("blocks", 1); n > 0 {
		x.Blocks = make([]int, n)
		prev := int64(0)
		for j := range x.Blocks {
			prev += d.varint("block")
			if int64(int(prev)) != prev {
				d.fail("block")
			}
			x.Blocks[j] = int(prev)
		}
	}
	x.Anomalies = d.int("anomalies")
	return x
}

// validate checks what readers rely on: blocks lie in order inside the
// data region [start, end), exchanges name existing blocks in ascending
// order, and connections and exchanges are sorted by unique ID.
func (idx *Index) validate(start, end int64) error {
	prev := start
	for i, b := range idx.Blocks {
		if b.Offset < prev || b.Size < blockHeaderSize || b.Size > end-b.Offset {
			return fmt.Errorf("%w: index block %d at offset %d size %d outside the data region [%d, %d)", errCorrupt, i, b.Offset, b.Size, prev, end)
		}
		prev = b.Offset + b.Size
	}
	for i := range idx.Conns {
		if i > 0 && idx.Conns[i].Conn.ID <= idx.Conns[i-1].Conn.ID {
			return fmt.Errorf("%w: index connections out of order at %d", errCorrupt, i)
		}
	}
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		if i > 0 && x.Request.Exchange <= idx.Exchanges[i-1].Request.Exchange {
			return fmt.Errorf("%w: index exchanges out of order at %d", errCorrupt, i)
		}
		for j, b := range x.Blocks {
			if b < 0 || b >= len(idx.Blocks) || j > 0 && b <= x.Blocks[j-1] {
				return fmt.Errorf("%w: exchange %d names block %d of %d", errCorrupt, x.Request.Exchange, b, len(idx.Blocks))
			}
		}
	}
	return nil
}
