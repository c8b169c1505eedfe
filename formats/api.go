package formats

// API CONTRACT SKELETON — the formats helper replaces these bodies (and may
// split this file), keeping every exported name and signature below. Other
// packages (capture, replay, cmd) are written against exactly this API.

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Limits on what a reader accepts from disk. Every length read from a file is
// checked against one of these before anything is allocated.
const (
	// MaxBlockSize bounds a block's compressed and uncompressed sizes. A block
	// holds whole records; the largest record is a 16 MiB event (Kubernetes'
	// own frame limit) plus small overhead, so 64 MiB leaves room.
	MaxBlockSize = 64 << 20
	// MaxRecordSize bounds one encoded record: a 16 MiB event plus its
	// metadata and prefix bytes.
	MaxRecordSize = 17 << 20
	// MaxIndexSize bounds the index block (uncompressed).
	MaxIndexSize = 512 << 20
)

// Sentinel errors callers branch on.
var (
	ErrNotSession = errors.New("formats: not a wtrace session file")   // bad magic
	ErrVersion    = errors.New("formats: unsupported session version") // newer format
	ErrNoIndex    = errors.New("formats: no index (file not closed cleanly)")
)

// DamageError reports a damaged or cut region of a session file. Everything
// before Offset was read intact.
type DamageError struct {
	Offset  int64 // file offset where the damage starts
	Block   int   // number of the damaged block (0-based), -1 if not in a block
	Skipped int64 // bytes skipped to reach the next intact block (0 if none followed)
	Err     error // what was wrong (io.ErrUnexpectedEOF for a cut file, a checksum mismatch, …)
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("formats: block %d at offset %d: %v", e.Block, e.Offset, e.Err)
}
func (e *DamageError) Unwrap() error { return e.Err }

// WriterOptions configure a Writer. The zero value is ready to use.
type WriterOptions struct {
	// BlockSize is the uncompressed size at which a block is cut. 0 means 256 KiB.
	BlockSize int
	// BlockInterval cuts a block when a record's Time is this much later than
	// the first timed record of the current block. 0 means 1s. Negative disables.
	BlockInterval time.Duration
	// Level is the zstd encoder level; 0 means zstd.SpeedDefault.
	Level int
}

// Writer appends records to a session file. It never rewrites bytes it has
// written: a file whose writer was killed is readable up to its last flushed
// block. A Writer is not safe for concurrent use.
type Writer struct{ _ int }

// NewWriter writes the file header to w and returns a Writer. The first
// record written must be a *Meta.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) { panic("unimplemented") }

// Write adds r to the current block, cutting blocks by size and time. The
// Writer copies what it keeps; r may be reused after Write returns.
func (w *Writer) Write(r Record) error { panic("unimplemented") }

// Flush ends the current block (if not empty) and writes it to the
// underlying writer. It does not call Sync.
func (w *Writer) Flush() error { panic("unimplemented") }

// Size returns the number of bytes written to the underlying writer so far,
// plus the estimated compressed size of the pending block.
func (w *Writer) Size() int64 { panic("unimplemented") }

// Close flushes, then writes the index and the footer. It does not close the
// underlying writer. Write a *Summary before Close so the file records that it
// was closed cleanly.
func (w *Writer) Close() error { panic("unimplemented") }

// Index is what a file's index (or a forward scan, for a file without one)
// says about the session. It is small compared with the file: O(blocks +
// connections + exchanges + anomalies).
type Index struct {
	Meta      *Meta
	Summary   *Summary // nil if the file was not closed cleanly
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

// ConnInfo gathers what is known of one connection.
type ConnInfo struct {
	Conn      Conn
	TLS       *TLS     // nil if plaintext or unknown
	End       *ConnEnd // nil if the file ended first
	Exchanges []int64  // exchange IDs on this connection, in order
	Anomalies int
}

// ExchangeInfo summarises one exchange.
type ExchangeInfo struct {
	Request     Request   // Header included
	Response    *Response // nil if no response head was seen
	RequestEnd  *End
	End         *End             // response end; nil if the file ended first
	Frames      int64            // watch events
	FrameTypes  map[string]int64 // events by type ("ADDED", …), from frame.Peek
	BodyBytes   int64            // response body bytes stored (Body records, or Pre+Data of frames)
	Chunks      int64
	First, Last int64 // times of its first and last record
	Blocks      []int // indexes into Index.Blocks holding any of its records, ascending
	Anomalies   int
}

// ReaderOptions configure reading. The zero value is ready to use.
type ReaderOptions struct {
	// StopOnDamage makes Next return the first DamageError stickily instead
	// of skipping to the next intact block.
	StopOnDamage bool
}

// Reader reads records in file order from a stream (no seeking needed).
// Not safe for concurrent use.
type Reader struct{ _ int }

// NewReader reads and checks the file header from r.
func NewReader(r io.Reader, opts ReaderOptions) (*Reader, error) { panic("unimplemented") }

// Next returns the next record. At the end of the records (the index block,
// or a clean end of file) it returns io.EOF. A damaged or cut region yields a
// *DamageError; unless StopOnDamage, the following call resumes at the next
// intact block.
func (r *Reader) Next() (Record, error) { panic("unimplemented") }

// File is an opened session file with its index. Safe for concurrent use by
// several Scanners.
type File struct{ _ int }

// Open opens a session file: header, then footer and index; if the footer or
// index is missing or damaged it rebuilds the index by scanning forward.
func Open(name string, opts ReaderOptions) (*File, error) { panic("unimplemented") }

// OpenReaderAt is Open for an io.ReaderAt of the given size.
func OpenReaderAt(r io.ReaderAt, size int64, opts ReaderOptions) (*File, error) {
	panic("unimplemented")
}

// Index returns the file's index (read or rebuilt). The caller must not modify it.
func (f *File) Index() *Index { panic("unimplemented") }

// Clean reports whether the file has a valid footer, index and Summary.
func (f *File) Clean() bool { panic("unimplemented") }

// Problems lists every damage found while opening (each a *DamageError or
// a note about the missing index), in file order.
func (f *File) Problems() []error { panic("unimplemented") }

// Records returns a reader over all records in file order.
func (f *File) Records() *Scanner { panic("unimplemented") }

// ExchangeRecords returns a reader over the records of the given exchanges
// (and nothing else), in file order, reading only the blocks that hold them.
func (f *File) ExchangeRecords(ids ...int64) *Scanner { panic("unimplemented") }

// Close releases the file.
func (f *File) Close() error { panic("unimplemented") }

// Scanner iterates records of a File. Not safe for concurrent use; open
// several for concurrency.
type Scanner struct{ _ int }

// Next returns the next record, io.EOF at the end, or a *DamageError.
func (s *Scanner) Next() (Record, error) { panic("unimplemented") }

// Recover copies every intact record of the damaged or unclosed file src into
// a new file written to dst, with a fresh index and footer. It returns what
// was lost.
func Recover(src io.ReaderAt, size int64, dst io.Writer) ([]error, error) {
	panic("unimplemented")
}
