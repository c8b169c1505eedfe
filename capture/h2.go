package capture

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wtrace/wtrace/formats"
)

// Limits of the HTTP/2 parser (RFC 9113). Each bounds what one connection
// holds, whatever the bytes say.
const (
	// h2FrameHeaderLen is the fixed frame header: length, type, flags,
	// stream ID (RFC 9113 §4.1).
	h2FrameHeaderLen = 9
	// h2DefaultMaxFrame is SETTINGS_MAX_FRAME_SIZE's initial value (RFC
	// 9113 §6.5.2): the largest frame payload a peer may send until the
	// receiver's SETTINGS raise it. The receiver may raise it to at most
	// 2^24-1, so a frame buffer never exceeds 16 MiB + 9 bytes.
	h2DefaultMaxFrame = 1 << 14
	// maxH2HeaderBlock bounds a header block (HEADERS or PUSH_PROMISE and
	// its CONTINUATION fragments) buffered before decoding: MaxHeadSize,
	// which is also Go's http.DefaultMaxHeaderBytes, the limit a Go
	// server (the kube-apiserver) puts on what it accepts.
	maxH2HeaderBlock = MaxHeadSize
	// maxH2HeaderList bounds the decoded header list of one block, counted
	// like SETTINGS_MAX_HEADER_LIST_SIZE (name + value + 32 per field, RFC
	// 9113 §6.5.2): HPACK's indexed fields let a small block expand a lot.
	// Fields beyond it (or beyond maxHeaderFields) are decoded, to keep the
	// dynamic table in step, but not kept.
	maxH2HeaderList = MaxHeadSize
	// h2DefaultTableSize is SETTINGS_HEADER_TABLE_SIZE's initial value
	// (RFC 9113 §6.5.2, RFC 7541 §4.2).
	h2DefaultTableSize = 4096
	// maxH2TableSize caps the HPACK dynamic table of one direction
	// whatever its receiver advertised: Go and most servers advertise 4
	// KiB, browsers 64 KiB. An encoder that asks for more fails decoding,
	// and the connection is no longer parsed (an anomaly says so).
	maxH2TableSize = 1 << 20
	// maxH2Streams bounds the streams tracked at once on one connection.
	// Servers advertise SETTINGS_MAX_CONCURRENT_STREAMS of 100 to 1000
	// (Go's default is 250); streams beyond it are not recorded.
	maxH2Streams = 4096
	// maxH2Notes bounds the minor anomalies (frames on unknown streams,
	// ignored trailers, …) recorded per connection: hostile bytes could
	// otherwise cause one per 9-byte frame.
	maxH2Notes = 64
	// h2KeepBuf is the largest buffer a direction keeps while idle; after
	// a larger frame or header block its memory is released.
	h2KeepBuf = 64 << 10
)

// h2Conn parses both directions of an HTTP/2 connection (RFC 9113), from
// its very first bytes (the client preface), into exchanges: one per
// stream. Each direction is cut into whole frames (buffered across calls,
// bounded by the receiver's SETTINGS_MAX_FRAME_SIZE), which the x/net
// Framer parses; header blocks are reassembled from HEADERS and
// CONTINUATION frames and decoded with one HPACK decoder per direction.
//
// After a gap in a direction its framing is found again and open response
// bodies go on, but its header blocks can no longer be decoded (see
// h2_resync.go). Bytes that break the framing or the header compression
// end every open stream and stop the parsing of the connection; the bytes
// that follow are counted and reported when the connection finishes. It is
// driven by one goroutine.
type h2Conn struct {
	s          *session
	id         uint64
	d          [2]h2Dir
	streams    map[uint32]*h2Stream
	lastClient uint32 // highest client-initiated stream ID seen
	notes      int

	dead     bool              // parsing stopped
	deadDir  formats.Direction // where
	deadOff  int64             // at which offset of deadDir's stream
	unparsed int64             // bytes received after parsing stopped, both directions
}

// h2Stream is one stream and its exchange.
type h2Stream struct {
	id       uint32
	x        *exchange
	reqDone  bool  // the request direction ended (END_STREAM, reset, …)
	resp     bool  // the final response head was seen
	respDone bool  // the response direction ended
	off      int64 // response body bytes so far
}

// h2Dir is one direction's framing and header decompression state.
type h2Dir struct {
	c   *h2Conn
	dir formats.Direction

	preface int    // client preface bytes checked so far
	pos     int64  // stream offset of the next frame (the first byte of buf)
	buf     []byte // a frame received in part
	fin     bool

	// maxFrame is the largest payload this direction may carry: the
	// largest SETTINGS_MAX_FRAME_SIZE its receiver advertised (a
	// decrease only applies once acknowledged; a passive observer is
	// lenient).
	maxFrame  uint32
	tableSize uint32 // allowed HPACK table size, likewise
	rd        sliceReader
	fr        *http2.Framer
	dec       *hpack.Decoder

	// The header block being assembled.
	blkOn       bool
	blk         []byte
	blkStream   uint32
	blkEnd      bool // the HEADERS frame had END_STREAM
	blkPush     bool // a PUSH_PROMISE block
	blkPromised uint32
	blkOff      int64

	// After a gap (h2_resync.go): the header blocks of this direction can
	// no longer be decoded; while resync is set, rbuf holds the bytes
	// searched for a frame boundary, skipped counts those passed over.
	hpackLost bool
	resync    bool
	rbuf      []byte
	skipped   int64

	// The fields of the block being decoded.
	fields   []hpack.HeaderField
	listSize int
	dropped  bool
}

// sliceReader hands the Framer the frame it is to read.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// newH2Conn returns the handler of an HTTP/2 connection whose bytes start
// at the beginning: plaintext with prior knowledge (h2c), or TLS with ALPN
// "h2" after decryption. The client's bytes must begin with the connection
// preface.
func newH2Conn(s *session, id uint64) *h2Conn {
	c := &h2Conn{s: s, id: id, streams: map[uint32]*h2Stream{}}
	for i := range c.d {
		d := &c.d[i]
		d.c = c
		d.dir = formats.Direction(i)
		d.maxFrame = h2DefaultMaxFrame
		d.tableSize = h2DefaultTableSize
		d.newFramer()
		d.dec = hpack.NewDecoder(h2DefaultTableSize, d.emit)
		d.dec.SetMaxStringLength(maxH2HeaderList)
	}
	c.d[formats.ServerToClient].preface = len(h2Preface)
	return c
}

func (d *h2Dir) newFramer() {
	d.fr = http2.NewFramer(nil, &d.rd)
	d.fr.SetReuseFrames()
	d.fr.SetMaxReadFrameSize(d.maxFrame)
}

func (c *h2Conn) data(dir formats.Direction, p []byte, t int64) {
	if c.dead {
		c.unparsed += int64(len(p))
		return
	}
	d := &c.d[dir]
	if d.resync {
		d.resyncFeed(p, t)
		return
	}
	if d.preface < len(h2Preface) {
		n := min(len(p), len(h2Preface)-d.preface)
		i := 0
		for i < n && p[i] == h2Preface[d.preface+i] {
			i++
		}
		d.preface += i
		d.pos += int64(i)
		p = p[i:]
		if i < n {
			c.fatal(dir, t, formats.AnomalyMalformed, d.pos, formats.EndError,
				"the client's bytes do not begin with the HTTP/2 connection preface (RFC 9113 §3.4)")
			c.unparsed += int64(len(p))
			return
		}
	}
	d.feed(p, t)
}

// feed cuts p into frames, buffering a frame that p does not complete.
// Frames wholly inside p are parsed from p itself.
func (d *h2Dir) feed(p []byte, t int64) {
	c := d.c
	for len(p) > 0 && !c.dead && c.s.err == nil {
		if len(d.buf) > 0 || len(p) < h2FrameHeaderLen {
			if n := h2FrameHeaderLen - len(d.buf); n > 0 {
				n = min(n, len(p))
				d.buf = append(d.buf, p[:n]...)
				p = p[n:]
				if len(d.buf) < h2FrameHeaderLen {
					return
				}
			}
			size, ok := d.frameSize(d.buf, t)
			if !ok {
				break
			}
			if cap(d.buf) < size {
				// The length is within the receiver's limit: allocate
				// the frame once.
				b := make([]byte, len(d.buf), size)
				copy(b, d.buf)
				d.buf = b
			}
			n := min(size-len(d.buf), len(p))
			d.buf = append(d.buf, p[:n]...)
			p = p[n:]
			if len(d.buf) < size {
				return
			}
			// The frame is no longer a partial one: take it out of buf
			// (reusing the buffer afterwards unless it is large).
			fb := d.buf
			d.buf = nil
			d.frame(fb, t)
			d.pos += int64(size)
			if cap(fb) <= h2KeepBuf && !c.dead {
				d.buf = fb[:0]
			}
			continue
		}
		size, ok := d.frameSize(p, t)
		if !ok {
			break
		}
		if len(p) < size {
			if cap(d.buf) < size {
				d.buf = make([]byte, 0, size)
			}
			d.buf = append(d.buf[:0], p...)
			return
		}
		d.frame(p[:size], t)
		d.pos += int64(size)
		p = p[size:]
	}
	if c.dead {
		c.unparsed += int64(len(p))
	}
}

// frameSize returns the length of the frame whose header starts h, or
// stops the parsing if the frame is longer than its receiver allows (RFC
// 9113 §4.2: a FRAME_SIZE_ERROR).
func (d *h2Dir) frameSize(h []byte, t int64) (int, bool) {
	n := uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2])
	if n > d.maxFrame {
		d.c.fatal(d.dir, t, formats.AnomalyMalformed, d.pos, formats.EndError,
			fmt.Sprintf("http2 %s: %s frame of %d bytes on stream %d is larger than the receiver's SETTINGS_MAX_FRAME_SIZE %d",
				d.dir, http2.FrameType(h[3]), n, streamID(h), d.maxFrame))
		return 0, false
	}
	return h2FrameHeaderLen + int(n), true
}

func streamID(h []byte) uint32 {
	return (uint32(h[5])<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8])) & (1<<31 - 1)
}

// frame parses one whole frame (header and payload) and acts on it. t is
// the time of the input that completed it.
func (d *h2Dir) frame(b []byte, t int64) {
	c := d.c
	d.rd.b = b
	f, err := d.fr.ReadFrame()
	if err != nil {
		d.frameError(b, err, t)
		return
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		c.onData(d, f.StreamID, f.Data(), f.StreamEnded(), t)
	case *http2.HeadersFrame:
		d.startBlock(f.StreamID, f.HeaderBlockFragment(), f.HeadersEnded(), f.StreamEnded(), false, 0, t)
	case *http2.PushPromiseFrame:
		d.startBlock(f.StreamID, f.HeaderBlockFragment(), f.HeadersEnded(), false, true, f.PromiseID, t)
	case *http2.ContinuationFrame:
		d.continueBlock(f.HeaderBlockFragment(), f.HeadersEnded(), t)
	case *http2.RSTStreamFrame:
		c.onReset(d, f.StreamID, f.ErrCode, t)
	case *http2.SettingsFrame:
		if !f.IsAck() {
			c.onSettings(d, f, t)
		}
	case *http2.GoAwayFrame:
		c.onGoAway(d, f, t)
	default:
		// PING, WINDOW_UPDATE, PRIORITY and unknown frame types (which
		// RFC 9113 §4.1 says to ignore) do not change what was exchanged.
	}
	if len(b) > h2KeepBuf && !d.blkOn && !c.dead {
		// Do not let the Framer pin a large frame's buffer.
		d.newFramer()
	}
}

// frameError handles a frame the Framer rejected. A stream error in a
// frame that carries no header block loses only that frame; anything else
// is a connection error (RFC 9113 §5.4.1) after which the peers themselves
// stop.
func (d *h2Dir) frameError(b []byte, err error, t int64) {
	c := d.c
	typ := http2.FrameType(b[3])
	id := streamID(b)
	detail := err.Error()
	if e := d.fr.ErrorDetail(); e != nil {
		detail += ": " + e.Error()
	}
	var se http2.StreamError
	if errors.As(err, &se) && typ != http2.FrameHeaders && typ != http2.FrameContinuation && typ != http2.FramePushPromise {
		c.note(formats.NoExchange, d.dir, t, formats.AnomalyMalformed, d.pos, int64(len(b)),
			fmt.Sprintf("http2 %s: invalid %s frame on stream %d (%s); frame ignored", d.dir, typ, id, detail))
		return
	}
	c.fatal(d.dir, t, formats.AnomalyMalformed, d.pos, formats.EndError,
		fmt.Sprintf("http2 %s: invalid %s frame on stream %d (%s)", d.dir, typ, id, detail))
}

// startBlock begins a header block (HEADERS or PUSH_PROMISE).
func (d *h2Dir) startBlock(stream uint32, frag []byte, ended, endStream, push bool, promised uint32, t int64) {
	d.blkStream, d.blkEnd, d.blkPush, d.blkPromised, d.blkOff = stream, endStream, push, promised, d.pos
	if ended {
		// The whole block is in this frame: decode it in place.
		d.decodeBlock(frag, t)
		return
	}
	d.blkOn = true
	d.blk = append(d.blk[:0], frag...)
}

// continueBlock adds a CONTINUATION fragment. The Framer has checked that
// it follows its HEADERS on the same stream (RFC 9113 §6.10).
func (d *h2Dir) continueBlock(frag []byte, ended bool, t int64) {
	if len(d.blk)+len(frag) > maxH2HeaderBlock {
		d.c.fatal(d.dir, t, formats.AnomalyLimit, d.blkOff, formats.EndError,
			fmt.Sprintf("http2 %s: header block on stream %d larger than %d bytes", d.dir, d.blkStream, maxH2HeaderBlock))
		return
	}
	d.blk = append(d.blk, frag...)
	if !ended {
		return
	}
	d.blkOn = false
	d.decodeBlock(d.blk, t)
	if cap(d.blk) > h2KeepBuf {
		d.blk = nil
	} else {
		d.blk = d.blk[:0]
	}
}

// emit collects one decoded field, within the limits.
func (d *h2Dir) emit(f hpack.HeaderField) {
	d.listSize += len(f.Name) + len(f.Value) + 32
	if len(d.fields) >= maxHeaderFields || d.listSize > maxH2HeaderList {
		d.dropped = true
		d.dec.SetEmitEnabled(false)
		return
	}
	d.fields = append(d.fields, f)
}

// decodeBlock decodes a complete header block and hands its fields on.
// Every block is decoded, even one that is not recorded, to keep the
// dynamic table in step with the encoder's.
func (d *h2Dir) decodeBlock(blk []byte, t int64) {
	c := d.c
	if d.hpackLost {
		d.lostHeaders(t)
		return
	}
	d.fields = d.fields[:0]
	d.listSize = 0
	d.dropped = false
	d.dec.SetEmitEnabled(true)
	_, err := d.dec.Write(blk)
	if err == nil {
		err = d.dec.Close()
	}
	if err != nil {
		c.fatal(d.dir, t, formats.AnomalyMalformed, d.blkOff, formats.EndError,
			fmt.Sprintf("http2 %s: header block on stream %d: HPACK decoding failed (%v), so no later header can be decoded", d.dir, d.blkStream, err))
		return
	}
	if d.dropped {
		c.note(formats.NoExchange, d.dir, t, formats.AnomalyLimit, d.blkOff, int64(len(blk)),
			fmt.Sprintf("http2 %s: header block on stream %d has more than %d fields or %d bytes; the rest of its fields are not kept",
				d.dir, d.blkStream, maxHeaderFields, maxH2HeaderList))
	}
	if d.blkPush {
		c.note(formats.NoExchange, d.dir, t, formats.AnomalyUnknown, d.blkOff, 0,
			fmt.Sprintf("http2 %s: PUSH_PROMISE on stream %d: server push is not supported; promised stream %d is not recorded",
				d.dir, d.blkStream, d.blkPromised))
		return
	}
	if d.dir == formats.ClientToServer {
		c.clientHeaders(d.blkStream, d.fields, d.blkEnd, t, d.blkOff)
	} else {
		c.serverHeaders(d.blkStream, d.fields, d.blkEnd, t, d.blkOff)
	}
}

// onSettings applies what a SETTINGS frame from d's sender says about the
// other direction: the largest frame and HPACK table its receiver accepts
// (RFC 9113 §6.5.2).
func (c *h2Conn) onSettings(d *h2Dir, f *http2.SettingsFrame, t int64) {
	o := &c.d[1-d.dir]
	_ = f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			c.note(formats.NoExchange, d.dir, t, formats.AnomalyMalformed, d.pos, 0,
				fmt.Sprintf("http2 %s: invalid setting %v; ignored", d.dir, s))
			return nil
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			if s.Val > o.maxFrame {
				o.maxFrame = s.Val
				o.fr.SetMaxReadFrameSize(s.Val)
			}
		case http2.SettingHeaderTableSize:
			v := min(s.Val, maxH2TableSize)
			if v > o.tableSize {
				o.tableSize = v
				o.dec.SetAllowedMaxDynamicTableSize(v)
			}
		}
		return nil
	})
}

// fin handles the end of one direction (FIN).
func (c *h2Conn) fin(dir formats.Direction, t int64) {
	d := &c.d[dir]
	if d.fin {
		return
	}
	d.fin = true
	if c.dead {
		return
	}
	d.truncated(t, "connection closed")
	const note = "connection closed before END_STREAM"
	for _, s := range c.sortedStreams() {
		if dir == formats.ClientToServer {
			if !s.reqDone {
				s.reqDone = true
				s.x.requestEnd(formats.EndClosed, t, note)
			}
			c.maybeClose(s)
			continue
		}
		c.endStream(s, formats.EndClosed, t, note)
	}
}

// truncated records a frame or header block that the end of the direction
// cut.
func (d *h2Dir) truncated(t int64, why string) {
	c := d.c
	if d.resync && len(d.rbuf)+int(d.skipped) > 0 {
		n := d.skipped + int64(len(d.rbuf))
		c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyResync, d.pos+int64(len(d.rbuf))-n, n,
			fmt.Sprintf("http2 %s: %s while searching for a frame boundary after a gap (%d bytes skipped)", d.dir, why, n))
		d.rbuf, d.skipped = nil, 0
	}
	if len(d.buf) > 0 {
		c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyTruncated, d.pos, int64(len(d.buf)),
			fmt.Sprintf("http2 %s: %s inside a frame (%d bytes)", d.dir, why, len(d.buf)))
		d.buf = nil
	}
	if d.blkOn {
		c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyTruncated, d.blkOff, int64(len(d.blk)),
			fmt.Sprintf("http2 %s: %s inside the header block of stream %d", d.dir, why, d.blkStream))
		d.blkOn = false
		d.blk = nil
	}
}

// finish ends everything still open: st is EndReset (RST) or EndTruncated
// (the capture ended); anything else is a connection that closed.
func (c *h2Conn) finish(st formats.EndStatus, t int64) {
	note := "connection closed before END_STREAM"
	switch st {
	case formats.EndReset:
		note = "connection reset"
	case formats.EndTruncated:
		note = "capture ended"
	default:
		st = formats.EndClosed
	}
	if !c.dead {
		for i := range c.d {
			c.d[i].truncated(t, note)
		}
		for _, s := range c.sortedStreams() {
			c.endStream(s, st, t, note)
		}
	}
	if c.unparsed > 0 {
		// Not understood, kept out of the session (like the bytes after a
		// protocol switch on HTTP/1.1).
		c.s.anomaly(c.id, formats.NoExchange, c.deadDir, t, formats.AnomalyUnknown, c.deadOff, c.unparsed,
			fmt.Sprintf("%d bytes after the HTTP/2 parsing stopped were not recorded", c.unparsed))
		c.unparsed = 0
	}
}

// fatal records why the connection can no longer be parsed, ends its
// open streams with st and stops.
func (c *h2Conn) fatal(dir formats.Direction, t int64, kind formats.AnomalyKind, off int64, st formats.EndStatus, msg string) {
	c.s.anomaly(c.id, formats.NoExchange, dir, t, kind, off, 0, msg+"; the rest of the connection is not parsed")
	note := "HTTP/2 parsing stopped: " + msg
	if st == formats.EndGap {
		note = "bytes missing; HTTP/2 parsing stopped"
	}
	for _, s := range c.sortedStreams() {
		c.endStream(s, st, t, note)
	}
	c.dead, c.deadDir, c.deadOff = true, dir, off
	for i := range c.d {
		d := &c.d[i]
		c.unparsed += int64(len(d.buf))
		d.buf, d.blk, d.fields, d.fr, d.dec = nil, nil, nil, nil, nil
		d.blkOn = false
	}
}

// streamNote records a minor anomaly about a stream's exchange, at the
// body offset that direction has reached.
func (c *h2Conn) streamNote(s *h2Stream, dir formats.Direction, t int64, n int64, msg string) {
	off := s.off
	if dir == formats.ClientToServer {
		off = s.x.reqOff
	}
	c.note(s.x.id, dir, t, formats.AnomalyMalformed, off, n, msg)
}

// note records a minor anomaly, at most maxH2Notes per connection. off is
// an offset in the direction's stream, or with x set in its body.
func (c *h2Conn) note(x int64, dir formats.Direction, t int64, kind formats.AnomalyKind, off, n int64, msg string) {
	c.notes++
	switch {
	case c.notes <= maxH2Notes:
		c.s.anomaly(c.id, x, dir, t, kind, off, n, msg)
	case c.notes == maxH2Notes+1:
		c.s.anomaly(c.id, formats.NoExchange, dir, t, formats.AnomalyLimit, off, 0,
			fmt.Sprintf("more than %d anomalies on this HTTP/2 connection; further ones are not recorded", maxH2Notes))
	}
}
