package report

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// chunkSize is how many raw bytes of items one chunk of the store holds
// before it is compressed and written out: what the page decompresses to
// show one item. 256 KiB decompresses in a few milliseconds.
const chunkSize = 256 << 10

// store holds the items the page loads lazily — event bytes, bodies, an
// exchange's details — in gzip'd chunks, each written to the page as soon
// as it is full, inside a <script type="application/octet-stream"> element
// that the browser does not parse: the page decodes a chunk (base64, then
// gzip with DecompressionStream) when an item of it is first shown. The
// store holds one chunk at a time.
type store struct {
	w      io.Writer
	err    error
	buf    bytes.Buffer // the raw bytes of the chunk being filled
	chunk  int          // its number
	gz     *gzip.Writer
	zbuf   bytes.Buffer
	chunks []int // items' chunks, offsets and lengths, as varints
	items  int
	packed int64 // compressed bytes written
	// in and left count the event and body bytes embedded and left out.
	in, left int64
}

func newStore(w io.Writer) *store {
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return &store{w: w, gz: gz}
}

// add stores p (copied) and returns its item number.
func (s *store) add(p []byte) int {
	if s.buf.Len() > 0 && s.buf.Len()+len(p) > chunkSize {
		s.flush()
	}
	s.chunks = append(s.chunks, s.chunk, s.buf.Len(), len(p))
	s.buf.Write(p)
	s.items++
	return s.items - 1
}

// flush compresses the chunk being filled and writes it out.
func (s *store) flush() {
	if s.buf.Len() == 0 || s.err != nil {
		return
	}
	s.zbuf.Reset()
	s.gz.Reset(&s.zbuf)
	s.gz.Write(s.buf.Bytes())
	s.gz.Close()
	s.packed += int64(s.zbuf.Len())
	_, s.err = fmt.Fprintf(s.w, "<script type=\"application/octet-stream\" id=\"c%d\">", s.chunk)
	if s.err == nil {
		enc := base64.NewEncoder(base64.StdEncoding, s.w)
		_, s.err = enc.Write(s.zbuf.Bytes())
		if s.err == nil {
			s.err = enc.Close()
		}
	}
	if s.err == nil {
		_, s.err = io.WriteString(s.w, "</script>\n")
	}
	s.buf.Reset()
	s.chunk++
}

// index is the items' table for the page: for each item its chunk, its
// offset in the chunk and its length, as a base64 string of varints.
func (s *store) index() string { return varints(s.chunks) }

// varints encodes numbers as a base64 string of signed varints (zigzag
// LEB128, encoding/binary's AppendVarint), which the page decodes; ""
// when every number is 0 (the page reads a column of zeros).
func varints[T int | int64 | int32 | uint8](v []T) string {
	zero := true
	for _, x := range v {
		if x != 0 {
			zero = false
			break
		}
	}
	if zero {
		return ""
	}
	b := make([]byte, 0, len(v)*2)
	for _, x := range v {
		b = binary.AppendVarint(b, int64(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
