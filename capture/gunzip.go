package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// pushDecoder decodes a content-encoded body (RFC 9110 §8.4.1) that arrives
// in pieces, without a goroutine and without buffering the body: the
// standard library's pull-style decompressor runs as a coroutine (iter.Pull)
// that suspends whenever it has consumed all input handed to it.
type pushDecoder struct {
	in   []byte
	eof  bool
	next func() ([]byte, bool)
	stop func()
	err  error
	done bool
}

// supportedEncoding reports whether wtrace can decode a Content-Encoding.
func supportedEncoding(enc string) bool {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "gzip", "x-gzip", "deflate":
		return true
	}
	return false
}

func newPushDecoder(encoding string) *pushDecoder {
	d := &pushDecoder{}
	enc := strings.ToLower(strings.TrimSpace(encoding))
	seq := func(yield func([]byte) bool) {
		// A 16-byte bufio.Reader (the smallest): the decoder takes the
		// fast path it has for *bufio.Reader, yet reads at most 16
		// compressed bytes ahead of what it has decoded. redactStream
		// relies on that bound (decodeAhead) to release compressed bytes
		// whose content it has seen.
		src := bufio.NewReaderSize(&pushSource{d: d, yield: yield}, 16)
		var r io.Reader
		var err error
		switch enc {
		case "deflate":
			r, err = zlib.NewReader(src)
		default:
			r, err = gzip.NewReader(src)
		}
		if err != nil {
			d.err = fmt.Errorf("%s: %w", enc, err)
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 && !yield(buf[:n]) {
				return
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				d.err = fmt.Errorf("%s: %w", enc, err)
				return
			}
		}
	}
	d.next, d.stop = iter.Pull(seq)
	return d
}

// pushSource is the io.Reader the decompressor pulls from. When the current
// input is used up it yields nil, which suspends the coroutine until write
// hands it more.
type pushSource struct {
	d     *pushDecoder
	yield func([]byte) bool
}

var errStopped = errors.New("decoder stopped")

func (s *pushSource) Read(p []byte) (int, error) {
	for len(s.d.in) == 0 {
		if s.d.eof {
			return 0, io.EOF
		}
		if !s.yield(nil) {
			return 0, errStopped
		}
	}
	n := copy(p, s.d.in)
	s.d.in = s.d.in[n:]
	return n, nil
}

// write decodes p and calls out with each decoded piece (valid only during
// the call). It returns the decoder's error, if any; errors are sticky.
func (d *pushDecoder) write(p []byte, out func([]byte)) error {
	if d.done {
		if len(p) > 0 && d.err == nil {
			// Data after the end of the compressed stream.
			d.err = errors.New("data after the end of the compressed body")
		}
		return d.err
	}
	d.in = p
	for {
		v, ok := d.next()
		if !ok {
			d.done = true
			break
		}
		if v == nil {
			break // input used up
		}
		out(v)
	}
	return d.err
}

// close signals the end of the body and flushes what the decompressor still
// holds. It reports io.ErrUnexpectedEOF if the compressed stream was cut.
func (d *pushDecoder) close(out func([]byte)) error {
	d.eof = true
	if !d.done {
		for {
			v, ok := d.next()
			if !ok {
				break
			}
			if v != nil {
				out(v)
			}
		}
		d.done = true
	}
	d.stop()
	return d.err
}

// abort releases the coroutine without flushing.
func (d *pushDecoder) abort() {
	d.done = true
	d.stop()
}
