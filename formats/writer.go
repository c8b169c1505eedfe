package formats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// WriterOptions configure a Writer. The zero value is ready to use.
type WriterOptions struct {
	// BlockSize is the uncompressed size at which a block is cut. 0 means
	// 256 KiB; values above MaxBlockSize mean MaxBlockSize.
	BlockSize int
	// BlockInterval cuts a block when a record's Time is this much later than
	// the first timed record of the current block. 0 means 1s. Negative disables.
	BlockInterval time.Duration
	// Inline compresses and writes each block on the calling goroutine.
	// By default a Writer hands full blocks to background goroutines, one
	// compressor per processor (up to 4) and one that writes the blocks
	// in order, so compression overlaps with whatever produces the records
	// and uses every core; the bytes written are the same either way.
	Inline bool
	// Level is the zstd encoder level (zstd.SpeedFastest …
	// zstd.SpeedBestCompression); 0 means zstd.SpeedFastest, so recording
	// keeps up with the capture. On the 500 MB watch soak of
	// docs/BENCHMARKS.md, with the session dictionary, SpeedFastest
	// stores 12.9% of the pcap, SpeedDefault 12.2% for about a quarter more CPU.
	Level int
	// DictSize is the size of the session dictionary (FORMAT.md §4.1):
	// once the session's records reach it, every later block is
	// compressed with its first DictSize bytes as a zstd dictionary. 0
	// means DefaultDictSize; negative disables it (every block stands
	// alone, as in format version 1); at most MaxDictSize.
	DictSize int
	// DictCopyEvery is how many bytes of records lie between copies of
	// the session dictionary (dictionary blocks, FORMAT.md §4.1): one is
	// written right after the block that completes the dictionary, and
	// another after the block that brings the records written since the
	// last copy to this many bytes, so that damage to the first blocks
	// and the first copy together still leaves one; Close writes a last
	// one if the records since the last copy reach a quarter of it.
	// Counted in records, not file bytes, so that the bytes written do not
	// depend on the timing of background compression. 0 means
	// DefaultDictCopyEvery; negative writes the first copy only.
	DictCopyEvery int64
}

// DefaultDictCopyEvery is the DictCopyEvery a zero WriterOptions means.
// A copy costs about what the first DictSize bytes of records cost
// compressed: every 128 MiB of records (a copy at Close after 32 MiB)
// that is at most about 1/32 of the records it follows, and on the 500 MB
// watch soak of docs/BENCHMARKS.md 0.07% of the file per copy.
const DefaultDictCopyEvery = 128 << 20

// DefaultBlockSize is the BlockSize a zero WriterOptions means.
const DefaultBlockSize = 256 << 10

// DefaultBlockInterval is the BlockInterval a zero WriterOptions means.
const DefaultBlockInterval = time.Second

var errClosed = errors.New("formats: writer is closed")

// Writer appends records to a session file. It never rewrites bytes it has
// written: a file whose writer was killed is readable up to its last flushed
// block. Each block (and, at Close, the index and footer) goes to the
// underlying writer in a single Write call, in order, from one goroutine.
// Memory: the pending block, up to maxQueued blocks (16 MiB of records
// at most, when blocks are large) being compressed or waiting to be
// written (each with its compressed form), and the index: the connections and exchanges still open
// (at most maxOpenExchanges of the latter as values), the blocks and
// anomalies, and for each finished connection or exchange its compressed
// index entry (spill.go; a few tens of bytes for a small exchange). A
// Writer is not safe for concurrent use; it owns goroutines (unless
// WriterOptions.Inline) that Close ends.
type Writer struct {
	w         io.Writer
	blockSize int
	interval  int64 // ns; < 0 disables cutting by time
	enc       *zstd.Encoder
	level     zstd.EncoderLevel
	dictSize  int          // 0: no session dictionary
	dictBuf   []byte       // the session dictionary while it is collected
	dict      *sessionDict // once complete
	dictEvery int64        // file bytes between copies of the dictionary
	sinceCopy int64        // record bytes written since the last copy

	n      int64       // bytes written to w (guarded by mu while the goroutine runs)
	err    error       // sticky: the underlying writer failed (guarded by mu)
	failed atomic.Bool // err is set by the output goroutine: Write checks it without mu
	closed bool
	meta   bool // the first record (a Meta) was written

	pending []byte // records of the current block
	prev    int64  // the time of its last timed record: its time chain (FORMAT.md §5.1)
	scratch []byte // a record body being encoded
	out     []byte // a block being written

	// Background compression (unless Inline): cut hands each full block
	// to the compressors through work and, in block order, to the output
	// goroutine through order; the output goroutine waits for each block's
	// compression in turn and writes it. Jobs and their buffers come back
	// through free. queued counts blocks not yet written.
	mu      sync.Mutex
	idle    *sync.Cond
	work    chan *blockJob
	order   chan *blockJob
	free    chan *blockJob
	stopped sync.WaitGroup // the compressors and the output goroutine
	queued  int
	// maxQueue is how many blocks may be queued (maxQueued, fewer
	// when blocks are large: maxQueuedBytes).
	maxQueue int
	done     []BlockInfo // written blocks not yet added to the index

	// Statistics of the pending block.
	records     int
	timed       bool  // it holds a timed record
	firstTimed  int64 // time of its first timed record (for BlockInterval)
	first, last int64 // smallest and largest record time

	seq       uint32 // number of the next block
	blocks    int    // data blocks cut so far: the index's number of the next
	idx       *indexBuilder
	raw, comp int64 // bytes before and after compression, for Size
}

// NewWriter writes the file header to w and returns a Writer. The first
// record written must be a *Meta.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	level := zstd.SpeedFastest
	if opts.Level != 0 {
		level = zstd.EncoderLevel(opts.Level)
		if level < zstd.SpeedFastest || level > zstd.SpeedBestCompression {
			return nil, fmt.Errorf("formats: zstd level %d out of range [%d, %d]", opts.Level, zstd.SpeedFastest, zstd.SpeedBestCompression)
		}
	}
	bs := opts.BlockSize
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	enc, err := encoder(level, windowFor(min(bs, MaxBlockSize)))
	if err != nil {
		return nil, fmt.Errorf("formats: %w", err)
	}
	wr := &Writer{
		w:         w,
		blockSize: opts.BlockSize,
		interval:  int64(opts.BlockInterval),
		enc:       enc,
		level:     level,
		idx:       newIndexBuilder(),
	}
	spillEnc, err := spillEncoder()
	if err != nil {
		return nil, fmt.Errorf("formats: %w", err)
	}
	wr.idx.spill = newSpill(spillEnc)
	if wr.blockSize <= 0 {
		wr.blockSize = DefaultBlockSize
	}
	wr.blockSize = min(wr.blockSize, MaxBlockSize)
	switch {
	case opts.DictSize == 0:
		wr.dictSize = DefaultDictSize
	case opts.DictSize > 0:
		wr.dictSize = min(opts.DictSize, MaxDictSize)
	}
	switch {
	case opts.DictCopyEvery == 0:
		wr.dictEvery = DefaultDictCopyEvery
	case opts.DictCopyEvery > 0:
		wr.dictEvery = opts.DictCopyEvery
	default:
		wr.dictEvery = math.MaxInt64 / 2
	}
	if wr.interval == 0 {
		wr.interval = int64(DefaultBlockInterval)
	}
	if _, err := w.Write(fileHeader()); err != nil {
		return nil, fmt.Errorf("formats: write file header: %w", err)
	}
	wr.n = fileHeaderSize
	wr.idle = sync.NewCond(&wr.mu)
	if !opts.Inline {
		// The first block's buffer, sized for a whole block like every
		// job's (not grown by doubling: 2 blocks' worth copied and
		// dropped on a capture file's 4 MiB blocks).
		wr.pending = make([]byte, 0, wr.blockSize+wr.blockSize/4)
		n := compressors()
		wr.maxQueue = max(2, min(maxQueued, maxQueuedBytes/wr.blockSize))
		wr.work = make(chan *blockJob, maxQueued)
		wr.order = make(chan *blockJob, maxQueued)
		wr.free = make(chan *blockJob, maxQueued+1)
		wr.stopped.Add(n + 1)
		for range n {
			go wr.compress()
		}
		go wr.output()
	}
	return wr, nil
}

// maxQueued bounds the full blocks queued for compression or waiting to
// be written; Write blocks when they are all taken, so memory stays
// bounded when the disk or the compressors are slower than the records.
const maxQueued = 2 * maxEncoders

// maxQueuedBytes bounds the records of the queued blocks when blocks are
// large: at least two blocks may be queued, at most maxQueued.
const maxQueuedBytes = 16 << 20

// compressors is the number of compressing goroutines of a Writer: one per
// processor, up to maxEncoders.
func compressors() int { return max(1, min(runtime.GOMAXPROCS(0), maxEncoders)) }

// blockJob is a full block on its way through the background goroutines:
// raw is compressed into out by a compressor, which then closes done.
type blockJob struct {
	h    blockHeader
	dict *sessionDict // nil: codec 1
	raw  []byte
	out  []byte
	done chan struct{}
}

// compress is a compressing goroutine: it compresses blocks in whatever
// order they come; output writes them in block order.
func (w *Writer) compress() {
	defer w.stopped.Done()
	for j := range w.work {
		j.out = encodeBlock(j.out[:0], w.enc, j.dict, j.h, j.raw)
		close(j.done)
	}
}

// output is the goroutine that writes the compressed blocks in the order
// cut queued them.
func (w *Writer) output() {
	defer w.stopped.Done()
	for j := range w.order {
		<-j.done
		out := j.out
		w.mu.Lock()
		failed := w.err != nil
		w.mu.Unlock()
		var err error
		if !failed {
			_, err = w.w.Write(out)
		}
		w.mu.Lock()
		if failed {
			// Nothing after a failed write is written.
		} else if err != nil {
			w.err = fmt.Errorf("formats: write block %d at offset %d: %w", j.h.seq, w.n, err)
			w.failed.Store(true)
		} else {
			if isData(j.h.typ) {
				w.done = append(w.done, BlockInfo{Offset: w.n, Size: int64(len(out)), Records: j.h.records, First: j.h.first, Last: j.h.last})
			}
			w.n += int64(len(out))
			w.raw += int64(len(j.raw))
			w.comp += int64(len(out))
		}
		w.queued--
		w.idle.Broadcast()
		w.mu.Unlock()
		select {
		case w.free <- j:
		default:
		}
	}
}

// wait blocks until the background goroutine has written every queued
// block, adds them to the index, and returns the sticky error.
func (w *Writer) wait() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.queued > 0 {
		w.idle.Wait()
	}
	w.indexWritten()
	return w.err
}

// written adds the blocks the background goroutine has written since the
// last call to the index, without waiting for those still queued.
func (w *Writer) written() {
	if w.work == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.indexWritten()
}

// indexWritten adds the written blocks to the index. w.mu is held.
func (w *Writer) indexWritten() {
	for _, b := range w.done {
		w.idx.addBlock(b)
	}
	w.done = w.done[:0]
}

func (w *Writer) sticky() error {
	if w.work != nil && !w.failed.Load() {
		return nil // the common case, without taking mu for every record
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Write adds r to the current block, cutting blocks by size and time. A
// cut block is compressed and written in the background (unless Inline)
// while later records go on into the next; Flush waits until it is
// written. Write blocks only when the queue of cut blocks is full. The
// Writer copies what it keeps; r may be reused after Write returns. A record
// that cannot be encoded (too large, not a known type, the first record not
// a *Meta) is an error that leaves the Writer usable; an error of the
// underlying writer is sticky.
func (w *Writer) Write(r Record) error {
	if err := w.sticky(); err != nil {
		return err
	}
	switch {
	case w.closed:
		return errClosed
	case r == nil:
		return errors.New("formats: write of a nil record")
	}
	if !w.meta {
		if _, ok := r.(*Meta); !ok {
			return fmt.Errorf("formats: the first record must be a *Meta, not %T", r)
		}
	}
	t, timed := recordTime(r)
	// t-firstTimed as uint64 cannot overflow when t >= firstTimed.
	if timed && w.timed && w.interval >= 0 && t >= w.firstTimed && uint64(t-w.firstTimed) >= uint64(w.interval) {
		// Cut, not Flush: the block is written as soon as it is
		// compressed, while records go on into the next one. Waiting
		// here would run parsing and compression one after the other.
		if err := w.cut(); err != nil {
			return err
		}
	}
	mark, prev := len(w.pending), w.prev
	var err error
	w.pending, w.scratch, err = appendRecord(w.pending, w.scratch, r, &w.prev)
	if err != nil {
		w.pending = w.pending[:mark]
		return err
	}
	w.meta = true
	if len(w.pending) > MaxBlockSize {
		// A record ≤ MaxRecordSize fits an empty block, so mark > 0. It
		// goes into the next block, its time a difference from none.
		w.pending, w.prev = w.pending[:mark], prev
		if err := w.cut(); err != nil {
			return err
		}
		if w.pending, w.scratch, err = appendRecord(w.pending, w.scratch, r, &w.prev); err != nil {
			return err
		}
	}
	w.idx.add(r, w.blocks)
	w.records++
	if timed {
		if !w.timed {
			w.timed, w.firstTimed, w.first, w.last = true, t, t, t
		}
		w.first, w.last = min(w.first, t), max(w.last, t)
	}
	if len(w.pending) >= w.blockSize {
		return w.cut()
	}
	return nil
}

// Flush ends the current block (if not empty) and writes it, and every
// block before it, to the underlying writer before it returns. It does not
// call Sync.
func (w *Writer) Flush() error {
	if w.closed {
		return errClosed
	}
	if err := w.cut(); err != nil {
		return err
	}
	return w.wait()
}

// cut ends the current block (if not empty): it is written now (Inline) or
// queued for the background goroutine.
func (w *Writer) cut() error {
	if err := w.sticky(); err != nil {
		return err
	}
	if len(w.pending) == 0 {
		return nil
	}
	w.written()
	w.prev = 0 // the next block's time chain starts anew
	if err := w.writeBlock(w.pending); err != nil {
		return err
	}
	if w.work == nil {
		w.pending = w.pending[:0]
	}
	if cap(w.pending) > 4*w.blockSize { // after a huge record
		w.pending, w.scratch, w.out = nil, nil, nil
	}
	return nil
}

// writeBlock writes raw, the records of the pending block, as a data block
// (or queues it: the goroutine then owns raw) and resets the block
// statistics.
func (w *Writer) writeBlock(raw []byte) error {
	h := blockHeader{typ: blockDelta, seq: w.seq, records: w.records}
	if w.timed {
		h.first, h.last = w.first, w.last
	}
	w.seq++
	w.blocks++
	w.records, w.timed, w.firstTimed, w.first, w.last = 0, false, 0, 0, 0
	dict := w.dict
	if err := w.collectDict(raw); err != nil {
		return err
	}
	if err := w.queueBlock(h, dict, raw); err != nil {
		return err
	}
	if w.dict == nil {
		return nil
	}
	if dict == nil {
		// This block completed the dictionary: a copy follows it, before
		// the first block that uses it.
		return w.writeDictCopy()
	}
	if w.sinceCopy += int64(len(raw)); w.sinceCopy >= w.dictEvery {
		return w.writeDictCopy()
	}
	return nil
}

// writeDictCopy writes (or queues) a dictionary block holding the session
// dictionary, and sets when the next is due.
func (w *Writer) writeDictCopy() error {
	out := appendDictBlock(nil, w.enc, w.dict, w.seq)
	w.seq++
	w.sinceCopy = 0
	if w.work != nil {
		j := &blockJob{h: blockHeader{typ: blockDict, seq: w.seq - 1}, out: out, done: make(chan struct{})}
		close(j.done)
		w.reserve()
		w.order <- j
		return nil
	}
	if _, err := w.w.Write(out); err != nil {
		w.err = fmt.Errorf("formats: write block %d at offset %d: %w", w.seq-1, w.n, err)
		return w.err
	}
	w.n += int64(len(out))
	w.comp += int64(len(out))
	return nil
}

// reserve takes a place in the queue of blocks to write, waiting while
// maxQueue blocks are queued.
func (w *Writer) reserve() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.queued >= w.maxQueue {
		w.idle.Wait()
	}
	w.queued++
}

// queueBlock writes the data block h holding raw (or queues it: the
// goroutine then owns raw), compressed with dict if not nil.
func (w *Writer) queueBlock(h blockHeader, dict *sessionDict, raw []byte) error {
	if w.work != nil {
		// The job takes the pending buffer; the Writer takes the job's
		// previous one (a block written earlier) for the next block.
		var j *blockJob
		select {
		case j = <-w.free:
		default:
			j = &blockJob{}
		}
		j.h, j.dict, j.done = h, dict, make(chan struct{})
		if cap(j.raw) < w.blockSize {
			// A new job, or one that carried a dictionary copy: size its
			// buffer for a whole block once, not by doubling per block.
			j.raw = make([]byte, 0, w.blockSize+w.blockSize/4)
		}
		j.raw, w.pending = raw, j.raw[:0]
		w.reserve()
		w.order <- j
		w.work <- j
		return nil
	}
	w.out = encodeBlock(w.out[:0], w.enc, dict, h, raw)
	if _, err := w.w.Write(w.out); err != nil {
		w.err = fmt.Errorf("formats: write block %d at offset %d: %w", h.seq, w.n, err)
		return w.err
	}
	w.idx.addBlock(BlockInfo{Offset: w.n, Size: int64(len(w.out)), Records: h.records, First: h.first, Last: h.last})
	w.n += int64(len(w.out))
	w.raw += int64(len(raw))
	w.comp += int64(len(w.out))
	return nil
}

// collectDict adds the records of a block being written to the session
// dictionary while it is not complete, and makes it once it is: the blocks
// after this one use it.
func (w *Writer) collectDict(raw []byte) error {
	if w.dict != nil || w.dictSize == 0 {
		return nil
	}
	w.dictBuf = append(w.dictBuf, raw[:min(len(raw), w.dictSize-len(w.dictBuf))]...)
	if len(w.dictBuf) < w.dictSize {
		return nil
	}
	d, err := newSessionDict(w.dictBuf, w.level)
	if err != nil {
		return err
	}
	w.dict, w.dictBuf = d, nil
	return nil
}

// Size returns the number of bytes written to the underlying writer so far,
// plus the estimated compressed size of the pending block (at the
// compression ratio of the blocks written so far; 1 before the first).
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := int64(len(w.pending)) + int64(w.queued)*int64(w.blockSize)
	if w.raw > 0 {
		p = p * w.comp / w.raw
	}
	return w.n + p
}

// Close flushes, then writes the index and the footer. It does not close the
// underlying writer. Write a *Summary before Close so the file records that it
// was closed cleanly. After Close every method but Size returns an error;
// a second Close returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	err := w.cut()
	if err == nil && w.dict != nil && w.sinceCopy >= w.dictEvery/4 {
		// A last copy, far from the first blocks, for the codec 2
		// blocks since the last one (a seeking reader finds it).
		err = w.writeDictCopy()
	}
	if err == nil {
		err = w.Flush()
	}
	if w.work != nil {
		close(w.work)
		close(w.order)
		w.stopped.Wait()
		w.work, w.order = nil, nil
	}
	if err != nil {
		return err
	}
	w.closed = true
	out, err := w.idx.writeIndex(w.out[:0], w.enc, w.level, w.seq)
	if err != nil {
		return err
	}
	out = appendFooter(out, w.n, int64(len(out)))
	w.out = nil
	if _, err := w.w.Write(out); err != nil {
		w.err = fmt.Errorf("formats: write index at offset %d: %w", w.n, err)
		return w.err
	}
	w.n += int64(len(out))
	return nil
}

// encoders holds one zstd encoder per level and window, shared by every
// Writer: EncodeAll is safe for concurrent use, and an encoder's tables
// (over 1 MiB at the default level) are worth allocating once per
// process, not once per file. Up to maxEncoders blocks are compressed at
// the same time.
var encoders struct {
	mu sync.Mutex
	m  map[encoderKey]*zstd.Encoder
}

type encoderKey struct {
	level  zstd.EncoderLevel
	window int
}

const maxEncoders = 4

// defaultWindow is zstd's own window (klauspost/compress's default):
// enough for blocks up to its size.
const defaultWindow = 8 << 20

// windowFor returns the zstd window for blocks of n bytes: zstd's own for
// blocks that fit it, else n rounded up to a power of two, so that a match
// may reach back to the start of the block. On the real half-hour soak of
// docs/BENCHMARKS.md (round 5), 16 MiB blocks with a 16 MiB window are
// smaller and cheaper to compress than with the 8 MiB one: the earlier
// versions of an object that an event repeats lie further back.
func windowFor(n int) int {
	if n <= defaultWindow {
		return 0
	}
	w := defaultWindow
	for w < n {
		w <<= 1
	}
	return w
}

// encoder returns the shared encoder of level and window (0: zstd's own).
func encoder(level zstd.EncoderLevel, window int) (*zstd.Encoder, error) {
	encoders.mu.Lock()
	defer encoders.mu.Unlock()
	k := encoderKey{level, window}
	if e := encoders.m[k]; e != nil {
		return e, nil
	}
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), maxEncoders)),
		zstd.WithEncoderCRC(false), // blocks carry their own CRC32-C
	}
	if window > 0 {
		opts = append(opts, zstd.WithWindowSize(window))
	}
	e, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, err
	}
	if encoders.m == nil {
		encoders.m = map[encoderKey]*zstd.Encoder{}
	}
	encoders.m[k] = e
	return e, nil
}

// spillEnc is the encoder of the index spill's segments, shared by every
// Writer: a segment is at most spillSegment bytes, so its window need be
// no larger, and the encoder's history costs a few hundred KiB where the
// blocks' fastest encoder holds 8 MiB per concurrent encoding.
var spillEnc struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

func spillEncoder() (*zstd.Encoder, error) {
	spillEnc.once.Do(func() {
		spillEnc.enc, spillEnc.err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(spillSegment),
			zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false))
	})
	return spillEnc.enc, spillEnc.err
}

// appendFooter appends the footer pointing at the index block at off of
// length n.
func appendFooter(dst []byte, off, n int64) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(off))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // flags
	dst = binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
	return append(dst, footerMagic[:]...)
}

// parseFooter checks a footer and returns where the index block is.
func parseFooter(b []byte) (off, n int64, err error) {
	if len(b) != footerSize || [8]byte(b[24:32]) != footerMagic {
		return 0, 0, errors.New("no footer magic")
	}
	if got, want := crc(b[:20]), binary.LittleEndian.Uint32(b[20:]); got != want {
		return 0, 0, fmt.Errorf("footer %w (crc %08x, stored %08x)", errChecksum, got, want)
	}
	u, v := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if u > 1<<62 || v > 1<<62 {
		return 0, 0, fmt.Errorf("%w: footer index offset %d length %d", errCorrupt, u, v)
	}
	return int64(u), int64(v), nil
}
