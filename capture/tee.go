package capture

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// Limits and defaults of a Tee.
const (
	// DefaultTeeQueue is the TeeOptions.Queue a zero value means: pieces of
	// connection bytes waiting for the recording goroutine.
	DefaultTeeQueue = 256
	// maxTeePiece bounds the bytes of one queued piece; larger Data calls
	// are split. With the default queue, at most 16 MiB wait at once.
	maxTeePiece = 64 << 10
	// DefaultFlushInterval is the TeeOptions.FlushInterval a zero value
	// means: a crash loses at most about this much of the recording.
	DefaultFlushInterval = time.Second
)

// Flusher is a Sink that can push the records it holds to its file
// (formats.Writer, formats.FileSink). A live recording calls Flush at least every
// flush interval so that a crash loses little.
type Flusher interface {
	Flush() error
}

// TeeOptions configure a Tee. The zero value redacts Secret values, flushes
// every second and queues at most DefaultTeeQueue pieces.
type TeeOptions struct {
	// KeepSecrets stores Secret values as seen (see
	// Options.KeepSecrets). Credentials in headers and queries are never
	// stored.
	KeepSecrets bool
	// FlushInterval is how often the recording goroutine flushes a sink
	// that is a Flusher, and calls OnTick. 0 means DefaultFlushInterval.
	FlushInterval time.Duration
	// Queue bounds the pieces of bytes waiting for the recording goroutine
	// (each at most 64 KiB): TeeConn.Data blocks while it is full, so a
	// recording that cannot keep up slows the connections down instead of
	// losing bytes. 0 means DefaultTeeQueue.
	Queue int
	// OnTick, if set, is called by the recording goroutine after each
	// periodic flush, with the statistics so far (for progress displays).
	// It must not block for long: recording waits for it.
	OnTick func(Stats)
	// Clock returns the time stamped on bytes; nil means time.Now. Tests
	// inject a fake.
	Clock func() time.Time
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
}

// Tee records connections whose bytes are handed to it directly, by a proxy
// that sits between clients and a server: the bytes go through the same
// HTTP/1.1 and HTTP/2 parsers, exchange builder and redaction as bytes
// reassembled from packets, and the records go to a Sink.
//
// A Tee owns one recording goroutine, which alone touches the session and
// the Sink; connections hand it copies of their bytes through a bounded
// queue. Each piece of bytes is stamped with the time it was handed over
// (when the proxy read it from, or wrote it to, its client). The goroutine
// flushes the Sink (if it is a Flusher) every FlushInterval.
//
// NewTee starts the goroutine; Close stops it. Done tells when the
// recording broke (the Sink failed) or ended. A Tee and its TeeConns are
// safe for concurrent use.
type Tee struct {
	s     *session
	sink  Sink
	opts  TeeOptions
	log   *slog.Logger
	clock func() time.Time

	mu     sync.RWMutex // senders hold it for reading while they enqueue
	closed bool
	q      chan teeItem
	done   chan struct{} // closed when run returns
	// stopped is closed when the Tee stops recording: the Sink failed, or
	// run returned.
	stopped  chan struct{}
	stopOnce sync.Once

	open map[*TeeConn]struct{} // goroutine-owned

	statsMu sync.Mutex
	stats   Stats
	err     error
}

type teeOp uint8

const (
	teeOpen teeOp = iota
	teeData
	teeClose
	teeNote
)

type teeItem struct {
	c      *TeeConn
	op     teeOp
	dir    formats.Direction
	reason formats.ConnEndReason
	t      int64
	data   []byte
	buf    *[]byte // data's pooled buffer, returned once data is recorded
	note   string  // teeNote's
}

// Pieces are copied into pooled buffers of two sizes: the parsers and
// the Sink copy what they keep (as they must with packet buffers too), so
// a buffer is free again once its piece is recorded.
const smallTeePiece = 4 << 10

var teeBufs = [2]sync.Pool{
	{New: func() any { b := make([]byte, smallTeePiece); return &b }},
	{New: func() any { b := make([]byte, maxTeePiece); return &b }},
}

func teeBuf(n int) *[]byte {
	if n <= smallTeePiece {
		return teeBufs[0].Get().(*[]byte)
	}
	return teeBufs[1].Get().(*[]byte)
}

func putTeeBuf(b *[]byte) {
	if len(*b) == smallTeePiece {
		teeBufs[0].Put(b)
	} else {
		teeBufs[1].Put(b)
	}
}

// NewTee returns a Tee writing to sink and starts its recording goroutine.
// Like a Recorder it writes neither the session's Meta nor its Summary:
// the formats.FileSink that owns the session file does (see proxy.Record). As with
// a Recorder, the records handed to sink share memory with the Tee's
// buffers: they are valid only during Write (see Sink).
func NewTee(sink Sink, opts TeeOptions) *Tee {
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultTeeQueue
	}
	t := &Tee{
		s:       newSession(sink, opts.KeepSecrets),
		sink:    sink,
		opts:    opts,
		log:     opts.Logger,
		clock:   opts.Clock,
		q:       make(chan teeItem, opts.Queue),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		open:    map[*TeeConn]struct{}{},
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.clock == nil {
		t.clock = time.Now
	}
	go t.run()
	return t
}

// Conn announces a new connection from client to server ("ip:port") that
// speaks proto: "http/1.1", or "h2" / "h2c" for HTTP/2 (the bytes after
// any TLS, i.e. plaintext). The connection's Conn record carries the time
// of this call. After Tee.Close, the TeeConn ignores what it is given.
func (t *Tee) Conn(client, server, proto string) *TeeConn {
	c := &TeeConn{t: t, client: client, server: server, proto: proto}
	t.send(teeItem{c: c, op: teeOpen, t: t.clock().UnixNano()})
	return c
}

// send enqueues it, blocking while the queue is full. It reports false
// (and drops it) once the Tee is closed.
func (t *Tee) send(it teeItem) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return false
	}
	t.q <- it
	return true
}

// Stats returns what the Tee has recorded so far (Bytes counts the bytes
// of both directions handed to it; Packets stays 0). It lags the
// connections by the queued pieces.
func (t *Tee) Stats() Stats {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	return t.stats
}

// Done returns a channel that is closed when the Tee stops recording:
// when writing to the Sink fails (the connections carry on, unrecorded;
// Err says why), or once Close has recorded everything.
func (t *Tee) Done() <-chan struct{} { return t.stopped }

// Err returns the Sink's error, if writing failed (sticky): the recording
// is then broken, although the connections carry on.
func (t *Tee) Err() error {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	return t.err
}

// Close stops accepting bytes, records everything queued, ends every
// connection still open (its exchanges end as truncated, the connection
// as ConnCaptureEnd), flushes the Sink if it is a Flusher, and returns the
// Sink's error, if any. Bytes handed to TeeConns after Close are not
// recorded. It waits for the recording goroutine; a second call returns
// the same error.
func (t *Tee) Close() error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.q)
	}
	t.mu.Unlock()
	<-t.done
	return t.Err()
}

// run is the recording goroutine.
func (t *Tee) run() {
	defer close(t.done)
	defer t.stop()
	tick := time.NewTicker(t.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-t.q:
			if !ok {
				t.finishAll()
				t.flush()
				t.snapshot()
				return
			}
			t.handle(it)
			if it.buf != nil {
				putTeeBuf(it.buf)
			}
			t.snapshot()
		case <-tick.C:
			t.flush()
			st := t.snapshot()
			if t.opts.OnTick != nil {
				t.opts.OnTick(st)
			}
		}
	}
}

func (t *Tee) snapshot() Stats {
	t.statsMu.Lock()
	t.stats = *t.s.stats
	failed := t.err == nil && t.s.err != nil
	if failed {
		t.log.Debug("tee: writing the session failed; recording stopped", "err", t.s.err)
	}
	t.err = t.s.err
	st := t.stats
	t.statsMu.Unlock()
	if failed {
		t.stop()
	}
	return st
}

// stop closes the channel Done returns, once.
func (t *Tee) stop() { t.stopOnce.Do(func() { close(t.stopped) }) }

func (t *Tee) flush() {
	if f, ok := t.sink.(Flusher); ok && t.s.err == nil {
		if err := f.Flush(); err != nil {
			t.s.err = err
		}
	}
}

func (t *Tee) handle(it teeItem) {
	c := it.c
	st := t.s.stats
	if st.First == 0 || it.t < st.First {
		st.First = it.t
	}
	if it.t > st.Last {
		st.Last = it.t
	}
	switch it.op {
	case teeOpen:
		c.start(it.t)
		t.open[c] = struct{}{}
	case teeData:
		if c.ended {
			return
		}
		c.bytes[it.dir] += int64(len(it.data))
		c.last = it.t
		st.Bytes += int64(len(it.data))
		if c.h != nil {
			c.h.data(it.dir, it.data, it.t)
		}
	case teeNote:
		if n, ok := c.h.(answerNoter); ok && !c.ended {
			n.noteAnswer(it.note)
		}
	case teeClose:
		if c.ended {
			return
		}
		delete(t.open, c)
		c.end(it.reason, formats.EndComplete, it.t)
	}
}

// finishAll ends the connections still open when the recording stops.
func (t *Tee) finishAll() {
	now := t.clock().UnixNano()
	for c := range t.open {
		c.end(formats.ConnCaptureEnd, formats.EndTruncated, max(now, c.last))
	}
	t.open = nil
}

// TeeConn is one proxied connection of a Tee. Its methods are safe for
// concurrent use (a proxy reads and writes from different goroutines);
// bytes are recorded in the order the calls are made.
type TeeConn struct {
	t              *Tee
	client, server string
	proto          string
	closeOnce      sync.Once

	// Owned by the recording goroutine.
	id    uint64
	h     protoHandler
	bytes [2]int64
	last  int64
	ended bool
}

// Data records bytes of direction dir: ClientToServer for bytes the proxy
// read from its client, ServerToClient for bytes it wrote to it. Data
// copies p and stamps it with the current time. It blocks while the Tee's
// queue is full. Calls after Close (of the TeeConn or the Tee) are ignored.
func (c *TeeConn) Data(dir formats.Direction, p []byte) {
	if len(p) == 0 {
		return
	}
	now := c.t.clock().UnixNano()
	for len(p) > 0 {
		n := min(len(p), maxTeePiece)
		buf := teeBuf(n)
		b := (*buf)[:n]
		copy(b, p[:n])
		if !c.t.send(teeItem{c: c, op: teeData, dir: dir, t: now, data: b, buf: buf}) {
			putTeeBuf(buf)
			return
		}
		p = p[n:]
	}
}

// Note adds msg to the note of the response being answered on the
// connection (the newest request's, once its bytes were handed to Data):
// the note of that response's End record, which says how it was answered
// (the replay's run file: "replay answer: recorded exchange 12"). It has
// no effect on a connection that is not HTTP/1.1 or has no request yet.
func (c *TeeConn) Note(msg string) {
	if msg != "" {
		c.t.send(teeItem{c: c, op: teeNote, note: msg, t: c.t.clock().UnixNano()})
	}
}

// Close ends the connection: reason is how (formats.ConnClosed for a
// connection closed by either peer). Open exchanges end as the HTTP
// framing says (a body cut short ends as closed). Only the first call
// counts.
func (c *TeeConn) Close(reason formats.ConnEndReason) {
	c.closeOnce.Do(func() {
		c.t.send(teeItem{c: c, op: teeClose, reason: reason, t: c.t.clock().UnixNano()})
	})
}

// start announces the connection (recording goroutine).
func (c *TeeConn) start(t int64) {
	s := c.t.s
	c.id = s.nextConn
	c.last = t
	s.nextConn++
	s.stats.Conns++
	proto := c.proto
	switch proto {
	case "http/1.1", "":
		proto = "http/1.1"
		c.h = newH1Conn(s, c.id, [2]bool{})
	case "h2", "h2c":
		c.h = newH2Conn(s, c.id)
	}
	s.emit(&formats.Conn{ID: c.id, Time: t, Client: c.client, Server: c.server, Proto: proto})
	if c.h == nil {
		s.anomaly(c.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyUnknown, 0, 0,
			fmt.Sprintf("protocol %q is not supported by the tee; the connection's bytes are not recorded", c.proto))
	}
}

// end finishes the connection once (recording goroutine): both directions
// end (as a FIN would end them), then whatever is still open ends with st.
func (c *TeeConn) end(reason formats.ConnEndReason, st formats.EndStatus, t int64) {
	c.ended = true
	if c.h != nil {
		if st == formats.EndComplete {
			c.h.fin(formats.ClientToServer, t)
			c.h.fin(formats.ServerToClient, t)
		}
		c.h.finish(st, t)
	}
	c.t.s.emit(&formats.ConnEnd{Conn: c.id, Time: t, Reason: reason,
		ClientBytes: c.bytes[formats.ClientToServer], ServerBytes: c.bytes[formats.ServerToClient]})
}

// TeeFiles is a Tee writing into session files: how every recording of
// bytes handed over by a server (record --proxy, replay --out) is wired.
// Close ends both, in the order that loses nothing.
type TeeFiles struct {
	*Tee
	files *formats.FileSink
}

// NewTeeFiles creates the session files (out: Path or Out, Meta, the
// Writer's options, limits) and a Tee (opts) writing into them. The files'
// Totals are the Tee's: the bytes it was handed and the time of the last.
// Errors of the files are *formats.OutputError.
func NewTeeFiles(out formats.FileSinkOptions, opts TeeOptions) (*TeeFiles, error) {
	tf := &TeeFiles{}
	out.Totals = func() formats.Totals {
		if tf.Tee == nil { // the first file is created before the Tee
			return formats.Totals{}
		}
		st := tf.Tee.Stats()
		return formats.Totals{Bytes: st.Bytes, Last: st.Last}
	}
	fs, err := formats.NewFileSink(out)
	if err != nil {
		return nil, err
	}
	tf.files = fs
	tf.Tee = NewTee(fs, opts)
	return tf, nil
}

// Close closes the Tee (what is still queued is recorded; exchanges still
// open end as cut by the end of the recording), then the files, the last
// Summary saying note. It returns what was recorded: the Tee's Stats,
// note, the Files and their Size.
func (tf *TeeFiles) Close(note string) (Result, error) {
	teeErr := tf.Tee.Close()
	res := Result{Stats: tf.Tee.Stats(), Note: note}
	closeErr := tf.files.Close(formats.Ending{Note: note})
	res.Files, res.Size = tf.files.Names(), tf.files.Size()
	if teeErr != nil {
		return res, teeErr
	}
	return res, closeErr
}
