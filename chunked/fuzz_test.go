package chunked

import (
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"testing"
)

// segmentsFrom cuts in into pieces whose lengths come from cuts (cycled,
// each 1..64); no cuts means one byte at a time.
func segmentsFrom(in, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return bytewise(in)
	}
	var segs [][]byte
	for i := 0; len(in) > 0; i++ {
		n := min(int(cuts[i%len(cuts)]%64)+1, len(in))
		segs = append(segs, in[:n])
		in = in[n:]
	}
	return segs
}

// bwsBeforeExt reports whether one of the size lines at the given wire
// offsets has whitespace between its digits and ';': RFC 9112 allows it
// (BWS), net/http rejects it.
func bwsBeforeExt(in []byte, offsets []int64) bool {
	for _, off := range offsets {
		i := int(off)
		for i < len(in) && class[in[i]]&cHex != 0 {
			i++
		}
		j := skipWS(in, i)
		if j > i && j < len(in) && in[j] == ';' {
			return true
		}
	}
	return false
}

// FuzzDecoder checks that split points never change the result and
// compares with net/http/httputil.NewChunkedReader:
//
//   - when we reach Done, httputil decodes the same bytes without error,
//     unless a size line has whitespace before ';' (RFC 9112 BWS, which
//     net/http rejects);
//   - when httputil succeeds (it stops after the "0" line), we yield the
//     same bytes, or we fail in a documented stricter way: in the trailer
//     section (which httputil never reads), or on chunk-extension syntax
//     (which httputil ignores), after a prefix of its bytes;
//   - otherwise one output is a prefix of the other.
func FuzzDecoder(f *testing.F) {
	for _, in := range allInputs() {
		f.Add([]byte(in), []byte{})
		f.Add([]byte(in), []byte{3, 1, 4, 1, 5})
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		d := NewDecoder()
		whole := decodeSegments(d, [][]byte{in}, zeroTime)
		split := decodeSegments(NewDecoder(), segmentsFrom(in, cuts), zeroTime)
		if !whole.equal(split) {
			t.Fatalf("Decode(%q) = %s; in pieces %s", in, whole, split)
		}
		if whole.err != nil && asError(whole.err) == nil {
			t.Fatalf("Decode(%q) error %T is not *Error", in, whole.err)
		}
		if whole.done {
			checkOrder(t, string(in), whole)
		}

		theirs, theirErr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in)))
		var lines []int64
		for _, e := range whole.events {
			if e.Kind == ChunkStart || e.Kind == Done {
				lines = append(lines, e.Chunk.WireOffset)
			}
		}
		if d.state == stTrailer || d.state == stDone {
			lines = append(lines, d.chunk.WireOffset)
		}
		switch {
		case whole.done && theirErr == nil:
			if !bytes.Equal(whole.data, theirs) {
				t.Fatalf("Decode(%q) = %q; httputil %q", in, whole.data, theirs)
			}
		case whole.done:
			if !bwsBeforeExt(in, lines) || !bytes.HasPrefix(whole.data, theirs) {
				t.Fatalf("Decode(%q) = %q, done; httputil %q, %v", in, whole.data, theirs, theirErr)
			}
		case theirErr == nil:
			inTrailers := d.state == stTrailer
			if !(inTrailers && bytes.Equal(whole.data, theirs)) &&
				!(errors.Is(whole.err, errExt) && bytes.HasPrefix(theirs, whole.data)) {
				t.Fatalf("Decode(%q) = %s; httputil decoded %q", in, whole, theirs)
			}
		default:
			if !bytes.HasPrefix(whole.data, theirs) && !bytes.HasPrefix(theirs, whole.data) {
				t.Fatalf("Decode(%q) = %q, %v; httputil %q, %v", in, whole.data, whole.err, theirs, theirErr)
			}
		}
	})
}

// FuzzResync: no panic, skip within bounds, what is kept is short, and a
// point Resync accepts decodes without error as far as the data goes.
func FuzzResync(f *testing.F) {
	f.Add([]byte("lo\r\n5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("000\r\n{\"type\":\"ADDED\"}\n"))
	f.Add([]byte("ffff\r\n\r\n3\r\nabc\r\n4\r\nabcd\r\n"))
	f.Add([]byte("\n5\r\nhello\r\n0\r\nA: b\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder()
		skip, ok := d.Resync(in)
		if skip < 0 || skip > len(in) || d.Offset() != int64(skip) {
			t.Fatalf("Resync(%q) = %d, %v; Offset() = %d", in, skip, ok, d.Offset())
		}
		if !ok {
			if len(in)-skip >= MaxLineLength {
				t.Fatalf("Resync(%q) = %d, false: keeps %d bytes", in, skip, len(in)-skip)
			}
			return
		}
		r := decodeSegments(d, [][]byte{in[skip:]}, zeroTime)
		if r.err != nil && !errors.Is(r.err, ErrOverhead) {
			t.Fatalf("Resync(%q) = %d, true; decoding from there: %v", in, skip, r.err)
		}
	})
}
