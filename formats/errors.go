package formats

import (
	"errors"
	"fmt"
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

// Causes wrapped by a DamageError (unexported: callers branch on
// *DamageError and io.ErrUnexpectedEOF; tests on these).
var (
	errChecksum = errors.New("checksum mismatch")
	errMagic    = errors.New("no block magic")
	errCorrupt  = errors.New("corrupt")
	// Block order (FORMAT.md §9): every block header carries its number.
	errRepeated = errors.New("repeated") // a block whose number was read already: a copied byte range
	errMissing  = errors.New("missing")  // numbers skipped that no damage accounts for
	errOrder    = errors.New("out of order")
	// errFileMagic is a file header whose magic is damaged, in a file
	// whose first block is sound.
	errFileMagic = errors.New("file magic damaged")
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
	s := fmt.Sprintf("formats: block %d at offset %d: %v", e.Block, e.Offset, e.Err)
	if e.Block < 0 {
		s = fmt.Sprintf("formats: offset %d: %v", e.Offset, e.Err)
	}
	if e.Skipped > 0 {
		s += fmt.Sprintf(" (skipped %d bytes to the next intact block)", e.Skipped)
	}
	return s
}

func (e *DamageError) Unwrap() error { return e.Err }

// OpenError is why Open could not open the session file at Path: it does
// not exist or cannot be read, is no session file (ErrNotSession), of a
// newer version (ErrVersion), or too short for its header (a
// *DamageError), which Err says. Hint says what to try next, as the
// wtrace commands print it.
type OpenError struct {
	Path string
	Err  error
}

func (e *OpenError) Error() string {
	if errors.Is(e.Err, ErrNotSession) {
		return e.Path + " is not a wtrace session file"
	}
	return e.Err.Error()
}

func (e *OpenError) Unwrap() error { return e.Err }

// Hint is what to try next: record a session, or check the path and the
// file.
func (e *OpenError) Hint() string {
	if errors.Is(e.Err, ErrNotSession) {
		return "make one with: wtrace record --pcap capture.pcap -o " + e.Path
	}
	return "check the path, or run: wtrace verify " + e.Path
}
