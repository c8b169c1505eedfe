package formats

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"sort"
	"sync"
)

// File is an opened session file with its index. Safe for concurrent use by
// several Scanners.
type File struct {
	r        io.ReaderAt
	size     int64
	closer   io.Closer // for Open
	stop     bool
	idx      *Index
	clean    bool
	problems []error
	damage   []*DamageError // the DamageErrors among problems
	exPos    map[int64]int  // exchange ID → index in idx.Exchanges
	cache    BlockCache
	dict     fileDict
	once     sync.Once
	closeErr error

	namesOnce sync.Once
	names     map[uint64]string // connection ID → "client->server"
}

// Open opens a session file: header, then footer and index; if the footer or
// index is missing or damaged it rebuilds the index by scanning forward.
// What keeps it from opening the file is an *OpenError (see
// OpenReaderAt for what the file itself may be).
func Open(name string, opts ReaderOptions) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, &OpenError{Path: name, Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &OpenError{Path: name, Err: err}
	}
	file, err := OpenReaderAt(f, st.Size(), opts)
	if err != nil {
		f.Close()
		return nil, &OpenError{Path: name, Err: err}
	}
	file.closer = f
	return file, nil
}

// OpenReaderAt is Open for an io.ReaderAt of the given size. A file too
// short for its header is a *DamageError; a wrong magic ErrNotSession
// (unless the header's checksum or the first block vouches for the file), a
// newer version ErrVersion. Anything else is reported by Problems: a header
// whose checksum fails or whose magic is damaged, a missing or damaged index (an error wrapping
// ErrNoIndex; the index is then rebuilt by reading every block, which
// finds the damaged regions too).
func OpenReaderAt(r io.ReaderAt, size int64, opts ReaderOptions) (*File, error) {
	f := &File{r: r, size: size, stop: opts.StopOnDamage}
	f.dict.f = f
	if err := checkHeaderAt(r, size); err != nil {
		var d *DamageError
		if size < fileHeaderSize || !errors.As(err, &d) {
			return nil, err
		}
		f.problems = append(f.problems, err)
	}
	idx, _, err := readIndex(r, size)
	if err == nil {
		f.idx = idx
		f.clean = len(f.problems) == 0 && idx.Summary != nil
	} else {
		f.problems = append(f.problems, fmt.Errorf("%w: %v; index rebuilt by reading every block", ErrNoIndex, err))
		b := newIndexBuilder()
		problems, err := scan(r, size, func(blk block, recs []Record) error {
			pos := len(b.idx.Blocks)
			b.addBlock(BlockInfo{Offset: blk.off, Size: blk.hdr.size(), Records: blk.hdr.records, First: blk.hdr.first, Last: blk.hdr.last})
			for _, rec := range recs {
				b.add(rec, pos)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		f.idx = b.finish()
		// A damaged region is named by its place among the data blocks,
		// as a Scanner names a damaged block of an intact index: the
		// blocks' own numbers also count the dictionary's blocks.
		for _, p := range problems {
			var d *DamageError
			if errors.As(p, &d) && d.Block >= 0 {
				d.Block = sort.Search(len(f.idx.Blocks), func(i int) bool { return f.idx.Blocks[i].Offset >= d.Offset })
			}
		}
		f.problems = append(f.problems, problems...)
	}
	for _, p := range f.problems {
		var d *DamageError
		if errors.As(p, &d) {
			f.damage = append(f.damage, d)
		}
	}
	f.exPos = make(map[int64]int, len(f.idx.Exchanges))
	for i := range f.idx.Exchanges {
		f.exPos[f.idx.Exchanges[i].Request.Exchange] = i
	}
	return f, nil
}

// checkHeaderAt reads and checks the file header of r.
func checkHeaderAt(r io.ReaderAt, size int64) error {
	hdr := make([]byte, min(size, fileHeaderSize+maxBlockHeaderSize))
	if n, err := r.ReadAt(hdr, 0); n < len(hdr) {
		return fmt.Errorf("formats: read file header: %w", err)
	}
	if len(hdr) <= fileHeaderSize {
		return checkFileHeader(hdr, nil)
	}
	return checkFileHeader(hdr[:fileHeaderSize], hdr[fileHeaderSize:])
}

// scan reads every block of r after the file header, calls fn with the
// records (aliasing the block) of each intact one, and returns the damage
// it found. It returns an error only if r or fn fails.
func scan(r io.ReaderAt, size int64, fn func(block, []Record) error) (problems []error, err error) {
	br := newBlockReader(io.NewSectionReader(r, fileHeaderSize, max(size-fileHeaderSize, 0)), fileHeaderSize, false)
	br.dict.at, br.dict.size = r, size
	var recs []Record
	for {
		blk, err := br.next()
		if err == io.EOF {
			return problems, nil
		}
		var d *DamageError
		if errors.As(err, &d) {
			problems = append(problems, d)
			continue
		}
		if err != nil {
			return problems, err
		}
		recs, err = blockRecords(blk, recs[:0], nil, true)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if err := fn(blk, recs); err != nil {
			return problems, err
		}
	}
}

// readIndex reads the footer and the index block it points at.
func readIndex(r io.ReaderAt, size int64) (idx *Index, off int64, err error) {
	if size < fileHeaderSize+footerSize {
		return nil, 0, fmt.Errorf("file of %d bytes has no room for a footer", size)
	}
	fb := make([]byte, footerSize)
	if _, err := r.ReadAt(fb, size-footerSize); err != nil {
		return nil, 0, fmt.Errorf("read footer: %w", err)
	}
	off, n, err := parseFooter(fb)
	if err != nil {
		return nil, 0, fmt.Errorf("footer at offset %d: %w", size-footerSize, err)
	}
	if off < fileHeaderSize || n < blockHeaderSize || n > MaxIndexSize+maxBlockHeaderSize || off+n != size-footerSize {
		return nil, 0, fmt.Errorf("footer at offset %d: %w: index at offset %d of %d bytes does not end at the footer", size-footerSize, errCorrupt, off, n)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, off); err != nil {
		return nil, 0, fmt.Errorf("read index at offset %d: %w", off, err)
	}
	h, err := parseBlock(buf, blockIndex)
	if err == nil {
		var payload []byte
		if payload, err = decompress(&h, buf[h.hdrLen:], nil, nil); err == nil {
			if idx, err = decodeIndex(payload); err == nil {
				err = idx.validate(fileHeaderSize, off)
			}
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("index at offset %d: %w", off, err)
	}
	return idx, off, nil
}

// parseBlock parses the header of the whole block b, which must be of type
// typ (blockData: either type of data block) and fill b exactly.
func parseBlock(b []byte, typ uint8) (blockHeader, error) {
	if len(b) < blockPrefixSize {
		return blockHeader{}, fmt.Errorf("%w: block of %d bytes", errCorrupt, len(b))
	}
	n, err := headerLen(b)
	if err != nil {
		return blockHeader{}, err
	}
	if n > len(b) {
		return blockHeader{}, fmt.Errorf("%w: block header of %d bytes in a block of %d", errCorrupt, n, len(b))
	}
	h, err := parseHeader(b[:n])
	if err != nil {
		return h, err
	}
	if h.typ != typ && !(typ == blockData && isData(h.typ)) || h.size() != int64(len(b)) {
		return h, fmt.Errorf("%w: block of type %d and %d bytes where the index says type %d and %d bytes", errCorrupt, h.typ, h.size(), typ, len(b))
	}
	return h, nil
}

// CheckBlocks reads every data block the index lists and checks its header
// and payload checksums, without decompressing: the damage an intact index
// hides (Open reads the index, not the blocks; Scanners find a damaged
// block only when they read it). It returns a *DamageError per damaged
// block, in file order, with Block its position in Index().Blocks; an
// error only if reading fails. It reads the whole file, one block at a
// time (memory: the largest block). Safe for concurrent use.
func (f *File) CheckBlocks() ([]*DamageError, error) {
	var (
		damage []*DamageError
		raw    []byte
	)
	for i, bi := range f.idx.Blocks {
		fail := func(err error) {
			damage = append(damage, &DamageError{Offset: bi.Offset, Block: i, Err: err})
		}
		if bi.Size > MaxBlockSize+maxBlockHeaderSize {
			fail(fmt.Errorf("%w: index says block of %d bytes", errCorrupt, bi.Size))
			continue
		}
		if int64(cap(raw)) < bi.Size {
			raw = make([]byte, bi.Size)
		}
		raw = raw[:bi.Size]
		if n, err := f.r.ReadAt(raw, bi.Offset); n < len(raw) {
			if err == nil || err == io.EOF {
				fail(io.ErrUnexpectedEOF)
				continue
			}
			return damage, fmt.Errorf("formats: read block %d at offset %d: %w", i, bi.Offset, err)
		}
		h, err := parseBlock(raw, blockData)
		if err == nil && h.codec != codecNone && h.codec != codecZstd && h.codec != codecZstdDict {
			err = fmt.Errorf("%w: unknown codec %d", errCorrupt, h.codec)
		}
		if err == nil {
			if got := crc(raw[h.hdrLen:]); got != h.payloadCRC {
				err = fmt.Errorf("payload %w (crc %08x, stored %08x)", errChecksum, got, h.payloadCRC)
			}
		}
		if err != nil {
			fail(err)
		}
	}
	return damage, nil
}

// Index returns the file's index (read or rebuilt). The caller must not modify it.
func (f *File) Index() *Index { return f.idx }

// Clean reports whether the file has a valid footer, index and Summary.
// It does not read the data blocks: a clean file may still hold a block
// that fails its checksum, which its Scanners report.
func (f *File) Clean() bool { return f.clean }

// Problems lists every damage found while opening (each a *DamageError or
// a note about the missing index, wrapping ErrNoIndex), in file order.
func (f *File) Problems() []error { return f.problems }

// Records returns a reader over all records in file order. With an index
// rebuilt by scanning, the damage found while opening is reported again,
// as a *DamageError in its place among the records.
func (f *File) Records() *Scanner {
	blocks := make([]int, len(f.idx.Blocks))
	for i := range blocks {
		blocks[i] = i
	}
	return &Scanner{f: f, blocks: blocks, damage: f.damage}
}

// RecordsFrom is Records without the blocks before the first whose
// records reach time t (its BlockInfo.Last ≥ t): every record timed t or
// later is read, and some before t. Damage found while opening is reported
// as by Records, the damage before the first block read first.
func (f *File) RecordsFrom(t int64) *Scanner {
	start := len(f.idx.Blocks)
	for i, b := range f.idx.Blocks {
		if b.Last >= t {
			start = i
			break
		}
	}
	blocks := make([]int, 0, len(f.idx.Blocks)-start)
	for i := start; i < len(f.idx.Blocks); i++ {
		blocks = append(blocks, i)
	}
	return &Scanner{f: f, blocks: blocks, damage: f.damage}
}

// ExchangeRecords returns a reader over the records of the given exchanges
// (and nothing else), in file order, reading only the blocks that hold them.
// Damage found while opening is reported where it lies between the first
// block of these exchanges and the last (or after it, for an exchange
// without an End). IDs the index does not know are ignored. Scanners of
// several exchanges share a small cache of decompressed blocks, the File's
// (see Scanner.WithCache for another).
func (f *File) ExchangeRecords(ids ...int64) *Scanner {
	s := &Scanner{f: f, filter: recordFilter{}, cache: &f.cache}
	first, last := int64(-1), int64(-1)
	for _, id := range ids {
		pos, ok := f.exPos[id]
		if !ok {
			continue
		}
		x := &f.idx.Exchanges[pos]
		s.filter[id] = true
		s.blocks = append(s.blocks, x.Blocks...)
		if len(x.Blocks) == 0 {
			continue
		}
		b0, b1 := f.idx.Blocks[x.Blocks[0]], f.idx.Blocks[x.Blocks[len(x.Blocks)-1]]
		if first < 0 || b0.Offset < first {
			first = b0.Offset
		}
		end := b1.Offset + b1.Size
		if x.End == nil {
			end = 1<<63 - 1
		}
		last = max(last, end)
	}
	slices.Sort(s.blocks)
	s.blocks = slices.Compact(s.blocks)
	for _, d := range f.damage {
		if first >= 0 && d.Offset >= first && d.Offset < last {
			s.damage = append(s.damage, d)
		}
	}
	return s
}

// Close releases the file. It is safe to call more than once.
func (f *File) Close() error {
	f.once.Do(func() {
		if f.closer != nil {
			f.closeErr = f.closer.Close()
		}
	})
	return f.closeErr
}

// Scanner iterates records of a File. Not safe for concurrent use; open
// several for concurrency.
type Scanner struct {
	f      *File
	blocks []int // indexes into f.idx.Blocks still to read, ascending
	bi     int
	damage []*DamageError // to report among the records, by offset
	di     int
	filter recordFilter
	cache  *BlockCache // nil: blocks are decompressed for this Scanner alone
	recs   []Record
	ri     int
	raw    []byte // a block as read
	buf    []byte // a block decompressed
	err    error  // sticky
}

// Next returns the next record, io.EOF at the end, or a *DamageError
// (sticky with StopOnDamage). The record is the caller's.
func (s *Scanner) Next() (Record, error) {
	for {
		if s.ri < len(s.recs) {
			rec := s.recs[s.ri]
			s.recs[s.ri] = nil
			s.ri++
			return rec, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		// Damage at a block's own offset (its number out of order) comes
		// before it.
		if s.di < len(s.damage) && (s.bi >= len(s.blocks) || s.damage[s.di].Offset <= s.f.idx.Blocks[s.blocks[s.bi]].Offset) {
			d := s.damage[s.di]
			s.di++
			if s.f.stop {
				s.err = d
			}
			return nil, d
		}
		if s.bi >= len(s.blocks) {
			s.err = io.EOF
			return nil, s.err
		}
		i := s.blocks[s.bi]
		s.bi++
		blk, err := s.read(i)
		if err == nil {
			s.recs, err = blockRecords(blk, s.recs[:0], s.filter, false)
			s.ri = 0
		}
		if err != nil {
			var d *DamageError
			if s.f.stop || !errors.As(err, &d) {
				s.err = err
			}
			return nil, err
		}
	}
}

// read reads, checks and decompresses block i of the index.
func (s *Scanner) read(i int) (block, error) {
	bi := s.f.idx.Blocks[i]
	if s.cache != nil {
		if blk, ok := s.cache.get(bi.Offset); ok {
			return blk, nil
		}
		s.raw, s.buf = nil, nil // the cache keeps what is decompressed
	}
	damage := func(err error) (block, error) {
		return block{}, &DamageError{Offset: bi.Offset, Block: i, Err: err}
	}
	if bi.Size > MaxBlockSize+maxBlockHeaderSize {
		return damage(fmt.Errorf("%w: index says block of %d bytes", errCorrupt, bi.Size))
	}
	if int64(cap(s.raw)) < bi.Size {
		s.raw = make([]byte, bi.Size)
	}
	raw := s.raw[:bi.Size]
	if n, err := s.f.r.ReadAt(raw, bi.Offset); n < len(raw) {
		if err == nil || err == io.EOF {
			return damage(io.ErrUnexpectedEOF)
		}
		return block{}, fmt.Errorf("formats: read block %d at offset %d: %w", i, bi.Offset, err)
	}
	h, err := parseBlock(raw, blockData)
	if err != nil {
		return damage(err)
	}
	payload, err := decompress(&h, raw[h.hdrLen:], s.buf, &s.f.dict)
	if err != nil {
		return damage(err)
	}
	if h.codec != codecNone {
		s.buf = payload
	}
	blk := block{off: bi.Offset, hdr: h, payload: payload}
	if s.cache != nil {
		s.cache.put(blk)
	}
	return blk, nil
}

// WithCache makes the Scanner keep the blocks it decompresses in c, and
// take them from c when another Scanner of c already did, instead of the
// File's own cache (nil: in no cache, each block decompressed for this
// Scanner alone). A caller that reads much once — loading a replay's
// world — uses a cache of its own, which it drops when done, so that the
// File's cache holds what is served. It must be called before the first
// Next, and returns s.
func (s *Scanner) WithCache(c *BlockCache) *Scanner {
	s.cache = c
	return s
}

// Limits of the decompressed-block cache a File's exchange Scanners share:
// enough for the blocks a handful of concurrent replays of interleaved
// exchanges are reading: 64 one-second blocks of a live recording, or
// 16 blocks of the 4 MiB a recording of a capture file cuts (a block
// over a quarter of the cache is not kept).
const (
	cacheBytes  = 64 << 20
	cacheBlocks = 64
)

// BlockCache keeps the most recently used decompressed blocks of one File
// for the Scanners that share it (see WithCache): at most maxBytes of
// them and maxBlocks; a block over a quarter of maxBytes is not kept.
// Cached payloads are never written to. It is safe for concurrent use.
// The zero BlockCache has the limits of a File's own cache.
type BlockCache struct {
	mu        sync.Mutex
	blocks    []block // most recently used last
	bytes     int
	maxBytes  int
	maxBlocks int
}

// NewBlockCache returns a cache of at most maxBytes of decompressed
// blocks and maxBlocks blocks (0: a File's own limits).
func NewBlockCache(maxBytes, maxBlocks int) *BlockCache {
	return &BlockCache{maxBytes: maxBytes, maxBlocks: maxBlocks}
}

// Bytes is how many decompressed bytes c holds.
func (c *BlockCache) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// CacheBytes is how many decompressed bytes the File's own block cache
// holds: blocks its exchange Scanners read lately.
func (f *File) CacheBytes() int { return f.cache.Bytes() }

func (c *BlockCache) limits() (bytes, blocks int) {
	bytes, blocks = c.maxBytes, c.maxBlocks
	if bytes <= 0 {
		bytes = cacheBytes
	}
	if blocks <= 0 {
		blocks = cacheBlocks
	}
	return bytes, blocks
}

func (c *BlockCache) get(off int64) (block, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.blocks {
		if b.off == off {
			c.blocks = append(append(c.blocks[:i], c.blocks[i+1:]...), b)
			return b, true
		}
	}
	return block{}, false
}

func (c *BlockCache) put(b block) {
	maxBytes, maxBlocks := c.limits()
	if len(b.payload) > maxBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.blocks {
		if x.off == b.off {
			return
		}
	}
	c.blocks = append(c.blocks, b)
	c.bytes += len(b.payload)
	for len(c.blocks) > maxBlocks || c.bytes > maxBytes {
		c.bytes -= len(c.blocks[0].payload)
		c.blocks[0] = block{}
		c.blocks = c.blocks[1:]
	}
}

// All returns an iterator over the rest of the records, for range loops:
// each record with a nil error; each damaged region as a nil record with
// its *DamageError (the iteration goes on after it unless StopOnDamage);
// and, if reading fails otherwise, a last nil record with that error. It
// ends at the end of the records.
func (s *Scanner) All() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			r, err := s.Next()
			if err == io.EOF {
				return
			}
			if !yield(r, err) {
				return
			}
			var de *DamageError
			if err != nil && (!errors.As(err, &de) || s.f.stop) {
				return
			}
		}
	}
}
