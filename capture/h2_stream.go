package capture

import (
	"fmt"
	"slices"
	"strconv"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
)

// h2Proto is the Proto of HTTP/2 requests and responses, as net/http
// names it.
const h2Proto = "HTTP/2.0"

// h2Header converts a decoded field. Credentials are redacted here, so
// header values never leave the parser unredacted; a field its sender
// marked never-indexed (RFC 7541 §7.1.3, which HTTP/2 stacks use for
// credentials) is redacted too.
func h2Header(f hpack.HeaderField) formats.Header {
	if f.Sensitive {
		return formats.Header{Name: f.Name, Redacted: true, Len: len(f.Value)}
	}
	return redact.Header(f.Name, f.Value)
}

// sortedStreams returns the open streams by ID, so that what is recorded
// for them does not depend on map order.
func (c *h2Conn) sortedStreams() []*h2Stream {
	out := make([]*h2Stream, 0, len(c.streams))
	for _, s := range c.streams {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *h2Stream) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

// newStream tracks a new client-initiated stream, within maxH2Streams.
func (c *h2Conn) newStream(id uint32, dir formats.Direction, t int64, off int64, req formats.Request) *h2Stream {
	c.lastClient = id
	if len(c.streams) >= maxH2Streams {
		c.note(formats.NoExchange, dir, t, formats.AnomalyLimit, off, 0,
			fmt.Sprintf("http2: more than %d streams open at once; stream %d is not recorded", maxH2Streams, id))
		return nil
	}
	req.Stream = id
	s := &h2Stream{id: id, x: c.s.newExchange(c.id, req)}
	c.streams[id] = s
	return s
}

// maybeClose forgets a stream whose two directions have ended.
func (c *h2Conn) maybeClose(s *h2Stream) {
	if s.reqDone && s.respDone {
		delete(c.streams, s.id)
	}
}

// endStream ends whatever is still open of a stream, with st.
func (c *h2Conn) endStream(s *h2Stream, st formats.EndStatus, t int64, note string) {
	if !s.reqDone {
		s.reqDone = true
		s.x.requestEnd(st, t, note)
	}
	if !s.respDone {
		s.respDone = true
		s.x.end(st, t, nil, note)
	}
	delete(c.streams, s.id)
}

// endResponse ends the response direction of a stream.
func (c *h2Conn) endResponse(s *h2Stream, st formats.EndStatus, t int64, trailer []formats.Header, note string) {
	if s.respDone {
		return
	}
	s.respDone = true
	s.x.end(st, t, trailer, note)
	c.maybeClose(s)
}

// clientHeaders handles a header block the client sent on a stream: a
// request head (RFC 9113 §8.3.1), or its trailers.
func (c *h2Conn) clientHeaders(id uint32, fields []hpack.HeaderField, endStream bool, t, off int64) {
	dir := formats.ClientToServer
	s := c.streams[id]
	switch {
	case s == nil && (id%2 == 0 || id <= c.lastClient):
		c.note(formats.NoExchange, dir, t, formats.AnomalyMalformed, off, 0,
			fmt.Sprintf("http2 %s: HEADERS on stream %d, which is neither open nor a new client stream; ignored", dir, id))
		return
	case s == nil:
		req := formats.Request{Time: t, Proto: h2Proto}
		var authority string
		for _, f := range fields {
			switch f.Name {
			case ":method":
				req.Method = f.Value
				continue
			case ":path":
				req.Target = f.Value
				continue
			case ":authority":
				authority = f.Value
			}
			req.Header = append(req.Header, h2Header(f))
		}
		if req.Target == "" && req.Method == "CONNECT" {
			req.Target = authority // RFC 9113 §8.5
		}
		if req.Method == "" || req.Target == "" {
			c.note(formats.NoExchange, dir, t, formats.AnomalyMalformed, off, 0,
				fmt.Sprintf("http2 %s: request on stream %d without :method or :path (RFC 9113 §8.3.1)", dir, id))
		}
		if s = c.newStream(id, dir, t, off, req); s == nil {
			return
		}
	case s.reqDone:
		c.streamNote(s, dir, t, 0,
			fmt.Sprintf("http2 %s: HEADERS on stream %d after the request ended; ignored", dir, id))
		return
	default:
		// Request trailers (RFC 9113 §8.1): they end the request; the
		// session model keeps no request trailers.
		if !endStream {
			c.streamNote(s, dir, t, 0,
				fmt.Sprintf("http2 %s: second HEADERS on stream %d without END_STREAM (RFC 9113 §8.1)", dir, id))
		}
	}
	if endStream {
		s.reqDone = true
		s.x.requestEnd(formats.EndComplete, t, "")
		c.maybeClose(s)
	}
}

// serverHeaders handles a header block the server sent on a stream: an
// informational response (skipped), the response head, or trailers.
func (c *h2Conn) serverHeaders(id uint32, fields []hpack.HeaderField, endStream bool, t, off int64) {
	dir := formats.ServerToClient
	s := c.streams[id]
	if s == nil {
		if id%2 == 0 || id <= c.lastClient {
			// A pushed stream (its PUSH_PROMISE was reported), or one
			// already closed (a response still in flight when the client
			// reset it).
			return
		}
		// The request was not seen: the capture began after it.
		if s = c.newStream(id, dir, t, off, formats.Request{Time: t, Missing: true}); s == nil {
			return
		}
		s.reqDone = true
	}
	if s.respDone {
		return
	}
	if s.resp {
		// Trailers (RFC 9113 §8.1).
		trailer := make([]formats.Header, 0, len(fields))
		for _, f := range fields {
			trailer = append(trailer, h2Header(f))
		}
		note := ""
		if !endStream {
			note = "trailers without END_STREAM"
			c.streamNote(s, dir, t, 0,
				fmt.Sprintf("http2 %s: second HEADERS on stream %d without END_STREAM (RFC 9113 §8.1); the response ends there", dir, id))
		}
		c.endResponse(s, formats.EndComplete, t, trailer, note)
		return
	}
	r := formats.Response{Time: t, Proto: h2Proto, Framing: formats.FramingH2, Status: -1}
	for _, f := range fields {
		if f.Name == ":status" && r.Status == -1 {
			r.Status = parseStatus(f.Value)
			continue
		}
		r.Header = append(r.Header, h2Header(f))
	}
	if r.Status >= 100 && r.Status < 200 {
		// An interim response (RFC 9110 §15.2): the final one follows.
		return
	}
	if r.Status < 0 {
		r.Status = 0
		c.streamNote(s, dir, t, 0,
			fmt.Sprintf("http2 %s: response on stream %d without a valid :status (RFC 9113 §8.3.2)", dir, id))
	}
	s.resp = true
	s.x.response(r)
	if endStream {
		c.endResponse(s, formats.EndComplete, t, nil, "")
	}
}

// parseStatus parses a :status value: three digits (RFC 9113 §8.3.2,
// RFC 9110 §15), or -1.
func parseStatus(v string) int {
	if len(v) != 3 {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		return -1
	}
	return n
}

// onData handles a DATA frame's data (padding stripped).
func (c *h2Conn) onData(d *h2Dir, id uint32, p []byte, endStream bool, t int64) {
	s := c.streams[id]
	if s == nil {
		if id%2 == 1 && id > c.lastClient {
			c.note(formats.NoExchange, d.dir, t, formats.AnomalyMalformed, d.pos, int64(len(p)),
				fmt.Sprintf("http2 %s: DATA on idle stream %d (RFC 9113 §5.1); ignored", d.dir, id))
		}
		// Else a closed stream (data in flight when it was reset) or a
		// pushed one.
		return
	}
	if d.dir == formats.ClientToServer {
		if s.reqDone {
			return
		}
		if len(p) > 0 {
			s.x.requestBody(p, t)
		}
		if endStream {
			s.reqDone = true
			s.x.requestEnd(formats.EndComplete, t, "")
			c.maybeClose(s)
		}
		return
	}
	if s.respDone {
		return
	}
	if !s.resp && d.hpackLost {
		c.headLost(d, s, t, "was lost in a gap")
		return
	}
	if !s.resp {
		c.streamNote(s, d.dir, t, int64(len(p)),
			fmt.Sprintf("http2 %s: DATA on stream %d before the response HEADERS (RFC 9113 §8.1); ignored", d.dir, id))
		return
	}
	if len(p) > 0 {
		s.x.body(p, t)
		s.x.chunk(chunked.Chunk{Offset: s.off, Size: int64(len(p)), Time: t})
		s.off += int64(len(p))
	}
	if endStream {
		c.endResponse(s, formats.EndComplete, t, nil, "")
	}
}

// onReset handles RST_STREAM: the stream ends, both directions, as reset.
func (c *h2Conn) onReset(d *h2Dir, id uint32, code http2.ErrCode, t int64) {
	s := c.streams[id]
	if s == nil {
		return
	}
	who := "client"
	if d.dir == formats.ServerToClient {
		who = "server"
	}
	c.endStream(s, formats.EndReset, t, fmt.Sprintf("RST_STREAM %v from the %s", code, who))
}

// onGoAway handles GOAWAY (RFC 9113 §6.8). From the server, streams above
// its last stream ID were not processed and end as reset; the others
// continue. A GOAWAY with an error code is recorded.
func (c *h2Conn) onGoAway(d *h2Dir, f *http2.GoAwayFrame, t int64) {
	if f.ErrCode != http2.ErrCodeNo {
		msg := fmt.Sprintf("http2 %s: GOAWAY %v (last stream %d)", d.dir, f.ErrCode, f.LastStreamID)
		if dbg := f.DebugData(); len(dbg) > 0 {
			msg += fmt.Sprintf(": %q", clip(string(dbg)))
		}
		c.note(formats.NoExchange, d.dir, t, formats.AnomalyMalformed, d.pos, 0, msg)
	}
	if d.dir != formats.ServerToClient {
		return // about server-initiated (pushed) streams, which are not recorded
	}
	note := fmt.Sprintf("GOAWAY %v from the server: stream not processed (last stream %d)", f.ErrCode, f.LastStreamID)
	for _, s := range c.sortedStreams() {
		if s.id > f.LastStreamID {
			c.endStream(s, formats.EndReset, t, note)
		}
	}
}
