package capture

import (
	"fmt"

	"golang.org/x/net/http2"

	"github.com/wtrace/wtrace/formats"
)

// Limits of the search for a frame boundary after a gap.
const (
	// maxH2ResyncWindow bounds the bytes a direction holds while it checks
	// a candidate frame boundary: the candidate's header, its payload and
	// the next frame's header must fit, so frames larger than this (less
	// the two headers) cannot start a resynchronization.
	maxH2ResyncWindow = 2<<20 + 2*h2FrameHeaderLen
	// maxH2ResyncSkip is how many bytes after a gap are searched for a
	// frame boundary before the connection is given up.
	maxH2ResyncSkip = 4 << 20
)

// An HTTP/2 connection survives a capture gap (lost packets, or a TLS
// record lost with them) as far as the lost bytes allow:
//
//   - The framing is found again: the bytes after the gap are searched for
//     a frame header that is plausible for the connection's state (see
//     plausibleFrame) and is confirmed by what follows it: either the next
//     frame's header, also plausible, or the end of the bytes captured so
//     far (senders write whole frames; waiting for the next one could take
//     minutes on a quiet watch, and would misdate its events) if the frame
//     is on a stream being recorded. What was skipped is recorded.
//   - Response bodies continue: every stream whose response was under way
//     in that direction may have lost bytes, so its event splitter
//     resynchronizes at the next event start (a partial event is dropped
//     and reported, never spliced to bytes from after the gap) and the
//     exchange ends as gapped. Body offsets count the bytes captured.
//   - Header compression cannot be recovered: the lost header blocks may
//     have changed the HPACK dynamic table, and decoding with a stale one
//     would record wrong headers. Later header blocks of that direction
//     are not decoded: a request head after the gap is recorded as
//     missing (its response is still recorded), a response head lost or
//     undecodable ends its stream as gapped, and trailers only end their
//     stream.

// gap: n bytes of direction dir were lost (n < 0: an unknown number). The
// partial frame and header block are dropped, and the direction searches
// for the next frame boundary.
func (c *h2Conn) gap(dir formats.Direction, n int64, t int64) {
	if c.dead {
		return
	}
	d := &c.d[dir]
	off := d.pos + int64(len(d.buf)) + int64(len(d.rbuf))
	d.skipped += int64(len(d.rbuf)) // a second gap during a search
	what := fmt.Sprintf("%d bytes", n)
	if n < 0 {
		what = "bytes"
	}
	c.s.anomaly(c.id, formats.NoExchange, dir, t, formats.AnomalyGap, off, max(n, 0),
		fmt.Sprintf("%s missing from the %s stream (not captured): header blocks of this direction can no longer be decoded; HTTP/2 framing is searched for after the gap", what, dir))
	if d.blkOn {
		c.note(formats.NoExchange, dir, t, formats.AnomalyTruncated, d.blkOff, int64(len(d.blk)),
			fmt.Sprintf("http2 %s: the header block of stream %d was cut by the gap", dir, d.blkStream))
		d.blkOn = false
		d.blk = nil
		if s := c.streams[d.blkStream]; s != nil && dir == formats.ServerToClient && !s.resp {
			c.headLost(d, s, t, "was cut by a gap")
		}
	}
	d.pos = off
	if n > 0 {
		d.pos += n
	}
	d.buf = nil
	d.preface = len(h2Preface)
	d.hpackLost = true
	d.resync = true
	d.rbuf = d.rbuf[:0]
	d.newFramer() // it may be expecting a CONTINUATION
	if dir == formats.ServerToClient {
		for _, s := range c.sortedStreams() {
			if s.resp && !s.respDone {
				s.x.gap(0, t)
			}
		}
	}
}

// resyncFeed adds p to the bytes searched for a frame boundary after a
// gap, and goes on with normal framing from the boundary once it is found.
func (d *h2Dir) resyncFeed(p []byte, t int64) {
	for len(p) > 0 && d.resync && !d.c.dead {
		q := p[:min(len(p), h2ResyncStep)]
		p = p[len(q):]
		d.resyncStep(q, t)
	}
	if len(p) > 0 {
		if d.c.dead {
			d.c.unparsed += int64(len(p))
			return
		}
		d.feed(p, t)
	}
}

// h2ResyncStep is the most a direction adds at once to the bytes it
// searches, so that they stay within maxH2ResyncWindow plus one step.
const h2ResyncStep = 64 << 10

// resyncStep searches p and the bytes held before it.
func (d *h2Dir) resyncStep(p []byte, t int64) {
	c := d.c
	d.rbuf = append(d.rbuf, p...)
	i := 0
search:
	for ; ; i++ {
		if d.skipped+int64(i) > maxH2ResyncSkip {
			d.skipped += int64(i)
			d.pos += int64(i)
			c.unparsed += int64(len(d.rbuf) - i)
			d.rbuf = nil
			c.fatal(d.dir, t, formats.AnomalyResync, d.pos, formats.EndGap,
				fmt.Sprintf("http2 %s: no frame boundary found in %d bytes after a gap", d.dir, d.skipped))
			return
		}
		if len(d.rbuf)-i < h2FrameHeaderLen {
			break // wait for a whole header
		}
		h := d.rbuf[i:]
		if !d.plausibleFrame(h, true) {
			continue
		}
		end := h2FrameHeaderLen + int(uint32(h[0])<<16|uint32(h[1])<<8|uint32(h[2]))
		switch {
		case end+h2FrameHeaderLen > maxH2ResyncWindow:
			// Too large to be confirmed.
		case end == len(h) && d.tracked(h), end+h2FrameHeaderLen <= len(h) && d.plausibleFrame(h[end:], false):
			d.resume(i, t)
			return
		case end+h2FrameHeaderLen > len(h):
			break search // wait for the bytes that confirm or refute it
		}
	}
	// Keep the bytes from i, where the search goes on.
	d.skipped += int64(i)
	d.pos += int64(i)
	d.rbuf = d.rbuf[:copy(d.rbuf, d.rbuf[i:])]
	if cap(d.rbuf) > maxH2ResyncWindow && len(d.rbuf) <= h2KeepBuf {
		d.rbuf = append([]byte(nil), d.rbuf...)
	}
}

// resume ends the search at offset i of rbuf: the bytes before it are
// recorded as skipped and the rest is framed normally.
func (d *h2Dir) resume(i int, t int64) {
	c := d.c
	skipped := d.skipped + int64(i)
	d.pos += int64(i)
	c.s.anomaly(c.id, formats.NoExchange, d.dir, t, formats.AnomalyResync, d.pos-skipped, skipped,
		fmt.Sprintf("http2 %s: framing resumed after a gap at a %s frame on stream %d, %d bytes skipped",
			d.dir, http2.FrameType(d.rbuf[i+3]), streamID(d.rbuf[i:]), skipped))
	rest := d.rbuf[i:]
	d.resync, d.skipped = false, 0
	d.rbuf = nil
	d.feed(rest, t)
}

// tracked reports whether the frame header h names a stream the
// connection tracks, or is a connection-level frame: what a frame
// confirmed only by the end of the captured bytes must satisfy.
func (d *h2Dir) tracked(h []byte) bool {
	id := streamID(h)
	return id == 0 || d.c.streams[id] != nil || http2.FrameType(h[3]) == http2.FrameHeaders && d.newRequest(id)
}

// maxH2LostStreams bounds how many client streams a gap may have opened
// unseen: a HEADERS after a gap that opens a stream further ahead is taken
// for noise.
const maxH2LostStreams = 1000

// newRequest reports whether a client's HEADERS on stream id could open
// the next stream (RFC 9113 §5.1.1: client stream IDs are odd and
// increase), allowing for streams opened in a gap.
func (d *h2Dir) newRequest(id uint32) bool {
	last := d.c.lastClient
	return d.dir == formats.ClientToServer && id%2 == 1 && id > last && id-last <= 2*maxH2LostStreams
}

// plausibleFrame reports whether h begins with the header of a frame d's
// sender could send now (RFC 9113 §6): a known type whose length, flags
// and stream fit it, within the receiver's frame size; DATA and HEADERS
// only on streams the client has opened (or, for a client's HEADERS, a new
// one). A CONTINUATION cannot start a resynchronization (first) but may
// follow a HEADERS.
func (d *h2Dir) plausibleFrame(h []byte, first bool) bool {
	n := uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2])
	typ, flags := http2.FrameType(h[3]), http2.Flags(h[4])
	if n > d.maxFrame || h[5]&0x80 != 0 {
		return false
	}
	id := streamID(h)
	open := func() bool { return id%2 == 1 && id <= d.c.lastClient }
	switch typ {
	case http2.FrameData:
		return flags&^(http2.FlagDataEndStream|http2.FlagDataPadded) == 0 && open()
	case http2.FrameHeaders:
		if flags&^(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders|http2.FlagHeadersPadded|http2.FlagHeadersPriority) != 0 || id%2 == 0 {
			return false
		}
		return open() || d.newRequest(id)
	case http2.FramePriority:
		return n == 5 && id != 0 && flags == 0
	case http2.FrameRSTStream:
		return n == 4 && id != 0 && flags == 0
	case http2.FrameSettings:
		return id == 0 && flags&^http2.FlagSettingsAck == 0 && n%6 == 0 && (flags == 0 || n == 0)
	case http2.FramePing:
		return id == 0 && n == 8 && flags&^http2.FlagPingAck == 0
	case http2.FrameGoAway:
		return id == 0 && n >= 8 && flags == 0
	case http2.FrameWindowUpdate:
		return n == 4 && flags == 0
	case http2.FrameContinuation:
		return !first && flags&^http2.FlagContinuationEndHeaders == 0 && open()
	}
	return false
}

// lostHeaders handles a header block that arrived after a gap in its
// direction, which cannot be decoded (see the comment on resync above).
func (d *h2Dir) lostHeaders(t int64) {
	c := d.c
	id := d.blkStream
	s := c.streams[id]
	if d.blkPush {
		return
	}
	if d.dir == formats.ClientToServer {
		if s != nil || id%2 == 0 || id <= c.lastClient {
			// Trailers of an open request: they only end it.
			if s != nil && d.blkEnd && !s.reqDone {
				s.reqDone = true
				s.x.requestEnd(formats.EndComplete, t, "")
				c.maybeClose(s)
			}
			return
		}
		c.note(formats.NoExchange, d.dir, t, formats.AnomalyGap, d.blkOff, 0,
			fmt.Sprintf("http2 %s: the request head of stream %d cannot be decoded after a gap (HPACK state lost); its response is recorded without it", d.dir, id))
		s = c.newStream(id, d.dir, t, d.blkOff, formats.Request{Time: t, Missing: true, Proto: h2Proto})
		if s != nil && d.blkEnd {
			s.reqDone = true
			s.x.requestEnd(formats.EndComplete, t, "")
		}
		return
	}
	if s == nil || s.respDone {
		return
	}
	if !s.resp {
		c.headLost(d, s, t, "cannot be decoded after a gap (HPACK state lost)")
		return
	}
	if d.blkEnd {
		c.endResponse(s, formats.EndComplete, t, nil, "trailers not decoded (HPACK state lost in a gap)")
	}
}

// headLost ends a stream whose response head is lost to a gap: the
// exchange keeps its request, and an anomaly says why it has no response.
func (c *h2Conn) headLost(d *h2Dir, s *h2Stream, t int64, why string) {
	c.note(s.x.id, d.dir, t, formats.AnomalyGap, 0, 0,
		fmt.Sprintf("http2 %s: the response head of stream %d %s; the response is not recorded", d.dir, s.id, why))
	c.endStream(s, formats.EndGap, t, "response head lost in a capture gap")
}
