package capture

// HTTP/1.1 damage: resynchronising a direction after bytes it cannot
// parse or bytes lost to capture loss (gaps).

import (
	"bytes"
	"fmt"

	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
)

// resync buffers bytes until the next message head (or, for a chunked body
// that lost its framing and for a response captured from its middle, the
// next chunk-size line) is found. When the resume point lies in bytes
// buffered by earlier calls, those bytes are parsed first and resync
// returns 0, so the caller feeds p again in the new state.
func (d *h1Dir) resync(p []byte, t int64) int {
	a := d.aux()
	prev := len(a.buf)
	a.buf = append(a.buf, p...)
	a.bufAt = append(a.bufAt, bufMark{len(a.buf), t})
	request := d.dir == formats.ClientToServer
	at, chunk, drop := -1, false, len(a.buf)
	if d.st == h1ChunkResync || d.st == h1Midstream {
		if d.ch == nil {
			d.ch = chunked.NewDecoder()
		}
		// The decoder remembers the bytes before what it was last given,
		// so the buffer only keeps what may still begin a size line.
		skip, ok := d.ch.Resync(a.buf)
		if ok {
			at, chunk = skip, true
		} else {
			drop = skip
		}
	}
	// A message head before the chunk-size line wins: the chunked body
	// ended in the lost bytes.
	if i := findMessageStart(a.buf, request); i >= 0 && (at < 0 || i < at) {
		at, chunk = i, false
	}
	if at < 0 {
		if d.st == h1Resync {
			// Only the last (partial) line may still begin a head.
			drop = max(0, len(a.buf)-chunked.MaxLineLength)
			if i := bytes.LastIndexByte(a.buf, '\n'); i >= 0 {
				drop = max(drop, i+1)
			}
		}
		a.skipped += int64(drop)
		a.buf = append(a.buf[:0], a.buf[drop:]...)
		marks := a.bufAt[:0]
		for _, m := range a.bufAt {
			if m.end -= drop; m.end > 0 {
				marks = append(marks, m)
			}
		}
		a.bufAt = marks
		return len(p)
	}
	total := a.skipped + int64(at)
	a.skipped = 0
	bufStart := d.off - int64(prev) // stream offset of a.buf[0]
	if chunk {
		d.resumeChunked(total, bufStart+int64(at), t)
	} else {
		d.resumeHead(total, bufStart+int64(at), t)
	}
	if at >= prev {
		a.buf, a.bufAt = a.buf[:0], a.bufAt[:0]
		return at - prev
	}
	// The resume point is in bytes buffered before p: parse them first,
	// each piece with the time it arrived.
	type piece struct {
		b []byte
		t int64
	}
	var rest []piece
	start := 0
	for _, m := range a.bufAt {
		if lo, hi := max(start, at), min(m.end, prev); lo < hi {
			rest = append(rest, piece{bytes.Clone(a.buf[lo:hi]), m.t})
		}
		start = m.end
	}
	a.buf, a.bufAt = nil, nil // the connection may stay open for long: keep no resync buffer
	save := d.off
	d.off = bufStart + int64(at)
	for _, r := range rest {
		d.feed(r.b, r.t)
	}
	d.off = save
	return 0
}

// resumeChunked switches to reading a chunked body at stream offset off,
// after skipped bytes that could not be parsed. The decoder is positioned
// by Resync.
func (d *h1Dir) resumeChunked(skipped, off int64, t int64) {
	if d.st == h1Midstream {
		// A response captured from its middle: its head is unknown (the
		// capture began after it, or lost it: then it answers the oldest
		// waiting request).
		var x *exchange
		if d.lostHead && len(d.c.queue) > 0 {
			x = d.c.popQueue()
		} else {
			x = d.c.s.newExchange(d.c.id, formats.Request{Time: t, Missing: true})
		}
		d.lostHead = false
		x.response(formats.Response{Time: t, Midstream: true, Framing: formats.FramingChunked})
		d.x = x
		if skipped > 0 {
			d.c.s.anomaly(d.c.id, x.id, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
				fmt.Sprintf("response captured from its middle: skipped %d bytes to the first chunk-size line", skipped))
		}
	} else if d.x != nil {
		d.c.s.anomaly(d.c.id, d.x.id, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
			fmt.Sprintf("chunked framing resumed after skipping %d bytes", skipped))
		if skipped > 0 {
			d.x.gap(skipped, t)
		}
	}
	d.st = h1Chunked
	d.clearTrailer()
}

// resumeHead switches to reading a message head at stream offset off.
func (d *h1Dir) resumeHead(skipped, off int64, t int64) {
	if skipped > 0 {
		what := "response"
		if d.dir == formats.ClientToServer {
			what = "request"
		}
		d.c.s.anomaly(d.c.id, formats.NoExchange, d.dir, t, formats.AnomalyResync, off-skipped, skipped,
			fmt.Sprintf("skipped %d bytes to the next %s head", skipped, what))
	}
	if d.st == h1ChunkResync && d.x != nil {
		// The body never resumed: it ended somewhere in the lost bytes.
		d.x.gap(skipped, t)
		d.bodyEnd(formats.EndGap, t, "chunked framing lost")
	}
	if d.lostHead && len(d.c.queue) > 0 {
		// A head and no body before it: the oldest waiting request's
		// response was lost whole.
		x := d.c.popQueue()
		d.c.s.anomaly(d.c.id, x.id, d.dir, t, formats.AnomalyGap, off, 0,
			"the response to this request was not captured (lost with the bytes missing before)")
		x.end(formats.EndGap, t, nil, "response not captured")
	}
	d.lostHead = false
	d.st = h1Head
	d.clearHead()
}

// gap records n bytes of direction dir lost to capture loss.
func (c *h1Conn) gap(dir formats.Direction, n int64, t int64) {
	d := &c.d[dir]
	// Responses come in request order: bytes lost where a response was to
	// begin held (at least) the head of the oldest waiting request's
	// response. What follows the gap is either the rest of its body (found
	// by its chunk framing: it is that request's, a response captured from
	// its middle) or the next response head (the whole response was lost).
	lostHead := dir == formats.ServerToClient && len(c.queue) > 0 &&
		(d.st == h1Head || d.st == h1Length && n > d.remain)
	x := d.exchangeID()
	if lostHead && d.st == h1Head {
		x = c.queue[0].exchange().id
	}
	c.s.anomaly(c.id, x, dir, t, formats.AnomalyGap, d.off, n,
		fmt.Sprintf("%d bytes missing from the %s stream (not captured)", n, dir))
	if lostHead {
		defer func() {
			d.st = h1Midstream
			d.lostHead = true
			d.clearBuf()
			d.ch = nil
		}()
	}
	d.off += n
	switch d.st {
	case h1Head:
		d.clearHead()
		d.st = h1Resync
	case h1Length:
		if n >= d.remain {
			if d.x != nil {
				if dir == formats.ServerToClient {
					d.x.gap(d.remain, t)
				}
			}
			d.bodyEnd(formats.EndGap, t, "bytes missing")
			d.st = h1Resync
			return
		}
		d.remain -= n
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
	case h1Chunked:
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
		d.st = h1ChunkResync
		d.clearBuf()
		d.ch = nil
	case h1Close:
		if d.x != nil && dir == formats.ServerToClient {
			d.x.gap(n, t)
		}
	case h1Resync, h1Midstream, h1ChunkResync:
		if a := d.a; a != nil {
			a.skipped += int64(len(a.buf))
			a.buf, a.bufAt = a.buf[:0], a.bufAt[:0]
		}
		if d.ch != nil {
			d.ch.Resync(nil) // forget the bytes before the gap
		}
	}
}
