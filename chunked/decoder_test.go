package chunked

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

var validTests = []struct {
	name     string
	in       string
	data     string
	chunks   []Chunk // ChunkStart tokens (Time 0)
	last     Chunk   // the Done token's chunk
	trailers [][2]string
	rest     string
}{
	{
		name: "simple",
		in:   "5\r\nhello\r\n0\r\n\r\n",
		data: "hello", chunks: []Chunk{{Offset: 0, Size: 5, WireOffset: 0}},
		last: Chunk{Offset: 5, WireOffset: 10},
	},
	{
		name: "empty body",
		in:   "0\r\n\r\n",
		last: Chunk{},
	},
	{
		name: "several chunks, hex case, leading zeros",
		in:   "3\r\nabc\r\n000A\r\n0123456789\r\nb\r\nhello world\r\n0000\r\n\r\n",
		data: "abc0123456789hello world",
		chunks: []Chunk{
			{Offset: 0, Size: 3, WireOffset: 0},
			{Offset: 3, Size: 10, WireOffset: 8},
			{Offset: 13, Size: 11, WireOffset: 26},
		},
		last: Chunk{Offset: 24, WireOffset: 42},
	},
	{
		name: "sixteen hex digits",
		in:   "0000000000000002\r\nab\r\n0\r\n\r\n",
		data: "ab", chunks: []Chunk{{Size: 2}},
		last: Chunk{Offset: 2, WireOffset: 22},
	},
	{
		name: "data holding CRLF and framing look-alikes",
		in:   "b\r\n\r\n0\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		data: "\r\n0\r\n\r\n1\r\nx", chunks: []Chunk{{Size: 11}},
		last: Chunk{Offset: 11, WireOffset: 16},
	},
	{
		name: "extension token",
		in:   "5;foo\r\nhello\r\n0;bar\r\n\r\n",
		data: "hello", chunks: []Chunk{{Size: 5, Ext: "foo"}},
		last: Chunk{Offset: 5, WireOffset: 14, Ext: "bar"},
	},
	{
		name: "extension values",
		in:   "5;a=b;c=\"quoted string\";d\r\nhello\r\n0\r\n\r\n",
		data: "hello", chunks: []Chunk{{Size: 5, Ext: `a=b;c="quoted string";d`}},
		last: Chunk{Offset: 5, WireOffset: 34},
	},
	{
		name: "extension with BWS everywhere",
		in:   "5 ; a = b\t;\tc =\t\"x\\\"y\" \r\nhello\r\n0\r\n\r\n",
		data: "hello", chunks: []Chunk{{Size: 5, Ext: " a = b\t;\tc =\t\"x\\\"y\""}},
		last: Chunk{Offset: 5, WireOffset: 32},
	},
	{
		name: "quoted-string with obs-text and quoted-pair",
		in:   "1;q=\"\xe9t\xe9 \\\t\\\xff\"\r\nX\r\n0\r\n\r\n",
		data: "X", chunks: []Chunk{{Size: 1, Ext: "q=\"\xe9t\xe9 \\\t\\\xff\""}},
		last: Chunk{Offset: 1, WireOffset: 19},
	},
	{
		name: "repeated extension",
		in:   "1;n=1\r\na\r\n1;n=1\r\nb\r\n1;n=2\r\nc\r\n0;n=2\r\n\r\n",
		data: "abc",
		chunks: []Chunk{
			{Size: 1, Ext: "n=1"},
			{Offset: 1, Size: 1, Ext: "n=1", WireOffset: 10},
			{Offset: 2, Size: 1, Ext: "n=2", WireOffset: 20},
		},
		last: Chunk{Offset: 3, WireOffset: 30, Ext: "n=2"},
	},
	{
		name: "trailing whitespace after size (as net/http)",
		in:   "5 \t\r\nhello\r\n0 \r\n\r\n",
		data: "hello", chunks: []Chunk{{Size: 5}},
		last: Chunk{Offset: 5, WireOffset: 12},
	},
	{
		name: "trailers",
		in:   "1\r\nX\r\n0\r\nExpires: never\r\nX-Empty:\r\nX-Sp:  a  b \t\r\n\r\n",
		data: "X", chunks: []Chunk{{Size: 1}},
		last:     Chunk{Offset: 1, WireOffset: 6},
		trailers: [][2]string{{"Expires", "never"}, {"X-Empty", ""}, {"X-Sp", "a  b"}},
	},
	{
		name: "trailer value with obs-text",
		in:   "0\r\nA: \x80\xff!\r\n\r\n",
		last: Chunk{}, trailers: [][2]string{{"A", "\x80\xff!"}},
	},
	{
		name: "bytes after the body",
		in:   "2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
		data: "ok", chunks: []Chunk{{Size: 2}},
		last: Chunk{Offset: 2, WireOffset: 7},
		rest: "HTTP/1.1 200 OK\r\n",
	},
	{
		name: "longest line",
		in:   "1;" + strings.Repeat("a", MaxLineLength-4) + "\r\nX\r\n0\r\n\r\n",
		data: "X", chunks: []Chunk{{Size: 1, Ext: strings.Repeat("a", MaxLineLength-4)}},
		last: Chunk{Offset: 1, WireOffset: MaxLineLength + 3},
	},
	{
		name: "largest chunk size",
		in:   "10000000000\r\n",
		// incomplete: the chunk starts but its data is missing
		chunks: []Chunk{{Size: MaxChunkSize}},
	},
}

func TestDecoderValid(t *testing.T) {
	for _, tt := range validTests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeString(tt.in)
			complete := tt.name != "largest chunk size"
			if r.err != nil || r.done != complete || string(r.data) != tt.data || r.rest != tt.rest {
				t.Fatalf("Decode(%q) = %s; want data %q, done %v, rest %q", tt.in, r, tt.data, complete, tt.rest)
			}
			var starts []Chunk
			var trailers [][2]string
			var last Chunk
			for _, e := range r.events {
				switch e.Kind {
				case ChunkStart:
					starts = append(starts, e.Chunk)
				case Trailer:
					trailers = append(trailers, [2]string{e.Name, e.Value})
				case Done:
					last = e.Chunk
				}
			}
			if !equalSlices(starts, tt.chunks) || !equalSlices(trailers, tt.trailers) || last != tt.last {
				t.Errorf("Decode(%q) = chunks %+v, trailers %q, last %+v; want %+v, %q, %+v",
					tt.in, starts, trailers, last, tt.chunks, tt.trailers, tt.last)
			}
			if want := int64(len(tt.in) - len(tt.rest)); r.offset != want || r.body != int64(len(tt.data)) {
				t.Errorf("Decode(%q): Offset() = %d, BodyOffset() = %d; want %d, %d", tt.in, r.offset, r.body, want, len(tt.data))
			}
			checkOrder(t, tt.in, r)
		})
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkOrder checks the token grammar ( ChunkStart Data+ ChunkEnd )*
// Trailer* Done and that each chunk's Data adds up to its size, its
// ChunkEnd repeats its ChunkStart but for Time, and each size line sits at
// its WireOffset.
func checkOrder(t *testing.T, in string, r *result) {
	t.Helper()
	var cur *Chunk
	var got int64
	trailers := false
	for i, e := range r.events {
		bad := func(why string) { t.Fatalf("Decode(%q): event %d %v: %s; all: %s", in, i, e, why, r) }
		switch e.Kind {
		case ChunkStart:
			if cur != nil || trailers {
				bad("unexpected ChunkStart")
			}
			c := e.Chunk
			cur, got = &c, 0
			line := in[c.WireOffset:min(len(in), int(c.WireOffset)+maxHexDigits)]
			if !strings.HasPrefix(strings.ToLower(strings.TrimLeft(line, "0")), sizePrefix(c.Size)) {
				bad("WireOffset does not point at the size line")
			}
		case Data:
			if cur == nil || e.Chunk != *cur {
				bad("Data outside its chunk")
			}
			got += int64(len(e.Data))
		case ChunkEnd:
			if cur == nil || got != cur.Size {
				bad("ChunkEnd before the chunk's data")
			}
			want := *cur
			want.Time = e.Chunk.Time
			if e.Chunk != want {
				bad("ChunkEnd chunk differs from ChunkStart")
			}
			cur = nil
		case Trailer:
			if cur != nil {
				bad("Trailer inside a chunk")
			}
			trailers = true
		case Done:
			if cur != nil || i != len(r.events)-1 || e.Chunk.Size != 0 || e.Chunk.Offset != r.body {
				bad("bad Done")
			}
		default:
			bad("unexpected kind")
		}
	}
}

// sizePrefix is the hex size as the line starts, ignoring leading zeros.
func sizePrefix(n int64) string {
	const hex = "0123456789abcdef"
	var b []byte
	for ; n > 0; n >>= 4 {
		b = append([]byte{hex[n&15]}, b...)
	}
	return string(b)
}

var invalidTests = []struct {
	name     string
	in       string
	sentinel error
	detail   error // nil: not checked
	offset   int64
}{
	{"bare LF in chunk size", "1\na\r\n0\r\n\r\n", ErrMalformed, errBareLF, 1},
	{"extra CR in chunk size", "1\r\r\na\r\n0\r\n\r\n", ErrMalformed, errCR, 1},
	{"CR inside extension", "1;a\rb\r\na\r\n0\r\n\r\n", ErrMalformed, errCR, 3},
	{"bare LF in chunk data end", "1\r\na\n0\r\n\r\n", ErrMalformed, errNoCRLF, 4},
	{"bare LF in chunk extension", "1;\na\r\n0\r\n\r\n", ErrMalformed, errBareLF, 2},
	{"bare LF after last chunk", "0\n\r\n", ErrMalformed, errBareLF, 1},
	{"bare LF ending trailers", "0\r\n\n", ErrMalformed, errBareLF, 3},
	{"bare LF after trailer", "0\r\nA: b\n\r\n", ErrMalformed, errBareLF, 7},
	{"missing CRLF after data", "5\r\nhelloX\r\n", ErrMalformed, errNoCRLF, 8},
	{"CR without LF after data", "5\r\nhello\rX", ErrMalformed, errNoCRLF, 9},
	{"data longer than size", "3\r\nhello\r\n0\r\n\r\n", ErrMalformed, errNoCRLF, 6},
	{"empty size line", "\r\n", ErrMalformed, errSize, 0},
	{"bad hex", "g\r\n", ErrMalformed, errSize, 0},
	{"bad hex after digits", "5x\r\nhello\r\n", ErrMalformed, errSize, 1},
	{"0x prefix", "0x5\r\nhello\r\n", ErrMalformed, errSize, 1},
	{"leading space", " 5\r\nhello\r\n", ErrMalformed, errSize, 0},
	{"negative", "-1\r\n", ErrMalformed, errSize, 0},
	{"space inside size", "1 0\r\n", ErrMalformed, errSize, 2},
	{"17 hex digits", "00000000000000001\r\n", ErrChunkTooLarge, nil, 16},
	{"18 hex digits", "ffffffffffffffffff\r\n", ErrChunkTooLarge, nil, 16},
	{"uint64 max", "ffffffffffffffff\r\n", ErrChunkTooLarge, nil, 0},
	{"MaxChunkSize+1", "10000000001\r\n", ErrChunkTooLarge, nil, 0},
	{"empty extension", "5;\r\nhello\r\n", ErrMalformed, errExt, 2},
	{"extension without name", "5;=a\r\nhello\r\n", ErrMalformed, errExt, 2},
	{"extension without value", "5;a=\r\nhello\r\n", ErrMalformed, errExt, 4},
	{"extension value not a token", "5;a=b c\r\nhello\r\n", ErrMalformed, errExt, 6},
	{"extension names separated by space", "5;a b\r\nhello\r\n", ErrMalformed, errExt, 4},
	{"NUL in extension", "5;a\x00\r\nhello\r\n", ErrMalformed, errExt, 3},
	{"unterminated quoted-string", "5;a=\"x\r\nhello\r\n", ErrMalformed, errExt, 6},
	{"CTL in quoted-string", "5;a=\"\x01\"\r\nhello\r\n", ErrMalformed, errExt, 5},
	{"bad quoted-pair", "5;a=\"\\\x01\"\r\nhello\r\n", ErrMalformed, errExt, 6},
	{"double semicolon", "5;a;;b\r\nhello\r\n", ErrMalformed, errExt, 4},
	{"extension on last chunk", "0;=\r\n\r\n", ErrMalformed, errExt, 2},
	{"line too long", "1;" + strings.Repeat("a", MaxLineLength-3) + "\r\nX\r\n0\r\n\r\n", ErrLineTooLong, nil, MaxLineLength},
	{"line too long without LF", strings.Repeat("0", 5000), ErrLineTooLong, nil, MaxLineLength},
	{"trailer line too long", "0\r\nA: " + strings.Repeat("b", MaxLineLength) + "\r\n\r\n", ErrLineTooLong, nil, 3 + MaxLineLength},
	{"trailer without name", "0\r\n: v\r\n\r\n", ErrMalformed, errField, 3},
	{"trailer without colon", "0\r\nname\r\n\r\n", ErrMalformed, errField, 6},
	{"space in trailer name", "0\r\nna me: v\r\n\r\n", ErrMalformed, errField, 5},
	{"space before colon", "0\r\nname : v\r\n\r\n", ErrMalformed, errField, 7},
	{"CTL in trailer value", "0\r\na: b\x01c\r\n\r\n", ErrMalformed, errField, 7},
	{"DEL in trailer value", "0\r\na: b\x7f\r\n\r\n", ErrMalformed, errField, 7},
	{"obs-fold in trailers", "0\r\na: b\r\n c\r\n\r\n", ErrMalformed, errObsFold, 9},
}

func TestDecoderInvalid(t *testing.T) {
	for _, tt := range invalidTests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeString(tt.in)
			e := asError(r.err)
			if e == nil || !errors.Is(r.err, tt.sentinel) || tt.detail != nil && !errors.Is(r.err, tt.detail) || e.Offset != tt.offset {
				t.Fatalf("Decode(%q) = %v; want %v (%v) at offset %d", tt.in, r.err, tt.sentinel, tt.detail, tt.offset)
			}
			if !strings.HasPrefix(r.err.Error(), "chunked: offset ") {
				t.Errorf("Decode(%q): error %q lacks the package and offset prefix", tt.in, r.err)
			}
			if r.done {
				t.Errorf("Decode(%q): Done despite error", tt.in)
			}
		})
	}
}

func TestDecoderSticky(t *testing.T) {
	d := NewDecoder()
	_, _, err1 := d.Next([]byte("zz\r\n"), 0)
	n, tok, err2 := d.Next([]byte("5\r\nhello\r\n"), 0)
	if err1 == nil || err2 != err1 || n != 0 || tok.Kind != None {
		t.Fatalf("Next after error = %d, %v, %v; want 0, None, %v", n, tok.Kind, err2, err1)
	}
	if d.Offset() != 0 {
		t.Errorf("Offset() = %d after an error in the first line; want 0", d.Offset())
	}
}

func TestDecoderAfterDone(t *testing.T) {
	d := NewDecoder()
	in := []byte("0\r\n\r\nmore")
	var last Kind
	for len(in) > 0 && last != Done {
		n, tok, err := d.Next(in, 0)
		if err != nil {
			t.Fatal(err)
		}
		in, last = in[n:], tok.Kind
	}
	for _, p := range [][]byte{in, nil} {
		n, tok, err := d.Next(p, 0)
		if n != 0 || tok.Kind != None || err != io.EOF {
			t.Errorf("Next(%q) after Done = %d, %v, %v; want 0, None, EOF", p, n, tok.Kind, err)
		}
	}
}

// TestDecoderPrefixes: every proper prefix of a valid body decodes without
// error and without Done.
func TestDecoderPrefixes(t *testing.T) {
	for _, tt := range validTests {
		for i := 0; i < len(tt.in)-len(tt.rest); i++ {
			if r := decodeString(tt.in[:i]); r.err != nil || r.done {
				t.Fatalf("Decode(%q) = %s; want no error, not done", tt.in[:i], r)
			}
		}
	}
}

// allInputs is every table input, valid or not.
func allInputs() []string {
	var ins []string
	for _, tt := range validTests {
		ins = append(ins, tt.in)
	}
	for _, tt := range invalidTests {
		ins = append(ins, tt.in)
	}
	return ins
}

// TestDecoderSplits: one byte at a time, and every split into two and
// (for short inputs) three pieces, give the one-shot result.
func TestDecoderSplits(t *testing.T) {
	for _, in := range allInputs() {
		b := []byte(in)
		want := decodeString(in)
		check := func(segs [][]byte) {
			t.Helper()
			if got := decodeSegments(NewDecoder(), segs, zeroTime); !got.equal(want) {
				t.Fatalf("Decode(%q) in pieces %q = %s; want %s", in, segs, got, want)
			}
		}
		check(bytewise(b))
		for i := 0; i <= len(b); i++ {
			check(splitAt(b, i))
		}
		if len(b) <= 64 {
			for i := 0; i <= len(b); i++ {
				for j := i; j <= len(b); j++ {
					check(splitAt(b, i, j))
				}
			}
		}
	}
}

// TestDecoderTimes pins the Time rule: ChunkStart gets the time of the
// input holding the LF of the size line, ChunkEnd that of the LF after the
// data, Done that of the final LF.
func TestDecoderTimes(t *testing.T) {
	tests := []struct {
		segs              []string
		start, end, done  int64
		secondStart, last int64
	}{
		{[]string{"5\r\nhello\r\n0\r\n\r\n"}, 1, 1, 1, 0, 0},
		{[]string{"5\r", "\nhel", "lo", "\r", "\n0\r\n", "\r", "\n"}, 2, 5, 7, 0, 0},
		{[]string{"5\r\nhello", "\r\n", "0\r\n\r\n"}, 1, 2, 3, 0, 0},
		{[]string{"5\r\nhell", "o", "\r\n0\r\n\r\n"}, 1, 3, 3, 0, 0},
	}
	for _, tt := range tests {
		segs := make([][]byte, len(tt.segs))
		for i, s := range tt.segs {
			segs[i] = []byte(s)
		}
		r := decodeSegments(NewDecoder(), segs, func(i int) int64 { return int64(i + 1) })
		var start, end, done int64
		for _, e := range r.events {
			switch e.Kind {
			case ChunkStart:
				start = e.Chunk.Time
			case ChunkEnd:
				end = e.Chunk.Time
			case Done:
				done = e.Chunk.Time
			}
		}
		if start != tt.start || end != tt.end || done != tt.done {
			t.Errorf("Decode(%q) times = start %d, end %d, done %d; want %d, %d, %d", tt.segs, start, end, done, tt.start, tt.end, tt.done)
		}
	}
}

// TestDecoderOffsets checks Offset() and BodyOffset() after every call on
// a real body fed in odd-sized segments.
func TestDecoderOffsets(t *testing.T) {
	in := readFixture(t, "basic-json-watch.chunked")
	d := NewDecoder()
	var off, body int64
	for p := in; len(p) > 0; {
		seg := p[:min(len(p), 1371)]
		p = p[len(seg):]
		for len(seg) > 0 {
			n, tok, err := d.Next(seg, 0)
			if err != nil {
				t.Fatal(err)
			}
			seg = seg[n:]
			off += int64(n)
			body += int64(len(tok.Data))
			if d.Offset() != off || d.BodyOffset() != body {
				t.Fatalf("after %d bytes: Offset() = %d, BodyOffset() = %d; want %d, %d", off, d.Offset(), d.BodyOffset(), off, body)
			}
			if tok.Kind == ChunkStart && (tok.Chunk.Offset != body || tok.Chunk.WireOffset+int64(len(sizePrefix(tok.Chunk.Size)))+2 != off) {
				t.Fatalf("ChunkStart %+v at offset %d, body %d", tok.Chunk, off, body)
			}
		}
	}
	if off != int64(len(in)) {
		t.Errorf("consumed %d of %d bytes", off, len(in))
	}
}

// TestDecoderFixtures decodes the real bodies and compares with
// net/http/httputil's decoding.
func TestDecoderFixtures(t *testing.T) {
	for _, name := range []string{"basic-json-watch.chunked", "large-objects-watch.chunked"} {
		t.Run(name, func(t *testing.T) {
			in := readFixture(t, name)
			want := httputilDecode(t, in)
			for _, seg := range []int{1 << 30, 65483, 28678, 4096, 1448, 7} {
				segs := splitEvery(in, seg)
				r := decodeSegments(NewDecoder(), segs, zeroTime)
				if r.err != nil || !r.done || !bytes.Equal(r.data, want) {
					t.Fatalf("Decode(%s in %d-byte segments) = done %v, %v, %d bytes; want done, %d bytes", name, seg, r.done, r.err, len(r.data), len(want))
				}
				checkOrder(t, string(in), r)
			}
		})
	}
}

func splitEvery(in []byte, n int) [][]byte {
	var segs [][]byte
	for len(in) > 0 {
		k := min(n, len(in))
		segs = append(segs, in[:k])
		in = in[k:]
	}
	return segs
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestDecoderOverhead mirrors net/http's TestChunkReaderTooMuchOverhead and
// TestChunkReaderByteAtATime.
func TestDecoderOverhead(t *testing.T) {
	tests := []struct {
		name  string
		chunk string
		n     int
		last  string
		ok    bool
	}{
		{"long extensions", "1;" + strings.Repeat("a", 100) + "\r\nX\r\n", 1 << 20, "0\r\n\r\n", false},
		{"one byte per chunk", "1\r\nX\r\n", 1 << 20, "0\r\n\r\n", true},
		{"trailer flood", "", 0, "0\r\n" + strings.Repeat("A: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\r\n", 1000) + "\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder()
			chunk := []byte(tt.chunk)
			var err error
			var done bool
			feed := func(p []byte) {
				for len(p) > 0 && err == nil && !done {
					var n int
					var tok Token
					n, tok, err = d.Next(p, 0)
					p = p[n:]
					done = tok.Kind == Done
				}
			}
			for i := 0; i < tt.n && err == nil; i++ {
				feed(chunk)
			}
			feed([]byte(tt.last))
			if tt.ok && (err != nil || !done) || !tt.ok && !errors.Is(err, ErrOverhead) {
				t.Fatalf("Decode = done %v, %v; want ok %v (ErrOverhead otherwise)", done, err, tt.ok)
			}
		})
	}
}

// TestDecoderAllocs pins zero allocations per chunk, extensions included.
func TestDecoderAllocs(t *testing.T) {
	inputs := map[string][]byte{
		"basic-json": readFixture(t, "basic-json-watch.chunked"),
		"extensions": []byte(strings.Repeat("5;name=\"value\"\r\nhello\r\n", 100) + "0\r\n\r\n"),
	}
	for name, in := range inputs {
		d := NewDecoder()
		allocs := testing.AllocsPerRun(20, func() {
			d.Reset()
			for p := in; len(p) > 0; {
				seg := p[:min(len(p), 1000)]
				p = p[len(seg):]
				for len(seg) > 0 {
					n, _, err := d.Next(seg, 0)
					if err != nil {
						t.Fatal(err)
					}
					seg = seg[n:]
				}
			}
		})
		// one allocation per run for the extension string is allowed: it is
		// interned after the first chunk.
		if allocs > 1 {
			t.Errorf("%s: %v allocations per body; want at most 1", name, allocs)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{None: "None", Data: "Data", ChunkStart: "ChunkStart", ChunkEnd: "ChunkEnd", Trailer: "Trailer", Done: "Done", 42: "Kind(42)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q; want %q", k, got, want)
		}
	}
}
