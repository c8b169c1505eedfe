package frame

import "math"

// maxWhitespace bounds the JSON whitespace between two events that a
// Splitter buffers (Event.Pre). The apiserver writes exactly one '\n' after
// each event; a body with more whitespace than this between two events is
// not a watch stream, and Pre must stay bounded like Data.
const maxWhitespace = 64 << 10

// window is the number of bytes a resync candidate needs to be judged: the
// longest JSON anchor `{"type":"MODIFIED"` is 18 bytes, the protobuf checks
// read at most 30 (4 length, 2+8 type, 1+5 object, 1+5 raw, 4 "k8s\x00"),
// the CBOR ones 25 (3 tag, 1 map, 5 "type", 9 BOOKMARK, 7 "object").
const window = 32

// Splitter splits a body, fed incrementally, into events. It does not rely
// on newlines or on how the body was cut into pieces: one Next input may
// hold several events and one event may span many inputs. Not safe for
// concurrent use.
//
// Memory: a Splitter holds at most one partial event (bounded by the event
// size limit, plus up to 64 KiB of JSON whitespace) in a buffer it reuses;
// in steady state Next does not allocate.
type Splitter struct {
	off     int64 // body offset of the next byte Next reads
	skipped int64
	dropped int64  // bytes consumed by a failed event that no buffer holds
	err     *Error // sticky

	// The partial event. start is the body offset of its first byte (the
	// first whitespace byte for JSON, the length prefix for protobuf).
	start int64
	pre   []byte // JSON: whitespace consumed before the event's '{'
	buf   []byte // Data bytes of the partial event
	// CBOR framing state.
	cb *cborState // nil unless the format is CBOR
	// Resync state: pending and replayed bytes (see rsBufs), allocated at
	// the first resync.
	rb *rsBufs

	// Small fields together: an open watch's splitter may live for hours,
	// and its size counts. limit is at most MaxEventSize's order (a
	// larger Options.MaxEventSize is clamped to fit), depth and need are
	// bounded by it.
	limit  int32
	depth  int32 // JSON scanner: brace depth
	need   int32 // protobuf: payload length, once hn == 4
	hdr    [4]byte
	hn     int8 // protobuf: bytes of hdr filled
	format Format
	last   byte // last byte consumed in normal mode (JSON line anchor)
	// JSON scanner state.
	inEvent bool // a '{' was seen
	inStr   bool
	esc     bool
	resync  bool
	rsNL    bool // JSON: the byte before the first unexamined one ends a line
}

// cborState is the CBOR framing state (cbor.go): items owed to
// definite-length containers, open indefinite-length items, a head cut by
// the end of an input, string bytes still to pass, whether only tags were
// read, the bytes of the leading self-described tags (Pre). Only CBOR
// splitters have one.
type cborState struct {
	owed   uint64
	stack  []cborIndef
	head   [9]byte
	hn     int
	skip   uint64
	top    bool
	pre    int
	preEnd bool
}

// rsBufs is the storage of a resync: most splitters never resync, and an
// open watch's splitter may live for hours, so it is not part of every
// Splitter.
type rsBufs struct {
	pend   []byte // consumed bytes not yet judged: a candidate and what follows (< window)
	replay []byte // bytes given back after a match inside pend; parsed before the next input
	pendA  [window]byte
	replA  [window]byte
	win    [2 * window]byte
}

// bufs returns the resync storage, allocating it at the first need.
func (s *Splitter) bufs() *rsBufs {
	if s.rb == nil {
		s.rb = new(rsBufs)
	}
	return s.rb
}

// NewSplitter returns a Splitter for format f (JSON, Protobuf or CBOR).
// For any other format it returns a Splitter whose Next fails with
// ErrSyntax.
func NewSplitter(f Format, opts Options) *Splitter {
	s := &Splitter{format: f, limit: int32(min(opts.MaxEventSize, math.MaxInt32))}
	if s.limit <= 0 {
		s.limit = MaxEventSize
	}
	if opts.Resync {
		s.resync = true
		s.rsNL = true
	}
	if f == CBOR {
		s.cb = new(cborState)
	}
	return s
}

// Next consumes a prefix of p and reports at most one completed event.
// It returns the number of bytes consumed; call again with p[n:] until p is
// empty. When ok is true, ev is an event completed by these bytes; ev's
// slices alias p when the whole event lies in p, else the Splitter's buffer,
// and are valid only until the next call. Partial events are buffered (at
// most the event size limit; a larger event is an *Error wrapping
// ErrTooLarge). Errors are *Error and sticky until Resync.
//
// Without an error, n < len(p) only when ok is true. n may be 0 with ok true
// (an event completed by bytes buffered earlier). On error, n counts the
// bytes consumed up to the problem: for JSON, up to (not including) a bad
// byte between events, or up to one byte past the limit inside an event;
// for protobuf, through the bad length prefix. After Resync the caller goes
// on with p[n:]; the consumed bytes of the failed event count as skipped.
//
// JSON framing follows strings, escapes and brace depth only: it does not
// validate the JSON inside an event. Between events only JSON whitespace
// (RFC 8259 section 2: space, tab, CR, LF) is legal; anything else is an
// *Error wrapping ErrSyntax at the offending byte. A protobuf frame of
// length 0 is ErrSyntax too: a WatchEvent always has a type.
func (s *Splitter) Next(p []byte) (n int, ev Event, ok bool, err error) {
	if s.err != nil {
		return 0, Event{}, false, s.err
	}
	if s.resync {
		m, found := s.scanResync(p)
		if !found {
			return m, Event{}, false, nil
		}
		n2, ev, ok, err := s.feed(p[m:])
		return m + n2, ev, ok, err
	}
	return s.feed(p)
}

// feed parses replayed bytes, then p, in normal mode.
func (s *Splitter) feed(p []byte) (n int, ev Event, ok bool, err error) {
	for s.rb != nil && len(s.rb.replay) > 0 {
		r := s.rb.replay
		m, ev, ok, err := s.step(r)
		s.rb.replay = r[m:]
		if ok || err != nil {
			return 0, ev, ok, err
		}
	}
	return s.step(p)
}

func (s *Splitter) step(p []byte) (n int, ev Event, ok bool, err error) {
	if len(p) == 0 {
		return 0, Event{}, false, nil
	}
	switch s.format {
	case JSON:
		n, ev, ok, err = s.stepJSON(p)
	case Protobuf:
		n, ev, ok, err = s.stepProto(p)
	case CBOR:
		n, ev, ok, err = s.stepCBOR(p)
	default:
		return 0, Event{}, false, s.fail(s.off, errFormat)
	}
	if n > 0 {
		s.last = p[n-1]
	}
	return n, ev, ok, err
}

// fail records a sticky error at body offset off.
func (s *Splitter) fail(off int64, err error) error {
	s.err = &Error{Offset: off, Err: err}
	return s.err
}

// End reports the end of the body. tail is what remains after the last
// event (whitespace, or the bytes of an event the body cut); err is an
// *Error wrapping ErrTruncated if those bytes hold a partial event. tail is
// the caller's (a copy; in resync mode, the Splitter's, valid until its
// next use).
//
// After a sticky error End returns that error and no tail. In resync mode
// tail holds the bytes still being judged as a possible event start, and
// err is nil: nothing shows they begin an event.
//
// End does not change the Splitter: before a gap of known size a caller may
// call End to learn what the gap cut, then SetOffset, Resync and go on.
func (s *Splitter) End() (tail []byte, err error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.resync {
		return s.pending(), nil
	}
	// Bytes given back to the parser but not yet fed: they count as tail.
	var partial bool
	var at int64
	switch s.format {
	case JSON:
		tail = append(tail, s.pre...)
		if s.inEvent {
			partial, at = true, s.start+int64(len(s.pre))
			tail = append(tail, s.buf...)
		}
	case Protobuf:
		if s.hn > 0 {
			partial, at = true, s.start
			tail = append(tail, s.hdr[:s.hn]...)
			tail = append(tail, s.buf...)
		}
	case CBOR:
		if s.inEvent {
			partial, at = true, s.start
			tail = append(tail, s.buf...)
		}
	}
	if r := s.replayed(); len(r) > 0 {
		if !partial {
			partial, at = true, s.off
		}
		tail = append(tail, r...)
	}
	if partial {
		return tail, &Error{Offset: at, Err: ErrTruncated}
	}
	return tail, nil
}

// Resync discards any partial event and the sticky error, and skips input
// until a point where an event clearly begins: for JSON a '{' at the start
// of the body or after a '\n' followed by `"type":"` and one of the five
// event types; for protobuf a length prefix whose payload starts with a
// WatchEvent type field holding one of the five event types. Use it after a
// gap in the body, or for a body captured from its middle.
//
// The discarded partial event counts as skipped. For JSON, the next byte
// counts as a line start if the last byte consumed was '\n' or nothing was
// consumed yet. A protobuf candidate must also hold, after the type, the
// object field whose length ends exactly at the frame's end, a
// RawExtension whose raw field fills it, and the "k8s\x00" envelope magic.
// The first event after a resync has an empty Pre (JSON: the '\n' before it
// counts as skipped).
func (s *Splitter) Resync() {
	s.skipped += int64(len(s.pre)+len(s.buf)+int(s.hn)+len(s.replayed())) + s.dropped
	s.dropped = 0
	s.off += int64(len(s.replayed()))
	s.reset()
	s.err = nil
	if !s.resync {
		s.resync = true
		s.rsNL = s.off == 0 || s.last == '\n'
		s.bufs().pend = s.rb.pendA[:0]
	}
}

// reset clears the partial event state.
func (s *Splitter) reset() {
	s.pre = s.pre[:0]
	s.buf = s.buf[:0]
	s.inEvent, s.depth, s.inStr, s.esc = false, 0, false, false
	s.hn, s.need = 0, 0
	if s.cb != nil {
		*s.cb = cborState{stack: s.cb.stack[:0]}
	}
	if s.rb != nil {
		s.rb.replay = nil
	}
}

// pending returns the bytes resync mode has consumed and not judged yet.
func (s *Splitter) pending() []byte {
	if s.rb == nil {
		return nil
	}
	return s.rb.pend
}

// replayed returns the bytes given back to be parsed before the next input.
func (s *Splitter) replayed() []byte {
	if s.rb == nil {
		return nil
	}
	return s.rb.replay
}

// Skipped returns how many bytes resync mode has discarded so far.
func (s *Splitter) Skipped() int64 { return s.skipped }

// Offset returns the body offset of the next byte Next will read.
func (s *Splitter) Offset() int64 { return s.off + int64(len(s.replayed())) }

// SetOffset sets the body offset of the next byte (after a gap of known size).
// It changes only how offsets are counted: after a gap, call Resync too.
func (s *Splitter) SetOffset(off int64) {
	// Bytes given back for re-parsing were counted already: keep them
	// before the new offset.
	s.off = off - int64(len(s.replayed()))
}
