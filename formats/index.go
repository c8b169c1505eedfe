package formats

import (
	"encoding/binary"
	"fmt"
	"maps"
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
// It copies what it keeps.
type indexBuilder struct {
	idx   Index
	conns map[uint64]*connState
	exs   map[int64]*exState
}

type connState struct {
	pos       int // in idx.Conns
	announced bool
}

type exState struct {
	pos    int // in idx.Exchanges
	conn   uint64
	linked bool // listed in its connection's Exchanges
	format frame.Format
}

func newIndexBuilder() *indexBuilder {
	return &indexBuilder{conns: map[uint64]*connState{}, exs: map[int64]*exState{}}
}

func (b *indexBuilder) addBlock(bi BlockInfo) { b.idx.Blocks = append(b.idx.Blocks, bi) }

func (b *indexBuilder) conn(id uint64) (*ConnInfo, *connState) {
	s := b.conns[id]
	if s == nil {
		s = &connState{pos: len(b.idx.Conns)}
		b.conns[id] = s
		b.idx.Conns = append(b.idx.Conns, ConnInfo{Conn: Conn{ID: id}})
	}
	return &b.idx.Conns[s.pos], s
}

// exchange returns the exchange id, creating it if needed, and notes that
// a record of time t in block block belongs to it.
func (b *indexBuilder) exchange(id int64, block int, t int64) (*ExchangeInfo, *exState) {
	s := b.exs[id]
	if s == nil {
		s = &exState{pos: len(b.idx.Exchanges)}
		b.exs[id] = s
		b.idx.Exchanges = append(b.idx.Exchanges, ExchangeInfo{
			Request: Request{Exchange: id, Missing: true},
			First:   t,
			Last:    t,
		})
	}
	x := &b.idx.Exchanges[s.pos]
	if n := len(x.Blocks); n == 0 || x.Blocks[n-1] != block {
		x.Blocks = append(x.Blocks, block)
	}
	x.First = min(x.First, t)
	x.Last = max(x.Last, t)
	return x, s
}

// link lists exchange id on connection conn, once.
func (b *indexBuilder) link(id int64, s *exState, conn uint64) {
	if s.linked {
		return
	}
	s.linked, s.conn = true, conn
	c, _ := b.conn(conn)
	c.Exchanges = append(c.Exchanges, id)
}

// add notes record r, stored in the data block numbered block (an index
// into idx.Blocks once that block is added).
func (b *indexBuilder) add(r Record, block int) {
	switch r := r.(type) {
	case *Meta:
		if b.idx.Meta == nil {
			b.idx.Meta = cloneMeta(r)
		}
	case *Summary:
		s := *r
		b.idx.Summary = &s
	case *Conn:
		c, s := b.conn(r.ID)
		if !s.announced {
			s.announced = true
			c.Conn = *r
		}
	case *TLS:
		c, _ := b.conn(r.Conn)
		t := *r
		c.TLS = &t
	case *ConnEnd:
		c, _ := b.conn(r.Conn)
		e := *r
		c.End = &e
	case *Request:
		x, s := b.exchange(r.Exchange, block, r.Time)
		x.Request = *r
		x.Request.Header = cloneHeaders(r.Header)
		b.link(r.Exchange, s, r.Conn)
	case *Response:
		x, s := b.exchange(r.Exchange, block, r.Time)
		resp := *r
		resp.Header = cloneHeaders(r.Header)
		x.Response = &resp
		s.format = r.Events
	case *Frame:
		x, s := b.exchange(r.Exchange, block, r.Time)
		x.Frames++
		x.BodyBytes += int64(len(r.Pre) + len(r.Data))
		if typ, ok := frame.PeekType(s.format, r.Data); ok {
			if x.FrameTypes == nil {
				x.FrameTypes = map[string]int64{}
			}
			x.FrameTypes[internType(typ)]++
		}
	case *Body:
		x, _ := b.exchange(r.Exchange, block, r.Time)
		if r.Dir == ServerToClient {
			x.BodyBytes += int64(len(r.Data))
		}
	case *Chunk:
		x, _ := b.exchange(r.Exchange, block, r.Time)
		x.Chunks++
	case *End:
		x, _ := b.exchange(r.Exchange, block, r.Time)
		e := *r
		e.Tail = nil
		e.Trailer = cloneHeaders(r.Trailer)
		if r.Dir == ServerToClient {
			x.End = &e
			x.BodyBytes += int64(len(r.Tail))
		} else {
			x.RequestEnd = &e
		}
	case *Anomaly:
		b.idx.Anomalies = append(b.idx.Anomalies, *r)
		c, _ := b.conn(r.Conn)
		c.Anomalies++
		if r.Exchange != NoExchange {
			x, s := b.exchange(r.Exchange, block, r.Time)
			x.Anomalies++
			if !s.linked && x.Request.Missing {
				x.Request.Conn = r.Conn
				b.link(r.Exchange, s, r.Conn)
			}
		}
	}
}

// finish returns the index, sorted. The builder must not be used after.
func (b *indexBuilder) finish() *Index {
	sort.SliceStable(b.idx.Conns, func(i, j int) bool { return b.idx.Conns[i].Conn.ID < b.idx.Conns[j].Conn.ID })
	sort.SliceStable(b.idx.Exchanges, func(i, j int) bool {
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
	var scratch, sub []byte
	var err error
	record := func(typ byte, r Record) {
		if err != nil {
			return
		}
		scratch, err = appendBody(scratch[:0], r)
		dst = appendEntry(dst, typ, scratch)
	}
	// nested appends an encoded record body (or nothing for nil) as a
	// length-prefixed field of e.
	nested := func(e *enc, r Record) {
		if err != nil {
			return
		}
		sub, err = appendBody(sub[:0], r)
		e.bytes(sub)
	}
	// optional is nested for a pointer that may be nil (an empty field).
	optional := func(e *enc, present bool, r Record) {
		if present {
			nested(e, r)
		} else {
			e.bytes(nil)
		}
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
	for i := range idx.Conns {
		c := &idx.Conns[i]
		e := enc{b: scratch[:0]}
		nested(&e, &c.Conn)
		optional(&e, c.TLS != nil, c.TLS)
		optional(&e, c.End != nil, c.End)
		e.uvarint(uint64(len(c.Exchanges)))
		for _, x := range c.Exchanges {
			e.varint(x)
		}
		e.varint(int64(c.Anomalies))
		scratch = e.b
		dst = appendEntry(dst, entryConn, scratch)
	}
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		e := enc{b: scratch[:0]}
		nested(&e, &x.Request)
		optional(&e, x.Response != nil, x.Response)
		optional(&e, x.RequestEnd != nil, x.RequestEnd)
		optional(&e, x.End != nil, x.End)
		e.varint(x.Frames)
		types := make([]string, 0, len(x.FrameTypes))
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
		scratch = e.b
		dst = appendEntry(dst, entryExchange, scratch)
	}
	for i := range idx.Anomalies {
		record(byte(TypeAnomaly), &idx.Anomalies[i])
	}
	return dst, err
}

// nested decodes a length-prefixed record body of type t; ok is false for
// an empty field (a nil pointer in the index).
func (d *dec) nested(t Type) (r Record, ok bool) {
	b := d.raw(t.String())
	if d.err != nil || len(b) == 0 {
		return nil, false
	}
	r, err := decodeRecord(t, b, false)
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
			r, err := decodeRecord(Type(typ), body, false)
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
			idx.Conns = append(idx.Conns, c)
		case entryExchange:
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
			idx.Exchanges = append(idx.Exchanges, x)
		}
		if d.err != nil {
			return nil, fmt.Errorf("index entry at payload offset %d: %w", i, d.err)
		}
		i = start + int(size)
	}
	return idx, nil
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
