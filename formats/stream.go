package formats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
)

// readChunk is how much a window asks its reader for at a time, and how
// far ahead a salvage scan looks at once.
const readChunk = 64 << 10

// window is a forward-only view of a stream: it buffers bytes read but not
// yet consumed, growing only as far as a caller asks (and the stream
// delivers), so a length that lies costs no more memory than the bytes
// that are really there.
type window struct {
	r   io.Reader
	buf []byte // unconsumed bytes are buf[i:]
	i   int
	off int64 // file offset of buf[i]
	err error // first error of r (io.EOF at the end)
	// empty counts consecutive reads that returned nothing.
	empty int
}

// fill returns the next n unconsumed bytes without consuming them; fewer
// only if the stream ended or failed (see w.err). The result is valid until
// the next call.
func (w *window) fill(n int) []byte {
	for len(w.buf)-w.i < n && w.err == nil {
		if w.i > 0 && (w.i >= len(w.buf)/2 || cap(w.buf)-len(w.buf) < readChunk) {
			w.buf = w.buf[:copy(w.buf, w.buf[w.i:])]
			w.i = 0
		}
		if cap(w.buf)-len(w.buf) < readChunk {
			// Grow by what is missing, at most readChunk at a time:
			// the stream must deliver before the buffer grows further.
			grow := min(max(n-(len(w.buf)-w.i), 512), readChunk)
			w.buf = append(w.buf, make([]byte, grow)...)[:len(w.buf)]
		}
		m, err := w.r.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+m]
		switch {
		case err != nil:
			w.err = err
		case m > 0:
			w.empty = 0
		default:
			if w.empty++; w.empty >= 100 {
				w.err = io.ErrNoProgress // as bufio.Reader does
			}
		}
	}
	return w.buf[w.i:min(len(w.buf), w.i+n)]
}

// skip consumes n bytes, reading and discarding what is not buffered. It
// returns how many it consumed (fewer at the end of the stream).
func (w *window) skip(n int64) int64 {
	done := int64(0)
	for done < n {
		avail := int64(len(w.buf) - w.i)
		if avail == 0 {
			if len(w.fill(int(min(n-done, readChunk)))) == 0 {
				break
			}
			continue
		}
		k := min(avail, n-done)
		w.i += int(k)
		w.off += k
		done += k
	}
	if w.i == len(w.buf) {
		w.buf, w.i = w.buf[:0], 0
	}
	return done
}

// readErr returns the window's stream error unless it is io.EOF.
func (w *window) readErr() error {
	if w.err == io.EOF {
		return nil
	}
	return w.err
}

// block is a data block as a blockReader returns it.
type block struct {
	off     int64
	hdr     blockHeader
	payload []byte // uncompressed records; valid until the next call
}

// blockReader reads the data blocks of a session stream in order. After
// damage it returns a *DamageError and (unless stop) resumes at the next
// offset holding a block header whose CRC checks out. It checks the blocks'
// numbers: a block whose number was read already (a copied byte range) is
// dropped and reported, numbers that are skipped without damage to account
// for them, or that go backwards, are reported before the block is read. It
// stops with io.EOF at the index block or at a clean end of the stream.
type blockReader struct {
	w    window
	stop bool // StopOnDamage
	seq  int  // number the next block should have
	err  error
	buf  []byte // decompression buffer
	dict prefixDict
	// index is the offset of the index block, once seen (else -1).
	index int64

	seen seqSet // numbers of the blocks read
	top  int64  // the highest of them; -1 before the first
	// damaged counts the damaged regions reported since the last block
	// read: each may have held a block whose number is then missing.
	damaged int64
	// noted is the offset of a block whose order was reported; the next
	// call reads it.
	noted int64
}

func newBlockReader(r io.Reader, off int64, stop bool) *blockReader {
	return &blockReader{w: window{r: r, off: off}, stop: stop, index: -1, top: -1, noted: -1}
}

// damage reports damage at off. resume is where the next block starts when
// the damaged block's header was intact (its payload is bad); else -1, and
// the reader scans for the next intact header from off+1. With an intact
// header, if no intact header (or the end) lies at resume, the block's
// length is not to be trusted either (bytes were inserted or removed in
// it): the reader scans from the end of its header.
func (b *blockReader) damage(off int64, cause error, resume int64, hdrLen int) error {
	d := &DamageError{Offset: off, Block: b.seq, Err: cause}
	b.damaged++
	switch {
	case b.stop:
		b.err = d
	case resume >= 0 && b.headerAt(resume-b.w.off):
		b.w.skip(resume - b.w.off)
		b.seq++
		d.Skipped = resume - off
	case resume >= 0:
		b.w.skip(int64(hdrLen))
		b.seq++
		if b.salvage() {
			d.Skipped = b.w.off - off
		}
	default:
		b.w.skip(1)
		if b.salvage() {
			d.Skipped = b.w.off - off
		}
	}
	return d
}

// headerAt reports whether the stream holds an intact block header n bytes
// ahead, or ends exactly there.
func (b *blockReader) headerAt(n int64) bool {
	if n > readChunk+MaxBlockSize+maxBlockHeaderSize {
		return false
	}
	p := b.w.fill(int(n) + blockPrefixSize)
	if int64(len(p)) <= n {
		return int64(len(p)) == n
	}
	if len(p) < int(n)+blockPrefixSize {
		return false
	}
	hl, err := headerLen(p[n:])
	if err != nil {
		return false
	}
	p = b.w.fill(int(n) + hl)
	if len(p) < int(n)+hl {
		return false
	}
	_, err = parseHeader(p[n:])
	return err == nil
}

// order checks the number of the intact block header h at off against the
// blocks read so far. It returns a *DamageError to report first (the next
// call reads the block at off again, and does not check it twice), or nil.
// A repeated block is consumed: its DamageError says it was skipped.
func (b *blockReader) order(off int64, h *blockHeader) error {
	if off == b.noted {
		return nil
	}
	seq := int64(h.seq)
	var d *DamageError
	switch {
	case b.seen.has(h.seq) || h.typ == blockIndex && seq <= b.top:
		// A copy of a block read already (a byte range written twice),
		// or an index block where more data blocks were read than it
		// counts: skip it.
		size := h.size()
		if b.w.skip(size) < size {
			return b.short(off)
		}
		what := "a copy of block %d"
		if h.typ == blockIndex {
			what = "an index block numbered %d"
		}
		d = &DamageError{Offset: off, Block: int(seq), Skipped: size,
			Err: fmt.Errorf("%w: "+what+" after block %d", errRepeated, seq, b.top)}
		b.seq = int(b.top) + 1
		if b.stop {
			b.err = d
		}
		return d
	case seq > b.top+1+b.damaged:
		// Numbers skipped that the damage reported since the last block
		// cannot all account for: whole blocks are missing.
		d = &DamageError{Offset: off, Block: int(b.top + 1),
			Err: fmt.Errorf("%w: blocks %d to %d not found before block %d", errMissing, b.top+1, seq-1, seq)}
		if seq == b.top+2 {
			d.Err = fmt.Errorf("%w: block %d not found before block %d", errMissing, b.top+1, seq)
		}
	case seq < b.top:
		d = &DamageError{Offset: off, Block: int(seq),
			Err: fmt.Errorf("%w: block %d after block %d", errOrder, seq, b.top)}
	default:
		return nil
	}
	b.noted = off
	if b.stop {
		b.err = d
	}
	return d
}

// read records that the block numbered seq was read.
func (b *blockReader) read(seq uint32) {
	b.seen.add(seq)
	b.top = max(b.top, int64(seq))
	b.seq = int(b.top) + 1
	b.damaged = 0
	b.noted = -1
}

// seqSet is a set of block numbers: sorted disjoint ranges for numbers
// that come in ascending order (those of a sound file make one range), a
// map for those that come after a higher one.
type seqSet struct {
	ranges [][2]uint32 // inclusive, ascending
	back   map[uint32]bool
}

func (s *seqSet) has(n uint32) bool {
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i][1] >= n })
	return i < len(s.ranges) && s.ranges[i][0] <= n || s.back[n]
}

func (s *seqSet) add(n uint32) {
	k := len(s.ranges)
	switch {
	case k > 0 && n <= s.ranges[k-1][1]:
		if s.back == nil {
			s.back = map[uint32]bool{}
		}
		s.back[n] = true
	case k > 0 && n == s.ranges[k-1][1]+1:
		s.ranges[k-1][1] = n
	default:
		s.ranges = append(s.ranges, [2]uint32{n, n})
	}
}

// short reports a block at off that the stream ended inside: a cut file (a
// *DamageError wrapping io.ErrUnexpectedEOF), or the reader's error.
func (b *blockReader) short(off int64) error {
	if err := b.w.readErr(); err != nil {
		b.err = fmt.Errorf("formats: read at offset %d: %w", b.w.off+int64(len(b.w.buf)-b.w.i), err)
		return b.err
	}
	d := &DamageError{Offset: off, Block: b.seq, Err: io.ErrUnexpectedEOF}
	b.damaged++
	b.w.skip(int64(len(b.w.buf) - b.w.i)) // the next call sees the end
	if b.stop {
		b.err = d
	}
	return d
}

// salvage consumes bytes up to the next offset holding a block header whose
// CRC checks out, and reports whether it found one.
func (b *blockReader) salvage() bool {
	for {
		data := b.w.fill(readChunk)
		if len(data) < len(blockMagic) {
			b.w.skip(int64(len(data)))
			return false
		}
		i := bytes.Index(data, blockMagic[:])
		if i < 0 {
			b.w.skip(int64(len(data) - len(blockMagic) + 1))
			continue
		}
		b.w.skip(int64(i))
		if p := b.w.fill(blockPrefixSize); len(p) == blockPrefixSize {
			if n, err := headerLen(p); err == nil {
				if h := b.w.fill(n); len(h) == n {
					if _, err := parseHeader(h); err == nil {
						return true
					}
				}
			}
		}
		b.w.skip(1)
	}
}

// next returns the next intact data block, a *DamageError, io.EOF at the
// end, or the error of the underlying reader.
func (b *blockReader) next() (block, error) {
	for b.err == nil {
		off := b.w.off
		p := b.w.fill(blockPrefixSize)
		if len(p) == 0 && b.w.err == io.EOF {
			b.err = io.EOF
			break
		}
		if len(p) < blockPrefixSize {
			return block{}, b.short(off)
		}
		n, err := headerLen(p)
		if err != nil {
			return block{}, b.damage(off, err, -1, 0)
		}
		hb := b.w.fill(n)
		if len(hb) < n {
			return block{}, b.short(off)
		}
		h, err := parseHeader(hb)
		if err != nil {
			return block{}, b.damage(off, err, -1, 0)
		}
		if err := b.order(off, &h); err != nil {
			return block{}, err
		}
		b.seq = int(h.seq)
		size := h.size()
		switch h.typ {
		case blockIndex:
			b.index = off
			b.err = io.EOF
			return block{}, b.err
		case blockData, blockDelta:
		case blockDict:
			// A copy of the session dictionary: kept for the codec 2
			// blocks whose dictionary the first blocks cannot give.
			raw := b.w.fill(int(size))
			if int64(len(raw)) < size {
				return block{}, b.short(off)
			}
			content, err := dictBlockContent(&h, raw[h.hdrLen:])
			if err != nil {
				return block{}, b.damage(off, err, off+size, h.hdrLen)
			}
			b.dict.addCopy(content)
			b.w.skip(size)
			b.read(h.seq)
			continue
		default:
			// A block type a later version added: skip it.
			if b.w.skip(size) < size {
				return block{}, b.short(off)
			}
			b.read(h.seq)
			continue
		}
		raw := b.w.fill(int(size))
		if int64(len(raw)) < size {
			return block{}, b.short(off)
		}
		payload, err := decompress(&h, raw[h.hdrLen:], b.buf, &b.dict)
		if err != nil {
			return block{}, b.damage(off, err, off+size, h.hdrLen)
		}
		b.dict.add(h.seq, h.codec, payload)
		if h.codec != codecNone {
			b.buf = payload
		}
		// An uncompressed payload aliases the window, which keeps it
		// until the next fill.
		b.w.skip(size)
		b.read(h.seq)
		return block{off: off, hdr: h, payload: payload}, nil
	}
	return block{}, b.err
}

// errBlockCount is a block whose records do not number what its header says.
var errBlockCount = errors.New("record count differs from the block header")
