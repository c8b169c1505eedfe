package capture

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
	"time"

	"github.com/wtrace/wtrace/formats"
)

// DefaultSyncInterval is the FileSinkOptions.SyncInterval a zero value
// means.
const DefaultSyncInterval = 10 * time.Second

// Limit reasons passed to FileSinkOptions.OnLimit.
const (
	LimitSize     = "max-size"
	LimitDuration = "max-duration"
)

// FileSinkOptions configure a FileSink. Path (or Out) is required; the
// zero value of everything else writes one file with no limits, fsync'd
// every DefaultSyncInterval.
type FileSinkOptions struct {
	// Path is the session file to write. With Rotate, the files are
	// PartName(Path, 1), PartName(Path, 2), … and Path itself is not
	// written.
	Path string
	// Out, used instead of Path, receives a single session (standard
	// output). It is neither synced nor closed; Rotate is not allowed.
	Out io.Writer
	// Meta is the first record of every file. A part of a rotated
	// recording gets two more Labels: "part" (its number) and, from the
	// second part on, "previous" (the base name of the part before it).
	Meta formats.Meta
	// Writer configures each file's formats.Writer.
	Writer formats.WriterOptions
	// MaxSize ends a file once the blocks written to it reach this many
	// bytes. Blocks are cut every Writer.BlockSize bytes of records (256
	// KiB by default, before compression) and at each Flush, so a file
	// exceeds MaxSize by at most about one block (plus, without Rotate,
	// what is recorded until the recording stops). 0 means no limit.
	MaxSize int64
	// MaxDuration ends a file once it has been open this long (wall
	// clock, checked at each Flush). 0 means no limit.
	MaxDuration time.Duration
	// Rotate makes a limit start the next part instead of calling OnLimit:
	// at once for MaxDuration (parts cover fixed spans of time, even idle
	// ones), with the next record for MaxSize.
	Rotate bool
	// OnLimit is called once, by the goroutine writing records, when a
	// limit is reached and Rotate is off: the recording should stop (the
	// FileSink keeps accepting records until Close). reason is LimitSize or
	// LimitDuration.
	OnLimit func(reason string)
	// OnRotate, if set, is called after each rotation with the name of the
	// finished part and of the new one.
	OnRotate func(finished, next string)
	// SyncInterval is how often Flush also fsyncs the file (Close always
	// does). 0 means DefaultSyncInterval; negative means only at Close.
	SyncInterval time.Duration
	// Counters, if set, returns the packets and capture bytes read so far
	// (cumulative), for each file's Summary.
	Counters func() (packets, bytes int64)
	// Clock is the wall clock for MaxDuration and SyncInterval; nil means
	// time.Now.
	Clock func() time.Time
}

// FileSink is the Sink of a live recording (a Tee, or a Recorder fed by a
// live capture): it writes session files, flushes them on demand, fsyncs
// them now and then, enforces size and duration limits, and rotates to
// numbered files.
//
// It writes each file's Meta and Summary itself: callers write neither.
// Each rotated part is usable on its own: the connections and exchanges
// still open when a part ends are announced again at the start of the next
// one (copies of their Conn, TLS, Request, Response and End records, with
// the same IDs), so the next part's Frames, Body pieces and Ends find
// their exchange. Exchange and connection IDs, and Frame Seq numbers, keep
// counting across parts, as in one session.
//
// Write, Flush and Close must be called from one goroutine (the recording
// goroutine); Size and Names are safe for concurrent use.
type FileSink struct {
	opts  FileSinkOptions
	clock func() time.Time

	part    int
	name    string
	file    *os.File
	out     *fileCounter // what reached the file: blocks, as they are cut
	w       *formats.Writer
	begun   time.Time
	synced  time.Time
	limited bool
	full    bool // MaxSize reached: the next record goes to the next part
	turning bool // re-announcing after a rotation
	closed  bool
	err     error

	sum          formats.Summary // this part's counts
	basePackets  int64
	baseBytes    int64
	conns        map[uint64]*sinkConn
	exchanges    map[int64]*sinkExchange
	finishedSize int64

	mu    sync.Mutex
	size  int64
	names []string
}

type sinkConn struct {
	conn formats.Conn
	tls  *formats.TLS
}

type sinkExchange struct {
	req  formats.Request
	resp *formats.Response
	ends [2]*formats.End
}

// ErrSinkRecord is returned by FileSink.Write for a Meta or Summary
// record: the FileSink writes those itself.
var ErrSinkRecord = errors.New("capture: a FileSink writes Meta and Summary records itself")

// PartName returns the name of part n of a rotated recording written to
// path: "s.wt", 3 → "s-0003.wt" (numbers have at least four digits, so the
// parts sort by name).
func PartName(path string, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%04d%s", strings.TrimSuffix(path, ext), n, ext)
}

// NewFileSink creates the first file and writes its Meta.
func NewFileSink(opts FileSinkOptions) (*FileSink, error) {
	if opts.Out != nil && opts.Rotate {
		return nil, errors.New("capture: a FileSink writing to a stream cannot rotate")
	}
	if opts.Out == nil && opts.Path == "" {
		return nil, errors.New("capture: FileSink needs a Path or an Out")
	}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	fs := &FileSink{opts: opts, clock: opts.Clock, conns: map[uint64]*sinkConn{}, exchanges: map[int64]*sinkExchange{}}
	if fs.clock == nil {
		fs.clock = time.Now
	}
	if err := fs.open(); err != nil {
		return nil, err
	}
	return fs, nil
}

// open starts the next file.
func (fs *FileSink) open() error {
	fs.part++
	prev := fs.name
	out := fs.opts.Out
	fs.file = nil
	if out == nil {
		fs.name = fs.opts.Path
		if fs.opts.Rotate {
			fs.name = PartName(fs.opts.Path, fs.part)
		}
		f, err := os.Create(fs.name)
		if err != nil {
			return err
		}
		fs.file, out = f, f
	} else {
		fs.name = "-"
	}
	fs.out = &fileCounter{w: out}
	w, err := formats.NewWriter(fs.out, fs.opts.Writer)
	if err != nil {
		if fs.file != nil {
			fs.file.Close()
		}
		return err
	}
	fs.w = w
	now := fs.clock()
	fs.begun, fs.synced = now, now
	fs.sum = formats.Summary{}
	if fs.opts.Counters != nil {
		fs.basePackets, fs.baseBytes = fs.opts.Counters()
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
// Errors of the file are sticky.
func (fs *FileSink) Write(r formats.Record) error {
	if fs.err != nil {
		return fs.err
	}
	if fs.closed {
		return errors.New("capture: FileSink is closed")
	}
	switch r.(type) {
	case *formats.Meta, *formats.Summary:
		return ErrSinkRecord
	}
	if fs.full {
		fs.full = false
		fs.rotate(LimitSize)
		if fs.err != nil {
			return fs.err
		}
	}
	fs.track(r)
	if err := fs.write(r); err != nil {
		return err
	}
	if fs.opts.MaxSize > 0 && fs.out.n >= fs.opts.MaxSize {
		fs.limit(LimitSize)
	}
	return fs.err
}

// fileCounter counts the bytes written through it.
type fileCounter struct {
	w io.Writer
	n int64
}

func (c *fileCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// write writes r and counts it in this part's Summary.
func (fs *FileSink) write(r formats.Record) error {
	if err := fs.w.Write(r); err != nil {
		// A record the Writer refuses leaves it usable; a failed write to
		// the file is sticky, and Flush reports it again.
		if ferr := fs.w.Flush(); ferr != nil {
			fs.err = ferr
		}
		return err
	}
	switch r := r.(type) {
	case *formats.Conn:
		fs.sum.Conns++
		fs.seen(r.Time)
	case *formats.Request:
		fs.sum.Exchanges++
		fs.seen(r.Time)
	case *formats.Frame:
		fs.sum.Events++
		fs.seen(r.Time)
	case *formats.Anomaly:
		fs.sum.Anomalies++
		fs.seen(r.Time)
	case *formats.Response:
		fs.seen(r.Time)
	case *formats.Body:
		fs.seen(r.Time)
	case *formats.Chunk:
		fs.seen(r.Time)
	case *formats.End:
		fs.seen(r.Time)
	case *formats.ConnEnd:
		fs.seen(r.Time)
	case *formats.TLS:
		fs.seen(r.Time)
	}
	fs.mu.Lock()
	fs.size = fs.finishedSize + fs.w.Size()
	fs.mu.Unlock()
	return nil
}

func (fs *FileSink) seen(t int64) {
	if t > fs.sum.Time {
		fs.sum.Time = t
	}
}

// track keeps copies of the records that announce what is open.
func (fs *FileSink) track(r formats.Record) {
	switch r := r.(type) {
	case *formats.Conn:
		fs.conns[r.ID] = &sinkConn{conn: *r}
	case *formats.TLS:
		if c := fs.conns[r.Conn]; c != nil {
			t := *r
			c.tls = &t
		}
	case *formats.ConnEnd:
		delete(fs.conns, r.Conn)
		for id, x := range fs.exchanges {
			if x.req.Conn == r.Conn {
				delete(fs.exchanges, id)
			}
		}
	case *formats.Request:
		req := *r
		req.Header = slices.Clone(r.Header)
		fs.exchanges[r.Exchange] = &sinkExchange{req: req}
	case *formats.Response:
		if x := fs.exchanges[r.Exchange]; x != nil {
			resp := *r
			resp.Header = slices.Clone(r.Header)
			x.resp = &resp
		}
	case *formats.End:
		x := fs.exchanges[r.Exchange]
		if x == nil || r.Dir > formats.ServerToClient {
			return
		}
		e := *r
		e.Tail = nil // body bytes belong to the part that carried them
		e.Trailer = slices.Clone(r.Trailer)
		x.ends[r.Dir] = &e
		if x.ends[formats.ServerToClient] != nil && (x.ends[formats.ClientToServer] != nil || x.req.Missing) {
			delete(fs.exchanges, r.Exchange)
		}
	}
}

// limit handles a reached limit.
func (fs *FileSink) limit(reason string) {
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
func (fs *FileSink) rotate(reason string) {
	finished := fs.name
	next := PartName(fs.opts.Path, fs.part+1)
	if err := fs.finish(fmt.Sprintf("%s reached: continued in %s", reason, filepath.Base(next))); err != nil {
		fs.err = err
		return
	}
	if err := fs.open(); err != nil {
		fs.err = err
		return
	}
	fs.turning = true
	defer func() { fs.turning = false }()
	for _, id := range sortedKeys(fs.conns) {
		c := fs.conns[id]
		conn := c.conn
		if fs.write(&conn) != nil {
			return
		}
		if c.tls != nil {
			t := *c.tls
			if fs.write(&t) != nil {
				return
			}
		}
	}
	for _, id := range sortedKeys(fs.exchanges) {
		x := fs.exchanges[id]
		req := x.req
		if fs.write(&req) != nil {
			return
		}
		if x.resp != nil {
			resp := *x.resp
			if fs.write(&resp) != nil {
				return
			}
		}
		for _, e := range x.ends {
			if e != nil {
				end := *e
				if fs.write(&end) != nil {
					return
				}
			}
		}
	}
	if fs.opts.OnRotate != nil {
		fs.opts.OnRotate(finished, fs.name)
	}
}

func sortedKeys[K uint64 | int64, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// finish writes the current part's Summary, closes its writer and syncs
// and closes its file.
func (fs *FileSink) finish(note string) error {
	sum := fs.sum
	sum.Note = note
	if fs.opts.Counters != nil {
		p, b := fs.opts.Counters()
		sum.Packets, sum.Bytes = p-fs.basePackets, b-fs.baseBytes
	}
	if err := fs.w.Write(&sum); err != nil {
		return err
	}
	if err := fs.w.Close(); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.finishedSize += fs.w.Size()
	fs.size = fs.finishedSize
	fs.mu.Unlock()
	if fs.file != nil {
		if err := fs.file.Sync(); err != nil {
			fs.file.Close()
			return err
		}
		if err := fs.file.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the pending block of the current file, fsyncs it when
// SyncInterval has passed since the last sync, and checks MaxSize and
// MaxDuration (rotating, or calling OnLimit).
func (fs *FileSink) Flush() error {
	if fs.err != nil || fs.closed {
		return fs.err
	}
	if err := fs.w.Flush(); err != nil {
		fs.err = err
		return err
	}
	now := fs.clock()
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

// Close writes the last file's Summary (with note, e.g. why the recording
// stopped), its index and footer, and fsyncs and closes it. It returns the
// first error the FileSink met.
func (fs *FileSink) Close(note string) error {
	if fs.closed {
		return fs.err
	}
	fs.closed = true
	if fs.err != nil {
		if fs.file != nil {
			fs.file.Close()
		}
		return fs.err
	}
	if err := fs.finish(note); err != nil {
		fs.err = err
	}
	return fs.err
}

// Size returns the bytes written so far over all files (with the pending
// block's estimated size).
func (fs *FileSink) Size() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.size
}

// Names returns the files written so far, in order.
func (fs *FileSink) Names() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.names)
}

// Part returns the number of the current file (1 for the first).
func (fs *FileSink) Part() int { return fs.part }
