package export

import (
	"fmt"

	"github.com/wtrace/wtrace/formats"
)

// The body's assembly for the wire export (wire.go): a response body put
// back in its transfer framing from the session's Data and Chunk records.

// Body modes: how the response body is framed on the wire.
const (
	bodyPlain   = iota // as stored: Content-Length, until close, or no body
	bodyChunked        // HTTP/1.1 chunks, as the Chunk records say
	bodyH2             // HTTP/2 DATA frames, as the Chunk records say
)

// bodyAsm puts a response body back in its transfer framing. Data (at
// body offsets) and Chunk records (the framing) arrive in separate
// records, not always in step: the bytes that end a JSON event's chunk
// (its newline) are stored with the next event. A run of bytes goes out
// when both its bytes and its chunk are known, at the earlier of the time
// its bytes arrived and the time its chunk ended.
type bodyAsm struct {
	g      *wireGen
	mode   int
	stream uint32

	pos      int64 // next body offset to send
	data     []dpiece
	pending  int64 // bytes in data
	chunks   []formats.Chunk
	cur      *formats.Chunk // the chunk being sent (its header is out)
	synthOff int64          // offset of the next synthesized (re-encoded) piece
	lastSent bool           // HTTP/2: a DATA frame carried END_STREAM
}

type dpiece struct {
	off int64
	b   []byte
	t   int64
}

func (a *bodyAsm) addData(off int64, b []byte, t int64) {
	if len(b) == 0 {
		return
	}
	if off < a.pos { // bytes already sent (a repeated record)
		if off+int64(len(b)) <= a.pos {
			return
		}
		b = b[a.pos-off:]
		off = a.pos
	}
	a.data = append(a.data, dpiece{off, b, t})
	a.pending += int64(len(b))
}

func (a *bodyAsm) addChunk(c formats.Chunk) {
	if c.Size <= 0 || c.Offset < 0 || c.Offset > 1<<62 || c.Size > 1<<62 || c.Offset+c.Size <= a.pos {
		return // nothing to frame (or a chunk no recorder writes)
	}
	if n := len(a.chunks); n > 0 && c.Offset < a.chunks[n-1].Offset+a.chunks[n-1].Size {
		return // overlaps the one before: not a chunk boundary of this body
	}
	a.chunks = append(a.chunks, c)
}

// addSynthetic adds re-encoded bytes as a chunk of their own.
func (a *bodyAsm) addSynthetic(b []byte, t int64) {
	if len(b) == 0 {
		return
	}
	off := a.synthOff
	a.synthOff += int64(len(b))
	a.data = append(a.data, dpiece{off, b, t})
	a.pending += int64(len(b))
	a.chunks = append(a.chunks, formats.Chunk{Time: t, Offset: off, Size: int64(len(b))})
}

// step is what a step of bodyAsm.run leaves to do: go on, stop until
// more is read (wait), stop for good (done: nothing more is held), or
// (pickChunk only) open the chunk picked.
type step int

const (
	stepNext step = iota
	stepWait
	stepDone
	stepOpen
)

// run sends what can be sent. With final (the response End is read, or
// the records ended), nothing more will come: what waits is sent as it
// can be; complete says the body ended per its framing (end is its End).
func (a *bodyAsm) run(final, complete bool, end *formats.End) {
	for {
		var st step
		if a.cur != nil {
			st = a.sendCurrent(final)
		} else {
			st = a.startChunk(final, complete, end)
		}
		switch st {
		case stepWait:
			return
		case stepDone:
			if final {
				a.finish(complete, end)
			}
			return
		}
	}
}

// sendCurrent sends what is held of the chunk being sent (a.cur), or
// marks what the capture lost of it.
func (a *bodyAsm) sendCurrent(final bool) step {
	c := a.cur
	cend := c.Offset + c.Size
	if len(a.data) == 0 {
		if final {
			return stepDone
		}
		return stepWait
	}
	d := &a.data[0]
	if d.off > a.pos {
		n := min(d.off, cend) - a.pos
		a.g.out = append(a.g.out, piece{t: d.t, dir: formats.ServerToClient, lost: n})
		a.pos += n
	} else {
		n := min(d.off+int64(len(d.b)), cend) - a.pos
		if n <= 0 {
			a.cur = nil
			return stepNext
		}
		a.g.emit(min(d.t, c.Time), formats.ServerToClient, d.b[a.pos-d.off:a.pos-d.off+n])
		a.pos += n
		a.consume()
	}
	if a.pos == cend {
		if a.mode == bodyChunked {
			a.g.emit(c.Time, formats.ServerToClient, []byte("\r\n"))
		}
		a.cur = nil
	}
	return stepNext
}

// startChunk starts what comes next of the body: a plain body's bytes, or
// the next chunk's framing (pickChunk, openChunk).
func (a *bodyAsm) startChunk(final, complete bool, end *formats.End) step {
	if len(a.data) == 0 {
		return stepDone
	}
	d := a.data[0]
	if d.off > a.pos {
		a.g.out = append(a.g.out, piece{t: d.t, dir: formats.ServerToClient, lost: d.off - a.pos})
		a.pos = d.off
	}
	if a.mode == bodyPlain {
		a.g.emit(d.t, formats.ServerToClient, d.b[a.pos-d.off:])
		a.pos = d.off + int64(len(d.b))
		a.consume()
		return stepNext
	}
	for len(a.chunks) > 0 && a.chunks[0].Offset+a.chunks[0].Size <= a.pos {
		a.chunks = a.chunks[1:]
	}
	c, popped, st := a.pickChunk(d, final)
	if st != stepOpen {
		return st
	}
	return a.openChunk(c, d, popped, final, complete, end)
}

// pickChunk picks the chunk that starts at a.pos: the next recorded one,
// or one of its own for bytes no recorded chunk frames (a body
// re-encoded after redaction; what is held once nothing more will come);
// popped says it was taken from a.chunks. A chunk whose header the
// capture lost becomes the current one at once (stepNext).
func (a *bodyAsm) pickChunk(d dpiece, final bool) (c formats.Chunk, popped bool, st step) {
	switch {
	case len(a.chunks) > 0 && a.chunks[0].Offset <= a.pos:
		c = a.chunks[0]
		a.chunks = a.chunks[1:]
		if c.Offset < a.pos { // the chunk began in bytes the capture lost: its header with them
			c.Size -= a.pos - c.Offset
			c.Offset = a.pos
			a.cur = &c
			return c, true, stepNext
		}
		return c, true, stepOpen
	case len(a.chunks) > 0:
		return formats.Chunk{Time: d.t, Offset: a.pos, Size: min(a.chunks[0].Offset, a.contiguous()) - a.pos}, false, stepOpen
	case final || a.pending > maxPending:
		return formats.Chunk{Time: d.t, Offset: a.pos, Size: a.contiguous() - a.pos}, false, stepOpen
	}
	return c, false, stepWait // wait for the Chunk record
}

// openChunk sends the framing of chunk c (a chunk-size line, or an HTTP/2
// DATA frame's header, END_STREAM on the last) and makes it the current
// one. An HTTP/2 chunk larger than a frame is split; whether a frame is
// the last is known once something follows it, or the End is read: until
// then it waits (stepWait), c put back if it was popped.
func (a *bodyAsm) openChunk(c formats.Chunk, d dpiece, popped, final, complete bool, end *formats.End) step {
	if a.mode != bodyH2 {
		b := fmt.Appendf(nil, "%x", c.Size)
		if c.Ext != "" {
			b = append(append(b, ';'), c.Ext...)
		}
		a.g.emit(min(d.t, c.Time), formats.ServerToClient, append(b, "\r\n"...))
		a.cur = &c
		return stepNext
	}
	if c.Size > h2MaxFrame { // (a recorded DATA frame is never larger)
		rest := c
		rest.Offset += h2MaxFrame
		rest.Size -= h2MaxFrame
		c.Size = h2MaxFrame
		a.chunks = append([]formats.Chunk{rest}, a.chunks...)
		popped = false
	}
	cend := c.Offset + c.Size
	follows := len(a.chunks) > 0
	for _, d := range a.data {
		follows = follows || d.off+int64(len(d.b)) > cend
	}
	if !follows && !final && a.pending <= maxPending {
		if popped {
			a.chunks = append([]formats.Chunk{c}, a.chunks...)
		}
		return stepWait
	}
	// (on the frame of the chunk's end only when the stream ended with
	// it, not later with an empty DATA frame)
	last := final && complete && end != nil && len(end.Trailer) == 0 && !follows && end.Time <= c.Time
	a.g.emit(min(d.t, c.Time), formats.ServerToClient, h2DataHeader(c.Size, a.stream, last))
	a.cur = &c
	if last {
		a.g.streamDone = true
	}
	return stepNext
}

// finish ends the body once nothing more will come: a body cut inside a
// chunk ends there (nothing more was on the wire); a chunked body that
// ended per its framing gets its last-chunk and trailer.
func (a *bodyAsm) finish(complete bool, end *formats.End) {
	if a.cur != nil {
		a.cur = nil
		return
	}
	if a.mode == bodyChunked && complete && end != nil {
		b := []byte("0")
		if end.LastExt != "" {
			b = append(append(b, ';'), end.LastExt...) // the last-chunk's extensions
		}
		b = appendHeaders(append(b, "\r\n"...), end.Trailer)
		a.g.emit(end.Time, formats.ServerToClient, append(b, "\r\n"...))
	}
}

// contiguous returns the body offset where the bytes held from pos on
// first stop (the end of what is known without a gap).
func (a *bodyAsm) contiguous() int64 {
	end := a.pos
	for _, d := range a.data {
		if d.off > end {
			break
		}
		end = max(end, d.off+int64(len(d.b)))
	}
	return end
}

// consume drops the data pieces pos has passed.
func (a *bodyAsm) consume() {
	for len(a.data) > 0 {
		d := a.data[0]
		if d.off+int64(len(d.b)) > a.pos {
			return
		}
		a.pending -= int64(len(d.b))
		a.data[0] = dpiece{}
		a.data = a.data[1:]
	}
}
