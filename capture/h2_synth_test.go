package capture

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

const (
	c2s = formats.ClientToServer
	s2c = formats.ServerToClient
)

// h2Script builds the two directions of an HTTP/2 connection frame by
// frame with x/net's Framer and HPACK encoder (illegal frames allowed).
// Each frame written is one piece, 1µs after the previous one.
type h2Script struct {
	t      int64
	pieces []wirePiece
	buf    [2]bytes.Buffer
	fr     [2]*http2.Framer
	hbuf   [2]bytes.Buffer
	enc    [2]*hpack.Encoder
}

// newH2Script starts a connection: the client preface and both sides'
// SETTINGS.
func newH2Script() *h2Script {
	s := &h2Script{t: h2Base}
	for i := range 2 {
		s.fr[i] = http2.NewFramer(&s.buf[i], nil)
		s.fr[i].AllowIllegalWrites = true
		s.enc[i] = hpack.NewEncoder(&s.hbuf[i])
	}
	s.raw(c2s, h2Preface)
	s.fr[c2s].WriteSettings()
	s.send(c2s)
	s.fr[s2c].WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
	s.send(s2c)
	return s
}

// send makes what dir's framer wrote one piece.
func (s *h2Script) send(dir formats.Direction) {
	if s.buf[dir].Len() == 0 {
		return
	}
	s.pieces = append(s.pieces, wirePiece{dir: dir, data: bytes.Clone(s.buf[dir].Bytes()), t: s.t})
	s.buf[dir].Reset()
	s.t += 1000
}

func (s *h2Script) raw(dir formats.Direction, b []byte) {
	s.buf[dir].Write(b)
	s.send(dir)
}

// block HPACK-encodes name, value pairs with dir's encoder.
func (s *h2Script) block(dir formats.Direction, kv ...string) []byte {
	for i := 0; i+1 < len(kv); i += 2 {
		s.enc[dir].WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	b := bytes.Clone(s.hbuf[dir].Bytes())
	s.hbuf[dir].Reset()
	return b
}

func (s *h2Script) headers(dir formats.Direction, id uint32, end bool, kv ...string) {
	s.fr[dir].WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.block(dir, kv...), EndStream: end, EndHeaders: true})
	s.send(dir)
}

func (s *h2Script) request(id uint32, end bool, method, path string, kv ...string) {
	s.headers(c2s, id, end, append([]string{":method", method, ":scheme", "https", ":path", path, ":authority", "example.test"}, kv...)...)
}

func (s *h2Script) response(id uint32, end bool, status, ctype string, kv ...string) {
	s.headers(s2c, id, end, append([]string{":status", status, "content-type", ctype}, kv...)...)
}

func (s *h2Script) data(dir formats.Direction, id uint32, end bool, p string) {
	s.fr[dir].WriteData(id, end, []byte(p))
	s.send(dir)
}

// runH2 feeds pieces (each cut by split, if set) and ends the connection
// with end (nil: both FINs, then finish as after FINs). It returns the
// records and the handler.
func runH2(pieces []wirePiece, split func([]byte) [][]byte, end func(c *h2Conn, t int64)) ([]formats.Record, *h2Conn) {
	sink := &memSink{}
	c := newH2Conn(newSession(sink, true), 0)
	var last int64
	for _, p := range pieces {
		last = p.t
		if split == nil {
			c.data(p.dir, p.data, p.t)
			continue
		}
		for _, q := range split(p.data) {
			c.data(p.dir, q, p.t)
		}
	}
	last += 1000
	if end == nil {
		c.fin(c2s, last)
		c.fin(s2c, last)
		c.finish(formats.EndComplete, last)
	} else {
		end(c, last)
	}
	return sink.recs, c
}

func anomalies(recs []formats.Record) []*formats.Anomaly {
	var out []*formats.Anomaly
	for _, r := range recs {
		if a, ok := r.(*formats.Anomaly); ok {
			out = append(out, a)
		}
	}
	return out
}

// byStream returns the exchange views by HTTP/2 stream ID.
func byStream(t *testing.T, recs []formats.Record) map[uint32]*h2View {
	out := map[uint32]*h2View{}
	for _, v := range viewExchanges(t, recs) {
		out[v.req.Stream] = v
	}
	return out
}

// wantAnomaly checks that exactly the anomalies whose messages contain
// the given substrings were recorded, in order.
func wantAnomaly(t *testing.T, recs []formats.Record, subs ...string) {
	t.Helper()
	as := anomalies(recs)
	var msgs []string
	for _, a := range as {
		msgs = append(msgs, a.Kind.String()+": "+a.Message)
	}
	if len(as) != len(subs) {
		t.Errorf("anomalies %q; want %d matching %q", msgs, len(subs), subs)
		return
	}
	for i, s := range subs {
		if !strings.Contains(msgs[i], s) {
			t.Errorf("anomaly %d = %q; want it to contain %q", i, msgs[i], s)
		}
	}
}

func wantEnd(t *testing.T, what string, e *formats.End, st formats.EndStatus, note string) {
	t.Helper()
	if e == nil {
		t.Errorf("%s: no End; want %v %q", what, st, note)
		return
	}
	if e.Status != st || !strings.Contains(e.Note, note) || note == "" && e.Note != "" {
		t.Errorf("%s: End %v %q; want %v %q", what, e.Status, e.Note, st, note)
	}
}

// The script of the "gap" case, and the bytes its end feeds around the
// gaps.
var (
	h2GapPieces           []wirePiece
	h2GapLost, h2GapAfter []byte
	h2GapC2S, h2GapS2C    []byte
)

var h2SynthCases = []struct {
	name  string
	build func(s *h2Script)
	end   func(c *h2Conn, t int64)
	check func(t *testing.T, recs []formats.Record, c *h2Conn)
}{
	{
		name: "padding and priority",
		build: func(s *h2Script) {
			s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, PadLength: 17,
				Priority:      http2.PriorityParam{StreamDep: 0, Weight: 200, Exclusive: true},
				BlockFragment: s.block(c2s, ":method", "POST", ":scheme", "https", ":path", "/x", ":authority", "a")})
			s.send(c2s)
			s.fr[c2s].WriteDataPadded(1, true, []byte("hello"), make([]byte, 200))
			s.send(c2s)
			s.fr[c2s].WritePriority(1, http2.PriorityParam{Weight: 3})
			s.send(c2s)
			s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, PadLength: 255,
				BlockFragment: s.block(s2c, ":status", "200", "content-type", "text/plain")})
			s.send(s2c)
			s.fr[s2c].WriteDataPadded(1, false, []byte("abc"), make([]byte, 9))
			s.send(s2c)
			s.fr[s2c].WriteDataPadded(1, false, nil, make([]byte, 9)) // no data: no chunk
			s.send(s2c)
			s.fr[s2c].WritePing(false, [8]byte{1})
			s.send(s2c)
			s.fr[s2c].WriteWindowUpdate(0, 1000)
			s.send(s2c)
			s.fr[s2c].WriteRawFrame(0xfa, 0, 1, []byte("unknown frame type")) // ignored (RFC 9113 §4.1)
			s.send(s2c)
			s.fr[s2c].WriteDataPadded(1, true, []byte("defg"), []byte{0})
			s.send(s2c)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)[1]
			if v.req.Method != "POST" || v.req.Target != "/x" || string(v.reqBody) != "hello" {
				t.Errorf("request %+v body %q", v.req, v.reqBody)
			}
			if v.resp.Status != 200 || string(v.body) != "abcdefg" {
				t.Errorf("response %+v body %q", v.resp, v.body)
			}
			if len(v.chunks) != 2 || v.chunks[0].Offset != 0 || v.chunks[0].Size != 3 || v.chunks[1].Offset != 3 || v.chunks[1].Size != 4 {
				t.Errorf("chunks %+v %+v; want 0+3, 3+4", v.chunks[0], v.chunks[1])
			}
			wantEnd(t, "request", v.reqEnd, formats.EndComplete, "")
			wantEnd(t, "response", v.end, formats.EndComplete, "")
			if len(c.streams) != 0 {
				t.Errorf("%d streams still tracked", len(c.streams))
			}
		},
	},
	{
		name: "continuation both ways, interim response, trailers",
		build: func(s *h2Script) {
			blk := s.block(c2s, ":method", "GET", ":scheme", "https", ":path", "/api/v1/pods?watch=1", ":authority", "a",
				"x-long", strings.Repeat("v", 300))
			s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk[:5], EndStream: true})
			s.send(c2s)
			s.fr[c2s].WriteContinuation(3, false, blk[5:100])
			s.send(c2s)
			s.fr[c2s].WriteContinuation(3, true, blk[100:])
			s.send(c2s)
			s.response(3, false, "103", "text/plain", "link", "</x>")
			blk = s.block(s2c, ":status", "200", "content-type", "application/json")
			s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk[:1]})
			s.send(s2c)
			s.fr[s2c].WriteContinuation(3, true, blk[1:])
			s.send(s2c)
			s.data(s2c, 3, false, `{"type":"ADDED","object":{"kind":"Pod"}}`+"\n"+`{"type":"DEL`)
			s.data(s2c, 3, false, `ETED","object":{"kind":"Pod"}}`+"\n")
			s.headers(s2c, 3, true, "grpc-status", "0", "x-checksum", "abc")
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)[3]
			if v.req.Target != "/api/v1/pods?watch=1" || headerValue(v.req.Header, "x-long") != strings.Repeat("v", 300) {
				t.Errorf("request %+v", v.req)
			}
			if v.resp.Status != 200 || v.resp.Events != frame.JSON || len(v.frames) != 2 {
				t.Errorf("response %+v, %d frames; want 200, JSON, 2 events", v.resp, len(v.frames))
			}
			if len(v.frames) == 2 && (string(v.frames[1].Data) != `{"type":"DELETED","object":{"kind":"Pod"}}` || v.frames[1].Time != v.chunks[1].Time) {
				t.Errorf("event 1 = %q at %d", v.frames[1].Data, v.frames[1].Time)
			}
			want := []formats.Header{{Name: "grpc-status", Value: "0"}, {Name: "x-checksum", Value: "abc"}}
			if !reflect.DeepEqual(v.end.Trailer, want) {
				t.Errorf("trailer %+v; want %+v", v.end.Trailer, want)
			}
			wantEnd(t, "response", v.end, formats.EndComplete, "")
		},
	},
	{
		name: "resets",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/a")
			s.request(3, false, "PUT", "/b")
			s.data(c2s, 3, false, "part")
			s.response(1, false, "200", "text/plain")
			s.data(s2c, 1, false, "x")
			s.fr[s2c].WriteRSTStream(1, http2.ErrCodeInternal)
			s.send(s2c)
			s.fr[c2s].WriteRSTStream(3, http2.ErrCodeCancel)
			s.send(c2s)
			s.data(s2c, 1, false, "late") // in flight: ignored
			s.fr[s2c].WriteRSTStream(3, http2.ErrCodeStreamClosed)
			s.send(s2c)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)
			wantEnd(t, "stream 1 request", v[1].reqEnd, formats.EndComplete, "")
			wantEnd(t, "stream 1 response", v[1].end, formats.EndReset, "RST_STREAM INTERNAL_ERROR from the server")
			if string(v[1].body) != "x" {
				t.Errorf("stream 1 body %q; want x", v[1].body)
			}
			wantEnd(t, "stream 3 request", v[3].reqEnd, formats.EndReset, "RST_STREAM CANCEL from the client")
			if v[3].end != nil || string(v[3].reqBody) != "part" {
				t.Errorf("stream 3: response End %+v, request body %q", v[3].end, v[3].reqBody)
			}
		},
	},
	{
		name: "goaway",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/1")
			s.request(3, true, "GET", "/3")
			s.request(5, true, "GET", "/5")
			s.response(1, false, "200", "text/plain")
			s.fr[s2c].WriteGoAway(3, http2.ErrCodeNo, nil)
			s.send(s2c)
			s.response(3, true, "204", "text/plain")
			s.data(s2c, 1, true, "done")
			s.fr[c2s].WriteGoAway(0, http2.ErrCodeNo, nil)
			s.send(c2s)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)
			wantEnd(t, "stream 1", v[1].end, formats.EndComplete, "")
			wantEnd(t, "stream 3", v[3].end, formats.EndComplete, "")
			wantEnd(t, "stream 5", v[5].reqEnd, formats.EndComplete, "")
			if v[5].resp != nil || v[5].end != nil {
				t.Errorf("stream 5: response %+v End %+v; want none (not processed)", v[5].resp, v[5].end)
			}
			if string(v[1].body) != "done" {
				t.Errorf("stream 1 body %q", v[1].body)
			}
		},
	},
	{
		name: "goaway with error",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/1")
			s.response(1, false, "200", "text/plain")
			s.fr[s2c].WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("too many"))
			s.send(s2c)
		},
		end: func(c *h2Conn, t int64) { c.finish(formats.EndReset, t) },
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, `GOAWAY ENHANCE_YOUR_CALM (last stream 0): "too many"`)
			wantEnd(t, "stream 1", byStream(t, recs)[1].end, formats.EndReset, "GOAWAY ENHANCE_YOUR_CALM from the server")
		},
	},
	{
		name: "push promise",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/")
			// The promise's block adds "x-pushed" to the server's
			// dynamic table; the response below refers to it.
			s.fr[s2c].WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true,
				BlockFragment: s.block(s2c, ":method", "GET", ":scheme", "https", ":path", "/style.css", ":authority", "a", "x-pushed", "yes")})
			s.send(s2c)
			s.response(2, false, "200", "text/css")
			s.data(s2c, 2, true, "body{}")
			s.response(1, false, "200", "text/html", "x-pushed", "yes")
			s.data(s2c, 1, true, "<html>")
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, "PUSH_PROMISE on stream 1: server push is not supported; promised stream 2")
			v := byStream(t, recs)
			if len(v) != 1 || string(v[1].body) != "<html>" || headerValue(v[1].resp.Header, "x-pushed") != "yes" {
				t.Errorf("exchanges %v; want stream 1 only, its response decoded", v)
			}
		},
	},
	{
		name: "response without request",
		build: func(s *h2Script) {
			s.response(7, false, "200", "application/json")
			s.data(s2c, 7, true, `{"type":"ADDED","object":{"kind":"Pod"}}`+"\n")
			s.request(7, true, "GET", "/late") // ignored: the stream's request is missing
			s.request(9, true, "GET", "/next")
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, "HEADERS on stream 7, which is neither open nor a new client stream")
			v := byStream(t, recs)
			if !v[7].req.Missing || v[7].req.Method != "" || v[7].resp.Status != 200 || len(v[7].frames) != 1 {
				t.Errorf("stream 7: %+v %+v %d frames; want a missing request, a sniffed JSON watch", v[7].req, v[7].resp, len(v[7].frames))
			}
			if v[9].req.Target != "/next" {
				t.Errorf("stream 9: %+v", v[9].req)
			}
		},
	},
	{
		name: "table sizes",
		build: func(s *h2Script) {
			// The server lets the client's encoder use 64 KiB; the client
			// shrinks the server's to 0.
			s.fr[s2c].WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
			s.send(s2c)
			s.fr[c2s].WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
			s.send(c2s)
			s.enc[c2s].SetMaxDynamicTableSizeLimit(65536)
			s.enc[c2s].SetMaxDynamicTableSize(65536)
			s.enc[s2c].SetMaxDynamicTableSize(0)
			s.request(1, false, "POST", "/big", "x-a", strings.Repeat("a", 30000))
			s.data(c2s, 1, true, strings.Repeat("b", 100000)) // one frame: the server allows 1 MiB
			s.request(3, true, "GET", "/again", "x-a", strings.Repeat("a", 30000))
			s.response(1, true, "200", "text/plain", "x-b", "b")
			s.response(3, true, "200", "text/plain", "x-b", "b")
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)
			if len(headerValue(v[3].req.Header, "x-a")) != 30000 || len(v[1].reqBody) != 100000 || headerValue(v[3].resp.Header, "x-b") != "b" {
				t.Errorf("stream 3: %d-byte x-a, stream 1 body %d bytes", len(headerValue(v[3].req.Header, "x-a")), len(v[1].reqBody))
			}
		},
	},
	{
		// A gap in each direction: the framing is found again, stream 1's
		// watch goes on (an event cut by the gap is lost, not spliced),
		// and header blocks after the gap cannot be decoded.
		name: "gap",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/api/v1/pods?watch=true")
			s.request(3, true, "GET", "/b")
			s.response(1, false, "200", "application/json")
			s.data(s2c, 1, false, `{"type":"ADDED","object":{"a":0}}`+"\n")
			h2GapPieces = s.pieces
			// What follows is fed by the case's end: the frames after the
			// gap, and in each direction the frames the gap cuts.
			frames := func(dir formats.Direction, write func()) []byte {
				write()
				b := bytes.Clone(s.buf[dir].Bytes())
				s.buf[dir].Reset()
				return b
			}
			h2GapLost = frames(s2c, func() {
				s.fr[s2c].WriteData(1, false, []byte(`{"type":"MODIFIED","object":{"b":1}}`+"\n"))
				s.fr[s2c].WriteData(1, false, []byte(`{"type":"MODIFIED","object":{"c":2}}`+"\n"))
			})
			h2GapAfter = frames(s2c, func() {
				s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true,
					BlockFragment: s.block(s2c, ":status", "200", "content-type", "text/plain")})
				s.fr[s2c].WriteData(3, true, []byte("b"))
				s.fr[s2c].WriteData(1, false, []byte(`{"type":"MODIFIED","object":{"d":3}}`+"\n"))
				s.fr[s2c].WriteData(1, true, []byte(`{"type":"DELETED","object":{"e":4}}`+"\n"))
			})
			s.block(c2s, "x-lost", "in the gap") // a lost header block's entry
			h2GapC2S = frames(c2s, func() {
				s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 5, EndHeaders: true, EndStream: true,
					BlockFragment: s.block(c2s, ":method", "GET", ":scheme", "https", ":path", "/c", ":authority", "example.test", "x-lost", "in the gap")})
			})
			h2GapS2C = frames(s2c, func() {
				s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 5, EndHeaders: true, EndStream: true,
					BlockFragment: s.block(s2c, ":status", "204")})
			})
		},
		end: func(c *h2Conn, t int64) {
			// The gap takes the first frame but its first 20 bytes and the
			// second but its last 30.
			c.data(s2c, h2GapLost[:20], t)
			c.gap(s2c, int64(len(h2GapLost)-20-30), t)
			c.data(s2c, h2GapLost[len(h2GapLost)-30:], t+1)
			c.data(s2c, h2GapAfter, t+2)
			c.gap(c2s, 10, t+3)
			c.data(c2s, h2GapC2S, t+4)
			c.data(s2c, h2GapS2C, t+5)
			c.finish(formats.EndTruncated, t+6)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			lost := len(h2GapLost) - 50
			wantAnomaly(t, recs,
				fmt.Sprintf("gap: %d bytes missing from the server→client stream", lost),
				"resync: http2 server→client: framing resumed after a gap at a HEADERS frame on stream 3, 30 bytes skipped",
				"gap: http2 server→client: the response head of stream 3 cannot be decoded after a gap",
				// The newline after the last event before the gap.
				"resync: skipped 1 body bytes that belong to no complete event",
				"gap: 10 bytes missing from the client→server stream",
				"resync: http2 client→server: framing resumed after a gap at a HEADERS frame on stream 5, 0 bytes skipped",
				"gap: http2 client→server: the request head of stream 5 cannot be decoded after a gap",
				"gap: http2 server→client: the response head of stream 5 cannot be decoded after a gap")
			var off int64
			for _, p := range h2GapPieces {
				if p.dir == s2c {
					off += int64(len(p.data))
				}
			}
			as := anomalies(recs)
			if as[0].Offset != off+20 || as[1].Offset != off+20+int64(lost) {
				t.Errorf("gap at offset %d, resync from %d; want %d, %d", as[0].Offset, as[1].Offset, off+20, off+20+int64(lost))
			}
			v := byStream(t, recs)
			wantEnd(t, "stream 1", v[1].end, formats.EndGap, "")
			var evs []string
			for _, f := range v[1].frames {
				evs = append(evs, string(f.Data))
			}
			want := []string{`{"type":"ADDED","object":{"a":0}}`, `{"type":"MODIFIED","object":{"d":3}}`, `{"type":"DELETED","object":{"e":4}}`}
			if !reflect.DeepEqual(evs, want) {
				t.Errorf("stream 1 events %q; want %q", evs, want)
			}
			if v[3].end != nil || v[5] == nil || v[5].end != nil {
				t.Errorf("streams 3, 5: %+v, %+v; want their response heads lost", v[3], v[5])
			}
			if v[5] != nil && !v[5].req.Missing {
				t.Errorf("stream 5 request %+v; want it missing", v[5].req)
			}
		},
	},
	{
		name: "capture ends",
		build: func(s *h2Script) {
			s.request(1, false, "POST", "/a")
			s.request(3, true, "GET", "/b")
			s.response(3, false, "200", "text/plain")
			s.data(s2c, 3, false, "x")
			blk := s.block(c2s, ":method", "GET", ":path", "/c")
			s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: blk})
			s.send(c2s)
			s.raw(s2c, []byte{0, 0, 10, 0, 0})
		},
		end: func(c *h2Conn, t int64) { c.finish(formats.EndTruncated, t) },
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, "truncated: http2 client→server: capture ended inside the header block of stream 5",
				"truncated: http2 server→client: capture ended inside a frame (5 bytes)")
			v := byStream(t, recs)
			wantEnd(t, "stream 1 request", v[1].reqEnd, formats.EndTruncated, "capture ended")
			wantEnd(t, "stream 3", v[3].end, formats.EndTruncated, "capture ended")
			if len(v) != 2 {
				t.Errorf("%d exchanges; want 2", len(v))
			}
		},
	},
	{
		name: "connection closed",
		build: func(s *h2Script) {
			s.request(1, false, "POST", "/a")
			s.request(3, true, "GET", "/b")
			s.response(3, false, "200", "text/plain")
		},
		end: func(c *h2Conn, t int64) {
			c.fin(c2s, t)
			c.data(s2c, []byte{0, 0, 1, 0, 0, 0, 0, 0, 3, 'z'}, t+1) // the response goes on
			c.fin(s2c, t+2)
			c.finish(formats.EndComplete, t+3)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)
			wantEnd(t, "stream 1 request", v[1].reqEnd, formats.EndClosed, "connection closed before END_STREAM")
			wantEnd(t, "stream 3", v[3].end, formats.EndClosed, "connection closed before END_STREAM")
			if string(v[3].body) != "z" {
				t.Errorf("stream 3 body %q", v[3].body)
			}
		},
	},
	{
		name: "connection reset",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/a")
		},
		end: func(c *h2Conn, t int64) { c.finish(formats.EndReset, t) },
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs)
			v := byStream(t, recs)
			wantEnd(t, "stream 1 request", v[1].reqEnd, formats.EndComplete, "")
			if v[1].end != nil {
				t.Errorf("response End %+v; want none (no response)", v[1].end)
			}
		},
	},
	{
		name: "bad preface",
		build: func(s *h2Script) {
			s.pieces = []wirePiece{{dir: c2s, data: []byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\nmore"), t: h2Base}}
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, "malformed: the client's bytes do not begin with the HTTP/2 connection preface",
				"unknown-protocol: 10 bytes after the HTTP/2 parsing stopped")
		},
	},
	{
		name: "frame larger than the receiver allows",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/")
			s.response(1, false, "200", "text/plain")
			s.data(s2c, 1, false, strings.Repeat("x", 16385))
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs, "DATA frame of 16385 bytes on stream 1 is larger than the receiver's SETTINGS_MAX_FRAME_SIZE 16384",
				"16394 bytes after the HTTP/2 parsing stopped")
			wantEnd(t, "stream 1", byStream(t, recs)[1].end, formats.EndError, "HTTP/2 parsing stopped")
		},
	},
	{
		name: "frame errors",
		build: func(s *h2Script) {
			s.request(1, true, "GET", "/")
			s.fr[c2s].WriteWindowUpdate(1, 0) // a stream error: ignored
			s.send(c2s)
			s.fr[s2c].WriteRawFrame(http2.FrameData, 0, 99, []byte("idle"))
			s.send(s2c)
			s.data(s2c, 1, false, "before the response")
			s.headers(c2s, 2, true, ":method", "GET")
			s.response(1, false, "2x0", "text/plain")
			s.headers(s2c, 1, false, "x-trailer", "1")
			s.fr[c2s].WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100})
			s.send(c2s)
			s.fr[c2s].WriteRawFrame(http2.FrameHeaders, 0, 0, nil) // a connection error
			s.send(c2s)
		},
		check: func(t *testing.T, recs []formats.Record, c *h2Conn) {
			wantAnomaly(t, recs,
				"invalid WINDOW_UPDATE frame on stream 1",
				"DATA on idle stream 99",
				"DATA on stream 1 before the response HEADERS",
				"HEADERS on stream 2, which is neither open nor a new client stream",
				"response on stream 1 without a valid :status",
				"second HEADERS on stream 1 without END_STREAM",
				"invalid setting [MAX_FRAME_SIZE = 100]",
				"invalid HEADERS frame on stream 0",
			)
		},
	},
}

// TestH2Synthetic runs scripted connections, as written and one byte at a
// time (which must record the same).
func TestH2Synthetic(t *testing.T) {
	for _, tc := range h2SynthCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH2Script()
			tc.build(s)
			recs, c := runH2(s.pieces, nil, tc.end)
			tc.check(t, recs, c)
			byte1, _ := runH2(s.pieces, splitBytes, tc.end)
			if !reflect.DeepEqual(byte1, recs) {
				t.Errorf("fed one byte at a time: %d records, different from fed whole (%d)", len(byte1), len(recs))
			}
		})
	}
}
