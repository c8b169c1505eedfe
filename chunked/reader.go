package chunked

import (
	"io"
	"sync"
)

const (
	// readBufSize is the size of the Reader's input buffer (pooled). 32 KiB
	// is what Go's ReverseProxy (and kubectl proxy) writes per
	// chunk, so a large chunk arrives in one or two reads.
	readBufSize = 32 << 10
	// directRead is the least chunk data, and room in the caller's buffer,
	// for which Read reads straight into the caller's buffer instead of
	// going through its own (saving a copy, as bufio.Reader does).
	directRead = 4 << 10
	// framingRead is how much Read reads when it expects a size line after
	// a large chunk: enough for the line and some data, little enough that
	// most of the next large chunk is read straight into the caller's buffer.
	framingRead = 512
	// maxEmptyReads is how many (0, nil) reads in a row the source may
	// return before Read gives up with io.ErrNoProgress, as bufio does.
	maxEmptyReads = 100
)

// Reader is an io.Reader that decodes a chunked body from r, like
// net/http/httputil.NewChunkedReader, but it also reads the trailer section
// and the final CRLF. Read returns io.EOF after them, and
// io.ErrUnexpectedEOF if the source ends before. Decoding errors are
// *Error (see Decoder). Errors are sticky.
//
// Reader reads ahead from its source into a 32 KiB buffer, so bytes after
// the end of the body may have been read from the source and are lost; use
// a Decoder to keep them. The buffer comes from a package-wide pool and
// goes back to it once Read has returned io.EOF or another error, so
// decoding body after body does not allocate it again.
//
// Like httputil's reader, Read does not wait for a new chunk once it has
// data to return, but it may wait for the rest of the current chunk's data,
// which it then reads straight into p (one copy instead of two for large
// chunks). Not safe for concurrent use.
type Reader struct {
	src     io.Reader
	buf     *[readBufSize]byte // read buffer, from bufPool; nil once returned
	r, w    int                // buf[r:w] is input not yet given to the decoder
	srcErr  error              // error from src, reported once buf is drained
	err     error              // sticky
	large   bool               // the last chunk was large: read framing in small reads
	trailer [][2]string
	d       Decoder
}

var bufPool = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// NewReader returns a Reader decoding from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r}
}

// Reset discards the Reader's state and makes it decode from src, keeping
// its memory.
func (r *Reader) Reset(src io.Reader) {
	r.src, r.r, r.w, r.srcErr, r.err, r.large, r.trailer = src, 0, 0, nil, nil, false, nil
	r.d.Reset()
}

// Read reads decoded body bytes into p.
func (r *Reader) Read(p []byte) (int, error) {
	if r.buf == nil && r.err == nil {
		r.buf = bufPool.Get().(*[readBufSize]byte)
	}
	n := 0
	empty := 0 // reads in a row that returned nothing
	d := &r.d
	for n < len(p) && r.err == nil {
		if d.state == stData {
			if r.r < r.w {
				// Chunk data from the buffer, without the Token machinery.
				k := int(min(int64(r.w-r.r), d.rem, int64(len(p)-n)))
				copy(p[n:], r.buf[r.r:r.r+k])
				r.r += k
				n += k
				d.skipData(int64(k))
				continue
			}
			if r.srcErr == nil && d.rem >= directRead && len(p)-n >= directRead {
				// The rest of a large chunk: read it straight into p.
				k := int(min(int64(len(p)-n), d.rem))
				m, err := r.src.Read(p[n : n+k])
				n += m
				d.skipData(int64(m))
				r.srcErr = err
				if m == 0 && err == nil {
					if empty++; empty == maxEmptyReads {
						r.srcErr = io.ErrNoProgress
					}
				}
				continue
			}
		}
		if d.state == stCR && r.w-r.r >= 2 && r.buf[r.r] == '\r' && r.buf[r.r+1] == '\n' {
			// The CRLF ending a chunk's data, without the Token machinery.
			r.r += 2
			d.off += 2
			d.state = stSize
			continue
		}
		if r.r < r.w {
			m, kind, err := d.step(r.buf[r.r:r.w], 0)
			r.r += m
			switch {
			case err != nil:
				r.err = err
			case kind == ChunkStart:
				r.large = d.chunk.Size >= directRead
			case kind == Trailer:
				r.trailer = append(r.trailer, [2]string{d.name, d.value})
			case kind == Done:
				r.err = io.EOF
			}
			continue
		}
		// The buffer is drained.
		if r.srcErr != nil {
			r.err = r.srcErr
			if r.err == io.EOF {
				r.err = io.ErrUnexpectedEOF
			}
			continue
		}
		if n > 0 {
			break // do not wait for the next chunk when there is something to return
		}
		// After a large chunk, read only a little: the next size line and
		// the start of its data. The rest then goes straight into p.
		size := len(r.buf)
		if r.large {
			size = framingRead
			if d.state == stData { // the last few bytes of a chunk, then framing
				size += int(d.rem)
			}
			size = min(size, len(r.buf))
		}
		m, err := r.src.Read(r.buf[:size])
		r.r, r.w, r.srcErr = 0, m, err
		if m == 0 && err == nil {
			if empty++; empty == maxEmptyReads {
				r.srcErr = io.ErrNoProgress
			}
		}
	}
	if r.err != nil && r.buf != nil {
		// Terminal: Read never looks at the buffer again (Reset starts over).
		bufPool.Put(r.buf)
		r.buf = nil
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.err
}

// Trailer returns the trailer fields read after the last chunk, as
// {name, value} pairs in the order received. It is complete once Read has
// returned io.EOF. The slice is owned by the Reader.
func (r *Reader) Trailer() [][2]string { return r.trailer }
