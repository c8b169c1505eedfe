package capture

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/wtrace/wtrace/formats"
)

// checkH2Bounded checks what a connection holds against the limits.
func checkH2Bounded(t testing.TB, c *h2Conn) {
	t.Helper()
	for i := range c.d {
		d := &c.d[i]
		if len(d.buf) > h2FrameHeaderLen+int(d.maxFrame) || cap(d.buf) > h2FrameHeaderLen+(1<<24) {
			t.Fatalf("%s: frame buffer %d bytes (cap %d), max frame %d", d.dir, len(d.buf), cap(d.buf), d.maxFrame)
		}
		if len(d.rbuf) > maxH2ResyncWindow+h2ResyncStep {
			t.Fatalf("%s: resync buffer %d bytes", d.dir, len(d.rbuf))
		}
		if len(d.blk) > maxH2HeaderBlock {
			t.Fatalf("%s: header block buffer %d bytes", d.dir, len(d.blk))
		}
		if len(d.fields) > maxHeaderFields {
			t.Fatalf("%s: %d header fields kept", d.dir, len(d.fields))
		}
	}
	if len(c.streams) > maxH2Streams {
		t.Fatalf("%d streams tracked", len(c.streams))
	}
}

// hostileScript returns a script: the preface and SETTINGS, then what
// build adds.
func hostileScript(build func(s *h2Script)) []wirePiece {
	s := newH2Script()
	build(s)
	return s.pieces
}

func TestH2Hostile(t *testing.T) {
	frame := func(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
		var b bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		fr.AllowIllegalWrites = true
		fr.WriteRawFrame(typ, flags, id, payload)
		return b.Bytes()
	}
	cases := []struct {
		name    string
		pieces  []wirePiece
		want    []string // substrings of the anomalies, in order
		maxRecs int      // bound on the records written (0: no bound)
	}{
		{
			name: "huge frame length",
			pieces: hostileScript(func(s *h2Script) {
				s.raw(s2c, []byte{0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1})
				s.raw(s2c, make([]byte, 100000))
			}),
			want: []string{"DATA frame of 16777215 bytes on stream 1 is larger than the receiver's SETTINGS_MAX_FRAME_SIZE 16384",
				"100009 bytes after the HTTP/2 parsing stopped"},
		},
		{
			name: "huge frame within a raised limit, never completed",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[c2s].WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1<<24 - 1})
				s.send(c2s)
				s.raw(s2c, []byte{0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1})
				s.raw(s2c, make([]byte, 100000))
			}),
			want: []string{"truncated: http2 server→client: connection closed inside a frame (100009 bytes)"},
		},
		{
			name: "HEADERS without END_HEADERS forever",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 16000)})
				s.send(c2s)
				for range 100 {
					s.fr[c2s].WriteContinuation(1, false, make([]byte, 16000))
					s.send(c2s)
				}
			}),
			want: []string{"limit: http2 client→server: header block on stream 1 larger than 1048576 bytes",
				"bytes after the HTTP/2 parsing stopped"},
		},
		{
			name: "HEADERS interrupted by another frame",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
				s.send(c2s)
				s.fr[c2s].WritePing(false, [8]byte{})
				s.send(c2s)
			}),
			want: []string{"invalid PING frame on stream 0 (connection error: PROTOCOL_ERROR: got PING for stream 0; expected CONTINUATION following HEADERS for stream 1)"},
		},
		{
			name: "HPACK garbage",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: bytes.Repeat([]byte{0xff}, 50)})
				s.send(c2s)
				s.request(3, true, "GET", "/")
			}),
			want: []string{"header block on stream 1: HPACK decoding failed", "bytes after the HTTP/2 parsing stopped"},
		},
		{
			name: "HPACK index out of range",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: []byte{0xff, 0x80, 0x01}})
				s.send(s2c)
			}),
			want: []string{"HPACK decoding failed (decoding error: invalid indexed representation index 255)"},
		},
		{
			name: "dynamic table beyond the cap",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[s2c].WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 4 << 20})
				s.send(s2c)
				s.enc[c2s].SetMaxDynamicTableSizeLimit(2 << 20)
				s.enc[c2s].SetMaxDynamicTableSize(2 << 20)
				s.request(1, true, "GET", "/")
			}),
			want: []string{"HPACK decoding failed (decoding error: dynamic table size update too large)"},
		},
		{
			name: "DATA on idle streams",
			pieces: hostileScript(func(s *h2Script) {
				for i := range 1000 {
					s.raw(s2c, frame(http2.FrameData, 0, uint32(2*i+1), []byte("x")))
				}
			}),
			want: append(repeatString("DATA on idle stream", maxH2Notes), "limit: more than 64 anomalies on this HTTP/2 connection"),
		},
		{
			name: "too many streams",
			pieces: hostileScript(func(s *h2Script) {
				blk := s.block(c2s, ":method", "GET", ":path", "/", ":scheme", "http", ":authority", "a")
				for i := range maxH2Streams + 10 {
					s.fr[c2s].WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndHeaders: true, BlockFragment: blk})
					s.send(c2s)
				}
			}),
			want: repeatString("streams open at once; stream", 10),
		},
		{
			name: "header list amplification",
			pieces: hostileScript(func(s *h2Script) {
				s.fr[c2s].WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
				s.send(c2s)
				// One 4000-byte field in the dynamic table, then a block
				// referring to it 5000 times (20 MB decoded).
				blk := s.block(s2c, ":status", "200", "x-big", strings.Repeat("v", 4000))
				blk = append(blk, bytes.Repeat([]byte{0x80 | 62}, 5000)...)
				s.request(1, true, "GET", "/")
				s.fr[s2c].WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: blk})
				s.send(s2c)
			}),
			want: []string{"limit: http2 server→client: header block on stream 1 has more than 1024 fields or 1048576 bytes"},
		},
		{
			name: "anomaly flood from one frame kind",
			pieces: hostileScript(func(s *h2Script) {
				for range 500 {
					s.fr[c2s].WriteWindowUpdate(1, 0)
					s.send(c2s)
				}
			}),
			want:    append(repeatString("invalid WINDOW_UPDATE frame", maxH2Notes), "limit: more than 64 anomalies"),
			maxRecs: 70,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, split := range []func([]byte) [][]byte{nil, splitRandom(3)} {
				recs, c := runH2(tc.pieces, split, nil)
				checkH2Bounded(t, c)
				wantAnomaly(t, recs, tc.want...)
				if tc.maxRecs > 0 && len(recs) > tc.maxRecs {
					t.Errorf("%d records; want at most %d", len(recs), tc.maxRecs)
				}
			}
		})
	}
}

func repeatString(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestH2RandomAfterPreface feeds random bytes after the preface: never a
// panic, always within the limits, and an anomaly saying why parsing
// stopped (or nothing parsed at all).
func TestH2RandomAfterPreface(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 9))
		b := make([]byte, 1+r.IntN(5000))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		dir := formats.Direction(seed % 2)
		pieces := []wirePiece{{dir: c2s, data: h2Preface, t: h2Base}, {dir: dir, data: b, t: h2Base + 1}}
		recs, c := runH2(pieces, splitRandom(seed), nil)
		checkH2Bounded(t, c)
		if len(anomalies(recs)) == 0 {
			t.Errorf("seed %d: %d random bytes %s: no anomaly", seed, len(b), dir)
		}
	}
}

// h2Script encoding for FuzzH2: a sequence of pieces, each a control byte
// (bit 7: direction; bits 0-6: length, 0 meaning a gap of the next byte's
// value) and its bytes. The client preface is fed before everything.
func encodeH2Script(pieces []wirePiece) []byte {
	var out []byte
	for i, p := range pieces {
		data := p.data
		if i == 0 && p.dir == c2s && bytes.HasPrefix(data, h2Preface) {
			data = data[len(h2Preface):]
		}
		for len(data) > 0 {
			n := min(len(data), 127)
			out = append(out, byte(p.dir)<<7|byte(n))
			out = append(out, data[:n]...)
			data = data[n:]
		}
	}
	return out
}

// runH2Script feeds an encoded script to a new connection, checking the
// limits after every piece, and returns the records. With bytewise, every
// piece is fed one byte at a time.
func runH2Script(t testing.TB, script []byte, bytewise bool) (recs []formats.Record, gapped bool) {
	sink := &memSink{}
	c := newH2Conn(newSession(sink, true), 0)
	tm := h2Base
	c.data(c2s, h2Preface, tm)
	for len(script) > 0 {
		ctl := script[0]
		script = script[1:]
		dir := formats.Direction(ctl >> 7)
		n := int(ctl & 0x7f)
		tm++
		if n == 0 {
			if len(script) > 0 {
				gapped = true
				c.gap(dir, int64(script[0])+1, tm)
				script = script[1:]
			}
			continue
		}
		n = min(n, len(script))
		if bytewise {
			for i := range n {
				c.data(dir, script[i:i+1], tm)
			}
		} else {
			c.data(dir, script[:n], tm)
		}
		script = script[n:]
		checkH2Bounded(t, c)
	}
	c.fin(c2s, tm+1)
	c.fin(s2c, tm+1)
	c.finish(formats.EndTruncated, tm+2)
	return sink.recs, gapped
}

var update = flag.Bool("update", false, "rewrite testdata/fuzz/FuzzH2 from the synthetic test scripts")

// h2SeedScripts are the fuzz seeds: the synthetic cases' scripts.
func h2SeedScripts() map[string][]byte {
	out := map[string][]byte{}
	for _, tc := range h2SynthCases {
		s := newH2Script()
		tc.build(s)
		name := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, tc.name)
		out[name] = encodeH2Script(s.pieces)
	}
	return out
}

// TestWriteH2FuzzSeeds writes the seed corpus with -update.
func TestWriteH2FuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzH2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range h2SeedScripts() {
		if len(b) > 64<<10 {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "synth-"+name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzH2 feeds random bytes as the two directions of a connection (after
// a valid preface): no panic, memory within the limits, records in the
// order the session model promises, and the same records whether the
// bytes come in pieces or one at a time — unless there are gaps: the
// search for a frame boundary after a gap takes the end of the bytes
// captured so far as a sign of one (see h2Dir.resyncFeed).
func FuzzH2(f *testing.F) {
	for _, b := range h2SeedScripts() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		recs, gapped := runH2Script(t, script, false)
		viewExchanges(t, recs)
		byte1, _ := runH2Script(t, script, true)
		viewExchanges(t, byte1)
		if !gapped && !reflect.DeepEqual(byte1, recs) {
			for i := range min(len(recs), len(byte1)) {
				if !reflect.DeepEqual(byte1[i], recs[i]) {
					t.Fatalf("fed one byte at a time, record %d = %+v; fed in pieces: %+v", i, byte1[i], recs[i])
				}
			}
			t.Fatalf("fed one byte at a time: %d records; fed in pieces: %d", len(byte1), len(recs))
		}
	})
}

// TestH2ResyncGivesUp: after a gap, bytes in which no frame boundary can
// be found end the parsing of the connection once maxH2ResyncSkip bytes
// were searched, with the search buffer bounded all along.
func TestH2ResyncGivesUp(t *testing.T) {
	s := newH2Script()
	s.request(1, true, "GET", "/api/v1/pods?watch=true")
	s.response(1, false, "200", "application/json")
	sink := &memSink{}
	c := newH2Conn(newSession(sink, true), 0)
	for _, p := range s.pieces {
		c.data(p.dir, p.data, p.t)
	}
	c.gap(s2c, 100, s.t)
	junk := bytes.Repeat([]byte{0xff}, 1500)
	for i := 0; i < (maxH2ResyncSkip+len(junk))/len(junk)+2; i++ {
		c.data(s2c, junk, s.t+int64(i))
		checkH2Bounded(t, c)
	}
	c.finish(formats.EndTruncated, s.t+1e6)
	wantAnomaly(t, sink.recs, "gap: 100 bytes missing", "resync: http2 server→client: no frame boundary found in",
		"unknown-protocol:")
	wantEnd(t, "stream 1", byStream(t, sink.recs)[1].end, formats.EndGap, "HTTP/2 parsing stopped")
}
