package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// A Writer's index grows with the session: one entry per connection and
// per exchange. Held as Go values (headers, maps, pointers) that is about
// 2 KB per exchange; a recording of a busy apiserver makes millions. So a
// Writer keeps as values only the connections and exchanges that records
// may still change, and moves each one, once it is finished, into a spill:
// its index entry encoded exactly as the index block will hold it,
// compressed with others in segments. Close streams the entries, sorted by
// ID, into the index block. Memory then follows what is open, plus
// a few tens of bytes per finished exchange (its compressed entry and its
// place).

const (
	// spillSegment is the uncompressed size at which a segment of entries
	// is compressed.
	spillSegment = 256 << 10
	// spillCached is how many decompressed segments Close (and a late
	// record reopening an entry) keeps at hand: entries are finished in
	// about the order of their IDs, so a few suffice.
	spillCached = 4
)

// inlineIndex is the uncompressed index size up to which Close builds the
// index payload in memory and compresses it in one call, as the format's
// first writer did; larger ones are compressed as a stream. (A variable
// for tests.)
var inlineIndex = 1 << 20

// spill holds the index entries of finished connections and exchanges.
type spill struct {
	enc        *zstd.Encoder
	cur        []byte   // entries of the segment being filled
	segs       [][]byte // compressed segments
	segLen     []int    // their uncompressed lengths
	conns, exs locTable
	cache      [spillCached]struct {
		seg int
		raw []byte
	}
	clock int // round-robin slot of the cache
	err   error
}

func newSpill(enc *zstd.Encoder) *spill {
	s := &spill{enc: enc}
	for i := range s.cache {
		s.cache[i].seg = -1
	}
	return s
}

// locTable maps IDs to where their entries are: (segment+1)<<32 | offset,
// 0 for none. Pages of consecutive IDs keep it at 8 bytes per ID for the
// dense IDs a session hands out.
type locTable struct {
	pages map[int64]*[locPage]uint64
}

const locPage = 1024

func (t *locTable) get(id int64) uint64 {
	if p := t.pages[id>>10]; p != nil {
		return p[id&(locPage-1)]
	}
	return 0
}

func (t *locTable) set(id int64, v uint64) {
	p := t.pages[id>>10]
	if p == nil {
		if v == 0 {
			return
		}
		if t.pages == nil {
			t.pages = map[int64]*[locPage]uint64{}
		}
		p = new([locPage]uint64)
		t.pages[id>>10] = p
	}
	p[id&(locPage-1)] = v
}

// each calls f with every ID that has an entry, in ascending order.
func (t *locTable) each(f func(id int64, loc uint64) error) error {
	keys := make([]int64, 0, len(t.pages))
	for k := range t.pages {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := t.pages[k]
		for i, v := range p {
			if v != 0 {
				if err := f(k<<10|int64(i), v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// connSlot is a connection ID's key in a locTable: its order as a signed
// number is the ID's unsigned order.
func connSlot(id uint64) int64 { return int64(id ^ 1<<63) }

// put stores an encoded entry and returns its location.
func (s *spill) put(entry func([]byte) ([]byte, error)) uint64 {
	off := len(s.cur)
	var err error
	s.cur, err = entry(s.cur)
	if err != nil {
		s.cur = s.cur[:off]
		if s.err == nil {
			s.err = err
		}
		return 0
	}
	loc := uint64(len(s.segs)+1)<<32 | uint64(off)
	if len(s.cur) >= spillSegment {
		s.segs = append(s.segs, s.enc.EncodeAll(s.cur, make([]byte, 0, len(s.cur)/4)))
		s.segLen = append(s.segLen, len(s.cur))
		s.cur = s.cur[:0]
	}
	return loc
}

func (s *spill) putConn(c *openConn) {
	if loc := s.put(func(b []byte) ([]byte, error) { return appendConnEntry(b, &c.ConnInfo) }); loc != 0 {
		s.conns.set(connSlot(c.Conn.ID), loc)
	}
}

// linkedBit marks, in an exchange's location, that it is listed on its
// connection (a fact the entry itself does not hold).
const linkedBit = 1 << 63

func (s *spill) putExchange(x *openEx) {
	if loc := s.put(func(b []byte) ([]byte, error) { return appendExchangeEntry(b, &x.ExchangeInfo) }); loc != 0 {
		if x.linked {
			loc |= linkedBit
		}
		s.exs.set(x.Request.Exchange, loc)
	}
}

// entry returns the body of the entry at loc.
func (s *spill) entry(loc uint64) ([]byte, error) {
	loc &^= linkedBit
	seg, off := int(loc>>32)-1, int(loc&0xffffffff)
	raw := s.cur
	if seg < len(s.segs) {
		var err error
		if raw, err = s.segment(seg); err != nil {
			return nil, err
		}
	}
	size, k := binary.Uvarint(raw[off+1:])
	start := off + 1 + k
	return raw[start : start+int(size)], nil
}

// segment returns a decompressed segment, from the cache if it can.
func (s *spill) segment(seg int) ([]byte, error) {
	for i := range s.cache {
		if s.cache[i].seg == seg {
			return s.cache[i].raw, nil
		}
	}
	d, err := decoder()
	if err != nil {
		return nil, err
	}
	c := &s.cache[s.clock]
	s.clock = (s.clock + 1) % spillCached
	c.seg = -1
	if cap(c.raw) < s.segLen[seg] {
		c.raw = make([]byte, 0, s.segLen[seg])
	}
	raw, err := d.DecodeAll(s.segs[seg], c.raw[:0:s.segLen[seg]])
	if err != nil {
		// Only memory this process wrote: a failure is a bug.
		return nil, fmt.Errorf("formats: index spill segment %d: %v", seg, err)
	}
	c.seg, c.raw = seg, raw
	return raw, nil
}

// reopenConn takes a finished connection back (a record named it after its
// end). nil if it is not in the spill.
func (s *spill) reopenConn(id uint64) *openConn {
	if s == nil {
		return nil
	}
	loc := s.conns.get(connSlot(id))
	if loc == 0 {
		return nil
	}
	body, err := s.entry(loc)
	if err != nil {
		s.err = err
		return nil
	}
	d := &dec{b: body}
	c := decodeConnEntry(d)
	if d.err != nil {
		s.err = d.err
		return nil
	}
	s.conns.set(connSlot(id), 0)
	announced := c.Conn != Conn{ID: id}
	return &openConn{ConnInfo: c, announced: announced}
}

// reopenExchange takes a finished exchange back. nil if it is not in the
// spill.
func (s *spill) reopenExchange(id int64) *openEx {
	if s == nil {
		return nil
	}
	loc := s.exs.get(id)
	if loc == 0 {
		return nil
	}
	body, err := s.entry(loc)
	if err != nil {
		s.err = err
		return nil
	}
	d := &dec{b: body}
	x := decodeExchangeEntry(d)
	if d.err != nil {
		s.err = d.err
		return nil
	}
	s.exs.set(id, 0)
	o := &openEx{ExchangeInfo: x, conn: x.Request.Conn, linked: loc&linkedBit != 0}
	if x.Response != nil {
		o.format = x.Response.Events
	}
	return o
}

// writeIndex ends the builder and returns the whole index block (header
// and payload) for block number seq, compressed with enc at level. The
// payload holds the same entries, in the same order, as appendIndex of
// finish's Index would.
func (b *indexBuilder) writeIndex(dst []byte, enc *zstd.Encoder, level zstd.EncoderLevel, seq uint32) ([]byte, error) {
	s := b.spill
	for _, c := range b.conns {
		s.putConn(c)
	}
	for _, x := range b.exs {
		s.putExchange(x)
	}
	b.conns, b.exs = nil, nil
	if s.err != nil {
		return nil, s.err
	}
	p := &payload{level: level}
	head, err := appendHead(nil, &b.idx)
	if err != nil {
		return nil, err
	}
	p.write(head)
	copyEntries := func(typ byte) func(int64, uint64) error {
		return func(_ int64, loc uint64) error {
			body, err := s.entry(loc)
			if err != nil {
				return err
			}
			var h [1 + binary.MaxVarintLen64]byte
			h[0] = typ
			n := 1 + binary.PutUvarint(h[1:], uint64(len(body)))
			p.write(h[:n])
			p.write(body)
			return p.err
		}
	}
	if err := s.conns.each(copyEntries(entryConn)); err != nil {
		return nil, err
	}
	if err := s.exs.each(copyEntries(entryExchange)); err != nil {
		return nil, err
	}
	var scratch []byte
	for i := range b.idx.Anomalies {
		if scratch, err = appendBody(scratch[:0], &b.idx.Anomalies[i]); err != nil {
			return nil, err
		}
		p.write(appendEntry(nil, byte(TypeAnomaly), scratch))
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.n > MaxIndexSize {
		return nil, fmt.Errorf("formats: index of %d bytes exceeds MaxIndexSize (%d); the data blocks are intact", p.n, MaxIndexSize)
	}
	h := blockHeader{typ: blockIndex, seq: seq}
	if n := len(b.idx.Blocks); n > 0 {
		h.first, h.last = b.idx.Blocks[0].First, b.idx.Blocks[0].Last
		for _, bl := range b.idx.Blocks[1:] {
			h.first, h.last = min(h.first, bl.First), max(h.last, bl.Last)
		}
	}
	if p.zw == nil {
		return encodeBlock(dst, enc, nil, h, p.raw), nil
	}
	p.flush()
	if p.err != nil {
		return nil, p.err
	}
	if err := p.zw.Close(); err != nil {
		return nil, fmt.Errorf("formats: compress index: %w", err)
	}
	return appendBlock(dst, h, codecZstd, p.z.Bytes(), int(p.n)), nil
}

// payload collects an index payload: in memory up to inlineIndex bytes,
// then compressed as a stream.
type payload struct {
	level zstd.EncoderLevel
	raw   []byte
	zw    *zstd.Encoder
	z     bytes.Buffer
	n     int64
	err   error
}

func (p *payload) write(b []byte) {
	if p.err != nil {
		return
	}
	p.n += int64(len(b))
	p.raw = append(p.raw, b...)
	switch {
	case p.zw == nil && len(p.raw) <= inlineIndex:
		return
	case p.zw == nil:
		p.zw, p.err = zstd.NewWriter(&p.z, zstd.WithEncoderLevel(p.level), zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true))
		if p.err != nil {
			return
		}
	case len(p.raw) < 64<<10:
		return // gather small entries before handing them over
	}
	p.flush()
}

// flush hands the gathered bytes to the stream encoder.
func (p *payload) flush() {
	if _, err := p.zw.Write(p.raw); err != nil && p.err == nil {
		p.err = err
	}
	p.raw = p.raw[:0]
}
