package formats

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtrace/wtrace/internal/outfile"
)

// DefaultSyncInterval is the FileSinkOptions.SyncInterval a zero value
// means.
const DefaultSyncInterval = 10 * time.Second

// Limit names a FileSink limit that was reached.
type Limit uint8

const (
	LimitSize     Limit = 1 // FileSinkOptions.MaxSize
	LimitDuration Limit = 2 // FileSinkOptions.MaxDuration
)

// String returns the name users know the limit by (wtrace record's flag),
// as Summary notes say it: "max-size", "max-duration".
func (l Limit) String() string {
	switch l {
	case LimitSize:
		return "max-size"
	case LimitDuration:
		return "max-duration"
	}
	return "limit " + strconv.Itoa(int(l))
}

// Totals are what a recording's source has read so far, cumulative, for
// each file's Summary.
type Totals struct {
	Packets int64 // packets read (0 for a proxy)
	Bytes   int64 // bytes read: of the capture file as given, of the packets captured live, or proxied
	Last    int64 // capture time of the last packet (or proxied piece)
}

// Ending says how a recording ended, for the last file's Summary.
type Ending struct {
	// Note says why the recording ended before its source did ("stopped
	// by the user", "max-duration reached") or what went wrong; "" when
	// the source ended (the end of a capture file).
	Note string
	// CaptureXXH64 and CaptureSHA256 are the hex XXH64 and SHA-256 of the
	// capture file, when it was read to its end (the SHA-256 only when
	// asked for).
	CaptureXXH64, CaptureSHA256 string
}

// FileSinkOptions configure a FileSink. Path (or Out) is required; the
// zero value of everything else writes one file with no limits, fsync'd
// every DefaultSyncInterval.
type FileSinkOptions struct {
	// Path is the session file to write. With Rotate, the files are
	// PartName(Path, 1), PartName(Path, 2), … and Path itself is not
	// written. Each file is written to a temporary file beside it and
	// renamed into place when it is complete (or, for a recording that
	// calls Flush, at its first Flush: a live recording is then found at
	// its name, readable up to its last block, whatever becomes of the
	// recorder), so that a recording that fails before leaves what the
	// path held untouched.
	Path string
	// Inputs are the files the recording reads (a capture file, a key
	// log, the sessions it is made from). A file the FileSink would
	// create that is one of them — the same path, written another way, a
	// symbolic or hard link to it (os.SameFile) — is refused before
	// anything is written: an *OutputError wrapping ErrOutputIsInput.
	Inputs []string
	// Out, used instead of Path, receives a single session (standard
	// output). It is neither synced nor closed; Rotate is not allowed.
	Out io.Writer
	// Meta is the first record of every file (see NewMeta). Recorded is
	// set to the time each file is created unless set. A part of a
	// rotated recording gets two more Labels: "part" (its number) and,
	// from the second part on, "previous" (the base name of the part
	// before it).
	Meta Meta
	// Writer configures each file's Writer.
	Writer WriterOptions
	// MaxSize ends a file once the blocks written to it reach this many
	// bytes. Blocks are cut every Writer.BlockSize bytes of records (256
	// KiB by default, before compression) and at each Flush, so a file
	// exceeds MaxSize by at most about one block (plus, without Rotate,
	// what is recorded until the recording stops). 0 means no limit.
	MaxSize int64
	// MaxDuration ends a file once it has been open this long (wall
	// clock, checked at each Flush). 0 means no limit. The Summary of a
	// file a limit ended notes it ("max-size reached: continued in …",
	// or Close's Ending).
	MaxDuration time.Duration
	// Rotate makes a limit start the next part instead of calling OnLimit:
	// at once for MaxDuration (parts cover fixed spans of time, even idle
	// ones), with the next record for MaxSize.
	Rotate bool
	// OnLimit is called once, by the goroutine writing records, when a
	// limit is reached and Rotate is off: the recording should stop (the
	// FileSink keeps accepting records until Close).
	OnLimit func(Limit)
	// OnRotate, if set, is called after each rotation with the name of the
	// finished part and of the new one.
	OnRotate func(finished, next string)
	// SyncInterval is how often Flush also fsyncs the file (Close always
	// does). 0 means DefaultSyncInterval; negative means only at Close.
	SyncInterval time.Duration
	// Totals, if set, returns what the source has read so far, for each
	// file's Summary: its Packets and Bytes (this file's share; the first
	// file's share includes what was read before it was created), and a
	// Time no earlier than Last. Without it a Summary counts no packets or
	// bytes, and its Time is that of the file's last record. It is called
	// by the goroutine writing records.
	Totals func() Totals
	// Clock is the wall clock for MaxDuration and SyncInterval; nil means
	// time.Now.
	Clock func() time.Time
}

// FileSink owns the session files of a recording, from any source (a
// Recorder fed by a capture file or a live capture, a Tee fed by the
// proxy): it creates them, writes each file's first record (Meta) and last
// (Summary) — sources write neither, and Write refuses them — flushes them
// on demand, fsyncs them now and then, enforces size and duration limits,
// and rotates to numbered files.
//
// A Summary counts the records of its own file (connections, exchanges,
// events, anomalies) and takes packets, bytes and the capture time from
// FileSinkOptions.Totals; the last one gets Close's Ending.
//
// Each rotated part is usable on its own: the connections and exchanges
// still open when a part ends are announced again at the start of the next
// one (copies of their Conn, TLS, Request, Response and End records, with
// the same IDs), so the next part's Frames, Body pieces and Ends find
// their exchange. Exchange and connection IDs, and Frame Seq numbers, keep
// counting across parts, as in one session.
//
// Records handed to Write are copied as they are encoded (see Sink).
//
// Write, Flush and Close must be called from one goroutine (the recording
// goroutine); Size and Names are safe for concurrent use.
type FileSink struct {
	opts  FileSinkOptions
	clock func() time.Time

	part    int
	name    string
	tmp     *outfile.File // the current file, until it is renamed into place and closed
	file    *os.File      // tmp's file
	out     *fileCounter  // what reached the file: blocks, as they are cut
	w       *Writer
	begun   time.Time
	synced  time.Time
	limited bool
	full    bool // MaxSize reached: the next record goes to the next part
	turning bool // re-announcing after a rotation
	closed  bool
	err     error

	sum          Summary // this part's counts
	base         Totals  // the source's totals when this part began
	openSet      OpenSet // what the next part announces again
	finishedSize int64
	sizeEvery    int // records since size was last updated

	size  atomic.Int64
	mu    sync.Mutex
	names []string
}

// ErrOutputIsInput is wrapped by the *OutputError of a FileSink whose file
// would be one of FileSinkOptions.Inputs.
var ErrOutputIsInput = outfile.ErrInput

// ErrSinkRecord is returned by FileSink.Write for a Meta or Summary
// record: the FileSink writes those itself.
var ErrSinkRecord = errors.New("formats: a FileSink writes Meta and Summary records itself")

// PartName returns the name of part n of a rotated recording written to
// path: "s.wt", 3 → "s-0003.wt" (numbers have at least four digits, so the
// parts sort by name).
func PartName(path string, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%04d%s", strings.TrimSuffix(path, ext), n, ext)
}

// NewFileSink creates the first file and writes its Meta. An error
// creating it is an *OutputError (Created false).
func NewFileSink(opts FileSinkOptions) (*FileSink, error) {
	if opts.Out != nil && opts.Rotate {
		return nil, errors.New("formats: a FileSink writing to a stream cannot rotate")
	}
	if opts.Out == nil && opts.Path == "" {
		return nil, errors.New("capture: FileSink needs a Path or an Out")
	}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	fs := &FileSink{opts: opts, clock: opts.Clock}
	if opts.Rotate { // what is open is tracked for the next part only
	}
	if fs.clock == nil {
		fs.clock = time.Now
	}
	if err := fs.open(); err != nil {
		path := opts.Path
		if opts.Out != nil {
			path = "-"
		}
		return nil, &OutputError{Path: path, Err: err}
	}
	return fs, nil
}

// open starts the next file.
func (fs *FileSink) open() error {
	fs.part++
	prev := fs.name
	out := fs.opts.Out
	fs.tmp, fs.file = nil, nil
	if out == nil {
		fs.name = fs.opts.Path
		if fs.opts.Rotate {
			fs.name = PartName(fs.opts.Path, fs.part)
		}
		if err := outfile.Check(fs.name, fs.opts.Inputs...); err != nil {
			return err
		}
		f, err := outfile.Create(fs.name)
		if err != nil {
			return err
		}
		fs.tmp, fs.file, out = f, f.File, f
	} else {
		fs.name = "-"
	}
	fs.out = &fileCounter{w: out, file: fs.file}
	wopts := fs.opts.Writer
	if fs.opts.MaxSize > 0 {
		// MaxSize is checked against the bytes written after each record:
		// blocks compressed in the background would be counted late, and
		// a part would overshoot by the blocks still queued.
		wopts.Inline = true
	}
	w, err := NewWriter(fs.out, wopts)
	if err != nil {
		if fs.tmp != nil {
			fs.tmp.Abort()
		}
		return err
	}
	fs.w = w
	now := fs.clock()
	fs.begun, fs.synced = now, now
	fs.sum = Summary{}
	if fs.opts.Totals != nil && fs.part > 1 {
		// What the source read before the first file counts in it.
		fs.base = fs.opts.Totals()
	}
	meta := fs.opts.Meta
	if fs.opts.Rotate {
		meta.Labels = make(map[string]string, len(fs.opts.Meta.Labels)+2)
		for k, v := range fs.opts.Meta.Labels {
			meta.Labels[k] = v
		}
		meta.Labels["part"] = strconv.Itoa(fs.part)
		if prev != "" {
			meta.Labels["previous"] = filepath.Base(prev)
		}
	}
	if meta.Recorded == 0 || fs.part > 1 {
		meta.Recorded = now.UnixNano()
	}
	fs.mu.Lock()
	fs.names = append(fs.names, fs.name)
	fs.mu.Unlock()
	return fs.write(&meta)
}

// Write writes r to the current file, keeping what it needs to announce
// open connections and exchanges again after a rotation. A limit reached
// by this record rotates (or calls OnLimit) after it is written.
// Errors of the file are sticky. Errors are *OutputError, but for
// ErrSinkRecord and errSinkClosed (misuse).
func (fs *FileSink) Write(r Record) error { return fs.failed(fs.writeRecord(r)) }

var errSinkClosed = errors.New("capture: FileSink is closed")

// failed returns err as an *OutputError.
func (fs *FileSink) failed(err error) error {
	if err == nil || err == ErrSinkRecord || err == errSinkClosed {
		return err
	}
	return fs.wrap(err)
}

// wrap is failed's slow path (apart, so that failed does not allocate).
func (fs *FileSink) wrap(err error) error {
	var oe *OutputError
	if errors.As(err, &oe) {
		return err
	}
	path := fs.opts.Path
	if fs.opts.Out != nil {
		path = "-"
	}
	return &OutputError{Path: path, Created: true, Err: err}
}

func (fs *FileSink) writeRecord(r Record) error {
	if fs.err != nil {
		return fs.err
	}
	if fs.closed {
		return errSinkClosed
	}
	switch r.(type) {
	case *Meta, *Summary:
		return ErrSinkRecord
	}
	if fs.full {
		fs.full = false
		fs.rotate(LimitSize)
		if fs.err != nil {
			return fs.err
		}
	}
	if fs.opts.Rotate {
		fs.track(r)
	}
	if err := fs.write(r); err != nil {
		return err
	}
	if fs.opts.MaxSize > 0 && fs.out.n >= fs.opts.MaxSize {
		fs.limit(LimitSize)
	}
	return fs.err
}

// fileCounter counts the bytes written through it. Writing to a file, it
// starts the writeback of every writebackEvery bytes as they are written
// (startWriteback), so that the fsync of Close finds little left to write
// and returns soon after the last block.
type fileCounter struct {
	w         io.Writer
	file      *os.File // nil: not a file
	n         int64
	writeback int64 // bytes whose writeback has been started
}

// writebackEvery is how many bytes a FileSink writes between starts of
// their writeback.
const writebackEvery = 4 << 20

func (c *fileCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.file != nil && c.n-c.writeback >= writebackEvery {
		startWriteback(c.file, c.writeback, c.n-c.writeback)
		c.writeback = c.n
	}
	return n, err
}

// write writes r and counts it in this part's Summary.
func (fs *FileSink) write(r Record) error {
	if err := fs.w.Write(r); err != nil {
		// A record the Writer refuses leaves it usable; a failed write to
		// the file is sticky, and Flush reports it again.
		if ferr := fs.w.Flush(); ferr != nil {
			fs.err = ferr
		}
		return err
	}
	switch r := r.(type) {
	case *Conn:
		fs.sum.Conns++
		fs.seen(r.Time)
	case *Request:
		fs.sum.Exchanges++
		fs.seen(r.Time)
	case *Frame:
		fs.sum.Events++
		fs.seen(r.Time)
	case *Anomaly:
		fs.sum.Anomalies++
		fs.seen(r.Time)
	case *Response:
		fs.seen(r.Time)
	case *Body:
		fs.seen(r.Time)
	case *Chunk:
		fs.seen(r.Time)
	case *End:
		fs.seen(r.Time)
	case *ConnEnd:
		fs.seen(r.Time)
	case *TLS:
		fs.seen(r.Time)
	}
	if fs.sizeEvery++; fs.sizeEvery >= sizeEvery {
		// Size takes the Writer's lock: not for every record.
		fs.sizeEvery = 0
		fs.size.Store(fs.finishedSize + fs.w.Size())
	}
	return nil
}

// sizeEvery is how many records pass between updates of what Size
// reports (a few KiB of a recording; exact once the file is closed).
const sizeEvery = 64

func (fs *FileSink) seen(t int64) {
	if t > fs.sum.Time {
		fs.sum.Time = t
	}
}

// track keeps copies of the records that announce what is open.
func (fs *FileSink) track(r Record) { fs.openSet.Track(r) }

// limit handles a reached limit.
func (fs *FileSink) limit(reason Limit) {
	if fs.turning {
		return
	}
	if fs.opts.Rotate {
		if reason == LimitSize {
			// Rotate when the next record comes, so that a recording that
			// stops now does not leave an empty part.
			fs.full = true
			return
		}
		fs.rotate(reason)
		return
	}
	if !fs.limited {
		fs.limited = true
		if fs.opts.OnLimit != nil {
			fs.opts.OnLimit(reason)
		}
	}
}

// rotate ends the current part and starts the next, announcing again what
// is open.
func (fs *FileSink) rotate(reason Limit) {
	finished := fs.name
	next := PartName(fs.opts.Path, fs.part+1)
	if err := fs.finish(Ending{Note: fmt.Sprintf("%s reached: continued in %s", reason, filepath.Base(next))}); err != nil {
		fs.err = err
		return
	}
	if err := fs.open(); err != nil {
		fs.err = err
		return
	}
	// Copies of what is open, in the order it was announced: connections,
	// then exchanges (request, response, ends).
	again := fs.openSet.Again()
	fs.turning = true
	defer func() { fs.turning = false }()
	for _, r := range again {
		if fs.write(r) != nil {
			return
		}
	}
	if fs.opts.OnRotate != nil {
		fs.opts.OnRotate(finished, fs.name)
	}
}

// finish writes the current part's Summary, closes its writer and syncs
// and closes its file.
func (fs *FileSink) finish(end Ending) error {
	sum := fs.sum
	sum.Note, sum.CaptureSHA256, sum.CaptureXXH64 = end.Note, end.CaptureSHA256, end.CaptureXXH64
	if fs.opts.Totals != nil {
		t := fs.opts.Totals()
		sum.Packets, sum.Bytes = t.Packets-fs.base.Packets, t.Bytes-fs.base.Bytes
		sum.Time = max(sum.Time, t.Last)
	}
	if err := fs.w.Write(&sum); err != nil {
		return err
	}
	if err := fs.w.Close(); err != nil {
		return err
	}
	fs.finishedSize += fs.w.Size()
	fs.size.Store(fs.finishedSize)
	if fs.tmp != nil {
		// Synced, closed and renamed into place: complete.
		if err := fs.tmp.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the pending block of the current file, fsyncs it when
// SyncInterval has passed since the last sync, and checks MaxSize and
// MaxDuration (rotating, or calling OnLimit). Errors are *OutputError.
func (fs *FileSink) Flush() error { return fs.failed(fs.flush()) }

func (fs *FileSink) flush() error {
	if fs.err != nil || fs.closed {
		return fs.err
	}
	if err := fs.w.Flush(); err != nil {
		fs.err = err
		return err
	}
	fs.size.Store(fs.finishedSize + fs.w.Size())
	now := fs.clock()
	if fs.tmp != nil {
		// A recording that flushes is live: from its first flush on, its
		// file is at its name (synced then), whatever happens to it.
		if err := fs.tmp.Publish(); err != nil {
			fs.err = err
			return err
		}
	}
	if fs.file != nil && fs.opts.SyncInterval > 0 && now.Sub(fs.synced) >= fs.opts.SyncInterval {
		fs.synced = now
		if err := fs.file.Sync(); err != nil {
			fs.err = err
			return err
		}
	}
	switch {
	case fs.opts.MaxSize > 0 && fs.out.n >= fs.opts.MaxSize:
		fs.limit(LimitSize)
	case fs.opts.MaxDuration > 0 && now.Sub(fs.begun) >= fs.opts.MaxDuration:
		fs.limit(LimitDuration)
	}
	return fs.err
}

// Close writes the last file's Summary (with end: why the recording
// stopped, the capture file's hash), its index and footer, and fsyncs and
// closes it. It returns the first error the FileSink met (an
// *OutputError); a second call returns it again.
func (fs *FileSink) Close(end Ending) error { return fs.failed(fs.close(end)) }

func (fs *FileSink) close(end Ending) error {
	if fs.closed {
		return fs.err
	}
	fs.closed = true
	if fs.err != nil {
		if fs.tmp != nil {
			fs.tmp.Abort() // removed, unless a flush published it
		}
		return fs.err
	}
	if err := fs.finish(end); err != nil {
		fs.err = err
		if fs.tmp != nil {
			fs.tmp.Abort()
		}
	}
	return fs.err
}

// Abort ends a recording that failed: the current file is closed and
// removed — what its path held before stays — unless a Flush had already
// put it in place (it then stays, readable up to its last flushed block).
// Files finished before it (rotated parts) stay. It returns the first
// error the FileSink met, like Close; after Close it does nothing.
func (fs *FileSink) Abort() error {
	if fs.closed {
		return fs.failed(fs.err)
	}
	fs.closed = true
	if fs.tmp != nil {
		fs.tmp.Abort()
	}
	return fs.failed(fs.err)
}

// Size returns the bytes written so far over all files (with the pending
// block's estimated size).
func (fs *FileSink) Size() int64 { return fs.size.Load() }

// Names returns the files written so far, in order.
func (fs *FileSink) Names() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.names)
}

// Part returns the number of the current file (1 for the first).
func (fs *FileSink) Part() int { return fs.part }

// NewMeta returns the Meta a recording's files start with: tool (the
// recorder and its version, "wtrace v0.3.0"), the host name, source
// (SourcePcap, SourceIface, SourceProxy), description, and the
// redaction mode keepSecrets chooses (RedactionDefault, or
// RedactionHeadersOnly when Secret values are kept). The FileSink sets
// Recorded when it creates each file; callers add CaptureFile and Labels.
func NewMeta(tool, source, description string, keepSecrets bool) Meta {
	host, _ := os.Hostname()
	m := Meta{Tool: tool, Host: host, Source: source, Description: description, Redaction: RedactionDefault}
	if keepSecrets {
		m.Redaction = RedactionHeadersOnly
	}
	return m
}

// OutputError is an error of the session files a recording writes, as
// opposed to one of its source: they could not be created (Created false)
// or written. A FileSink's errors are OutputErrors.
type OutputError struct {
	Path    string // the session file (the first one, for a rotated recording); "-" for a stream
	Created bool   // the file existed: the error came while writing, syncing or closing it
	Err     error
}

func (e *OutputError) Error() string {
	if !e.Created {
		return "formats: creating " + e.Path + ": " + e.Err.Error()
	}
	return "formats: writing " + e.Path + ": " + e.Err.Error()
}

func (e *OutputError) Unwrap() error { return e.Err }
