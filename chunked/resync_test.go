package chunked

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestResync(t *testing.T) {
	tests := []struct {
		name string
		in   string
		skip int
		ok   bool
	}{
		{"at a size line", "5\r\nhello\r\n0\r\n\r\n", 0, true},
		{"after partial data", "lo\r\n5\r\nhello\r\n0\r\n\r\n", 4, true},
		{"between CR and LF", "\n5\r\nhello\r\n0\r\n\r\n", 1, true},
		{"after the CRLF ending data", "\r\n5\r\nhello\r\n", 2, true},
		{"only the end of the body", "xyz\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", 5, true},
		{"end of body with trailers", "xyz\r\n0\r\nA: b\r\n\r\n", 5, true},
		{"weak: one size line, data runs on", "zz\r\n8000\r\n" + strings.Repeat("x", 100), 4, true},
		{"weak: data then partial next line", "zz\r\n3\r\nabc\r\n8", 4, true},
		{"strong beats an earlier weak", "ffff\r\n\r\n3\r\nabc\r\n4\r\nabcd\r\n", 8, true},
		{"inside a size line, not the last chunk", "000\r\n{\"type\":\"ADDED\"}\n", 22, false},
		{"inside a size line, chain broken", "f\r\n" + strings.Repeat("x", 15) + "zz" + strings.Repeat("x", 20) + "\r\n3\r\nabc\r\n0\r\n\r\n", 42, true},
		{"last chunk needs its trailers", "zz\r\n0\r\n", 4, false},
		{"last chunk with bad trailer", "zz\r\n0\r\n{\"a\":1}\r\n\r\n", 18, false},
		{"incomplete size line", "zz\r\n80", 4, false},
		{"garbage", "zzzzzz", 6, false},
		{"empty", "", 0, false},
		{"bare LF lines", "zz\n5\nhello\n", 11, false},
		{"size too large", "zz\r\n10000000001\r\nx", 18, false},
		{"ends with CRLF", "zz\r\n", 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder()
			skip, ok := d.Resync([]byte(tt.in))
			if skip != tt.skip || ok != tt.ok {
				t.Fatalf("Resync(%q) = %d, %v; want %d, %v", tt.in, skip, ok, tt.skip, tt.ok)
			}
			if d.Offset() != int64(skip) || d.BodyOffset() != 0 {
				t.Errorf("Resync(%q): Offset() = %d, BodyOffset() = %d; want %d, 0", tt.in, d.Offset(), d.BodyOffset(), skip)
			}
			if ok {
				if r := decodeSegments(d, [][]byte{[]byte(tt.in[skip:])}, zeroTime); r.err != nil {
					t.Errorf("Decode(%q) after Resync: %v", tt.in[skip:], r.err)
				}
			}
		})
	}
}

// TestResyncGapDuringResync: Resync(nil) forgets the continuation, so the
// first byte after a further gap is a candidate again.
func TestResyncGapDuringResync(t *testing.T) {
	d := NewDecoder()
	if skip, ok := d.Resync([]byte("zz")); ok || skip != 2 {
		t.Fatalf("Resync(zz) = %d, %v", skip, ok)
	}
	if skip, ok := d.Resync(nil); ok || skip != 0 {
		t.Fatalf("Resync(nil) = %d, %v", skip, ok)
	}
	if skip, ok := d.Resync([]byte("5\r\nhello\r\n0\r\n\r\n")); !ok || skip != 0 || d.Offset() != 2 {
		t.Fatalf("Resync after gap = %d, %v, Offset %d; want 0, true, 2", skip, ok, d.Offset())
	}
}

// TestResyncContinuation: a caller that keeps p[skip:] and appends more
// data finds the same point as with all the data at once, and a CRLF split
// across calls still counts.
func TestResyncContinuation(t *testing.T) {
	tests := []struct {
		pieces []string
		at     int // offset of the chosen size line in the whole stream
	}{
		{[]string{"abc\r", "\n5\r\nhello\r\n0\r\n\r\n"}, 5},
		{[]string{"xyz", "\r\n", "5\r\nhel", "lo\r\n0\r\n\r\n"}, 5},
		{[]string{"xyz\r\n8", "00", "0\r\nxyz"}, 5},
		{[]string{"\n", "5\r\nhello"}, 1},
		{[]string{"zz", "5\r\nhello\r\n"}, -1}, // "5" does not follow a CRLF
		{[]string{"0", "\r\n\r\n"}, 0},
	}
	for _, tt := range tests {
		d := NewDecoder()
		var buf []byte
		at := -1
		for _, piece := range tt.pieces {
			buf = append(buf, piece...)
			skip, ok := d.Resync(buf)
			if ok {
				at = int(d.Offset())
				break
			}
			if len(buf)-skip >= MaxLineLength {
				t.Fatalf("Resync(%q) kept %d bytes", buf, len(buf)-skip)
			}
			buf = buf[skip:]
		}
		if at != tt.at {
			t.Errorf("Resync over %q found %d; want %d", tt.pieces, at, tt.at)
		}
	}
}

type midstreamFixture struct {
	File   string `json:"file"`
	Client string `json:"client"`
	Skip   int    `json:"skip"`
	Events []struct {
		Offset int    `json:"offset"`
		Len    int    `json:"len"`
		SHA256 string `json:"sha256"`
		Type   string `json:"type"`
		Name   string `json:"name"`
	} `json:"events"`
}

func midstreamFixtures(t *testing.T) []midstreamFixture {
	var fx []midstreamFixture
	if err := json.Unmarshal(readFixture(t, "midstream.json"), &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestResyncMidstream uses the real bytes of the corpus midstream capture:
// M1 starts 12796 bytes into a chunk's data, M2 at a size line. The events
// decoded from the resync point must have the sha256 of the truth.
func TestResyncMidstream(t *testing.T) {
	for _, fx := range midstreamFixtures(t) {
		t.Run(fx.Client, func(t *testing.T) {
			in := readFixture(t, fx.File)
			// Several amounts of data at hand: a whole window, one large
			// loopback segment, and just past the first size line.
			for _, n := range []int{len(in), 65483, fx.Skip + 4096} {
				d := NewDecoder()
				skip, ok := d.Resync(in[:n])
				if skip != fx.Skip || !ok {
					t.Fatalf("Resync(%d bytes of %s) = %d, %v; want %d, true", n, fx.File, skip, ok, fx.Skip)
				}
			}

			d := NewDecoder()
			skip, ok := d.Resync(in)
			if !ok || skip != fx.Skip {
				t.Fatalf("Resync = %d, %v", skip, ok)
			}
			r := decodeSegments(d, splitEvery(in[skip:], 1448), zeroTime)
			if r.err != nil || r.done {
				t.Fatalf("Decode after Resync = %s", r)
			}
			if first := r.events[0]; first.Kind != ChunkStart || first.Chunk.WireOffset != int64(fx.Skip) || first.Chunk.Offset != 0 {
				t.Errorf("first event %v; want ChunkStart at wire offset %d, body offset 0", first, fx.Skip)
			}
			if len(fx.Events) == 0 {
				t.Fatal("fixture has no complete event")
			}
			for _, ev := range fx.Events {
				if ev.Offset+ev.Len > len(r.data) {
					t.Fatalf("event %s at %d+%d beyond %d decoded bytes", ev.Name, ev.Offset, ev.Len, len(r.data))
				}
				b := r.data[ev.Offset : ev.Offset+ev.Len]
				sum := sha256.Sum256(b)
				if hex.EncodeToString(sum[:]) != ev.SHA256 || !bytes.HasPrefix(b, []byte(`{"type":"`+ev.Type+`"`)) {
					t.Errorf("event %s %s at decoded offset %d: sha256 %x; want %s", ev.Type, ev.Name, ev.Offset, sum, ev.SHA256)
				}
			}
			// Every complete line is a JSON watch event.
			lines := bytes.Split(r.data, []byte("\n"))
			for _, l := range lines[1 : len(lines)-1] {
				if !bytes.HasPrefix(l, []byte(`{"type":"`)) {
					t.Errorf("decoded line %.40q is not a watch event", l)
				}
			}
		})
	}
}

// TestResyncMidstreamStreaming joins M1 the way capture does: segments
// arrive, Resync is tried on what is kept, then Next takes over.
func TestResyncMidstreamStreaming(t *testing.T) {
	for _, fx := range midstreamFixtures(t) {
		in := readFixture(t, fx.File)
		for _, seg := range []int{1000, 4096, 1 << 14} {
			t.Run(fmt.Sprintf("%s/%d", fx.Client, seg), func(t *testing.T) {
				d := NewDecoder()
				var kept []byte
				synced := false
				var data []byte
				for _, p := range splitEvery(in, seg) {
					if !synced {
						kept = append(kept, p...)
						skip, ok := d.Resync(kept)
						if !ok {
							kept = kept[skip:]
							continue
						}
						synced, p = true, kept[skip:]
						if d.Offset() != int64(fx.Skip) {
							t.Fatalf("synced at %d; want %d", d.Offset(), fx.Skip)
						}
					}
					for len(p) > 0 {
						n, tok, err := d.Next(p, 0)
						if err != nil {
							t.Fatal(err)
						}
						data = append(data, tok.Data...)
						p = p[n:]
					}
				}
				if !synced {
					t.Fatal("never synced")
				}
				ev := fx.Events[0]
				if sum := sha256.Sum256(data[ev.Offset : ev.Offset+ev.Len]); hex.EncodeToString(sum[:]) != ev.SHA256 {
					t.Errorf("event %s: sha256 mismatch", ev.Name)
				}
			})
		}
	}
}

// TestResyncLinear guards against quadratic chain walking on hostile input.
func TestResyncLinear(t *testing.T) {
	in := []byte(strings.Repeat("1\r\nX\r\n", 20000) + "zz")
	d := NewDecoder()
	skip, ok := d.Resync(in)
	// Every chain ends in "zz": none valid, nothing pending.
	if ok || skip != len(in) {
		t.Fatalf("Resync = %d, %v; want %d, false", skip, ok, len(in))
	}
	in = []byte(strings.Repeat("\r\n0\r\na:b", 20000))
	if _, ok := d.Resync(in); ok {
		t.Fatal("Resync accepted a trailer section without end")
	}
}

// TestResyncEveryStart starts the M1 capture at many offsets (inside data,
// inside "8000\r\n", between CR and LF): Resync must always land on a true
// size line.
func TestResyncEveryStart(t *testing.T) {
	fx := midstreamFixtures(t)[0]
	in := readFixture(t, fx.File)
	heads := map[int]bool{}
	for off := fx.Skip; off < len(in); {
		heads[off] = true
		e := bytes.Index(in[off:], []byte("\r\n"))
		size, err := strconv.ParseInt(string(in[off:off+e]), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		off += e + 2 + int(size) + 2
	}
	var starts []int
	for s := fx.Skip - 8; s <= fx.Skip+8; s++ {
		starts = append(starts, s)
	}
	for s := 0; s < len(in)/2; s += 4999 {
		starts = append(starts, s)
	}
	for _, s := range starts {
		d := NewDecoder()
		skip, ok := d.Resync(in[s:])
		if !ok || !heads[s+skip] {
			t.Errorf("Resync(M1[%d:]) = %d, %v: offset %d is not a size line", s, skip, ok, s+skip)
		}
	}
}
