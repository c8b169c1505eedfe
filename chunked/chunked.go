package chunked

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
)

// Limits (net/http/internal/chunked.go is the model).
const (
	// MaxLineLength bounds a chunk-size line (size, extensions, CRLF) and a
	// trailer line, CRLF included. It is net/http's limit: its chunked
	// reader reads lines through a 4 KiB bufio.Reader. It is also the size
	// the line buffer's bound.
	MaxLineLength = 4096
	// MaxChunkSize bounds one chunk's declared size. Kubernetes never writes
	// chunks near this; anything larger is hostile or garbage.
	MaxChunkSize = 1 << 40
	// MaxOverhead bounds the framing bytes (size lines, extensions, trailers)
	// relative to data: like net/http, more than 16 KiB of overhead beyond
	// what the data volume justifies is rejected. Each size line adds its
	// length plus 2 (the CRLF after the data) and earns back 16 + 2×size;
	// the balance never goes below 0. Trailer lines add their length.
	MaxOverhead = 16 << 10

	// maxHexDigits is the most hex digits a chunk-size may have, even with
	// leading zeros (net/http's parseHexUint rejects the 17th digit). It
	// keeps the size within a uint64 while it is parsed.
	maxHexDigits = 16
)

// Sentinel errors; every *Error wraps one of them.
var (
	ErrLineTooLong   = errors.New("chunked: line too long")
	ErrMalformed     = errors.New("chunked: malformed chunked encoding")
	ErrChunkTooLarge = errors.New("chunked: chunk size too large")
	ErrOverhead      = errors.New("chunked: too much framing overhead")
)

// Error is a decoding error with its offset in the encoded stream.
type Error struct {
	// Offset is the offset in the encoded (wire) stream of the byte at
	// which the input became invalid: the bad byte, the first byte beyond
	// MaxLineLength, or, for ErrChunkTooLarge on a size above MaxChunkSize
	// and for ErrOverhead, the start of the offending line.
	Offset int64
	Err    error // a sentinel above, wrapped with detail
}

// Error returns "chunked: offset N: detail".
func (e *Error) Error() string {
	return "chunked: offset " + strconv.FormatInt(e.Offset, 10) + ": " +
		strings.TrimPrefix(e.Err.Error(), "chunked: ")
}

// Unwrap returns the wrapped error, so errors.Is finds the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Kind says what a Token is.
type Kind uint8

// Token kinds, in the order they appear for a chunk (see the package doc).
const (
	None       Kind = iota // nothing to report (bytes consumed, more input needed)
	Data                   // Token.Data holds decoded body bytes
	ChunkStart             // a chunk-size line was read: Token.Chunk has Offset, Size, Ext, WireOffset, Time
	ChunkEnd               // the CRLF after a chunk's data: Token.Chunk is complete, Time set
	Trailer                // a trailer field: Token.Name, Token.Value
	Done                   // the last chunk and trailer section ended; Token.Chunk is the last-chunk
)

var kindNames = [...]string{"None", "Data", "ChunkStart", "ChunkEnd", "Trailer", "Done"}

// String returns the name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Chunk describes one chunk as framed on the wire.
type Chunk struct {
	Offset     int64  // body offset of the chunk's first data byte
	Size       int64  // declared size
	Ext        string // extensions as sent, without the leading ';' or trailing whitespace ("" if none)
	WireOffset int64  // offset of the chunk-size line in the encoded stream
	// Time is the capture time t passed with the input that held the LF
	// completing the chunk: in ChunkStart (and Data) the LF of the size
	// line, in ChunkEnd the LF of the CRLF after the data, in Done the LF of
	// the final CRLF of the trailer section.
	Time int64
}

// Token is one step of decoding.
type Token struct {
	Kind  Kind
	Data  []byte // Kind Data: aliases (a capped slice of) the input passed to Next
	Chunk Chunk  // ChunkStart, Data, ChunkEnd, Done
	Name  string // Trailer: field name as sent
	Value string // Trailer: field value without surrounding whitespace
}

type state uint8

const (
	stSize    state = iota // reading a chunk-size line
	stData                 // rem bytes of chunk data left
	stCR                   // expecting the CR after chunk data
	stLF                   // expecting the LF after chunk data
	stTrailer              // reading trailer lines after the last-chunk
	stDone                 // body complete
)

// Decoder is an incremental HTTP/1.1 chunked-transfer decoder (RFC 9112
// §7.1): it is fed whatever bytes are available and never blocks or
// allocates per chunk. The zero value is a Decoder at the start of a body,
// like NewDecoder's. A Decoder is about 170 bytes; a line cut by the end
// of the bytes fed is copied into a buffer of the Decoder's own, allocated
// at the first such line and grown as lines need (at most MaxLineLength),
// so that the many decoders of open bodies cost little. Not safe for
// concurrent use.
type Decoder struct {
	state  state
	err    error  // sticky *Error
	off    int64  // encoded bytes consumed (and skipped by Resync)
	body   int64  // decoded bytes produced
	rem    int64  // data bytes left in the current chunk
	excess int64  // overhead balance, as net/http's chunkedReader.excess
	chunk  Chunk  // current chunk, or the last-chunk in stTrailer/stDone
	ext    string // last extension string, reused while it repeats
	name   string // the last trailer field
	value  string
	lineN  int // bytes of a partial line in line

	// Resync continuation: rsCont says the previous call was a Resync that
	// found nothing, and rsTail holds the two bytes that preceded the
	// bytes the caller kept.
	rsCont bool
	rsTail [2]byte

	line []byte // a partial line (len lineN); its storage is kept
}

// NewDecoder returns a Decoder at the start of a chunked body.
func NewDecoder() *Decoder { return new(Decoder) }

// Reset puts d back at the start of a chunked body with zeroed counters,
// as NewDecoder does, keeping its memory.
func (d *Decoder) Reset() {
	d.state, d.err, d.off, d.body, d.rem, d.excess = stSize, nil, 0, 0, 0, 0
	d.chunk, d.ext, d.name, d.value, d.lineN, d.rsCont, d.rsTail = Chunk{}, "", "", "", 0, false, [2]byte{}
}

// Next consumes a prefix of p and returns its length and at most one token.
// t is the capture time of the bytes in p (see Chunk.Time). Call again with
// p[n:] until p is empty or the token is Done. When p is not empty and err
// is nil, n > 0 or the token is not None, so the loop always progresses.
//
// Data tokens alias p. A partial line is copied into the Decoder (up to
// MaxLineLength bytes) and its bytes count as consumed.
//
// Errors are *Error and sticky: on error n is 0 and every later call
// returns the same error. After Done, Next returns 0, a None token and
// io.EOF.
func (d *Decoder) Next(p []byte, t int64) (n int, tok Token, err error) {
	n, k, err := d.step(p, t)
	switch k {
	case None:
		return n, Token{}, err
	case Data:
		return n, Token{Kind: Data, Data: p[:n:n], Chunk: d.chunk}, nil
	case Trailer:
		return n, Token{Kind: Trailer, Name: d.name, Value: d.value}, nil
	default:
		return n, Token{Kind: k, Chunk: d.chunk}, nil
	}
}

// step is Next without building the Token: a Data token is p[:n], the
// chunk of the others is d.chunk, a trailer is d.name and d.value.
func (d *Decoder) step(p []byte, t int64) (int, Kind, error) {
	if d.err != nil {
		return 0, None, d.err
	}
	d.rsCont = false
	if d.state == stDone {
		return 0, None, io.EOF
	}
	if len(p) == 0 {
		return 0, None, nil
	}
	switch d.state {
	case stData:
		n := len(p)
		if int64(n) > d.rem {
			n = int(d.rem)
		}
		d.skipData(int64(n))
		return n, Data, nil
	case stCR:
		if p[0] != '\r' {
			return d.fail(d.off, codeNoCRLF, p[0])
		}
		if len(p) == 1 {
			d.off++
			d.state = stLF
			return 1, None, nil
		}
		if p[1] != '\n' {
			return d.fail(d.off+1, codeNoCRLF, p[1])
		}
		d.off += 2
		d.state = stSize
		d.chunk.Time = t
		return 2, ChunkEnd, nil
	case stLF:
		if p[0] != '\n' {
			return d.fail(d.off, codeNoCRLF, p[0])
		}
		d.off++
		d.state = stSize
		d.chunk.Time = t
		return 1, ChunkEnd, nil
	default: // stSize, stTrailer
		return d.nextLine(p, t)
	}
}

// keepLine appends p, which fits within MaxLineLength, to the partial
// line.
func (d *Decoder) keepLine(p []byte) {
	d.line = append(d.line[:d.lineN], p...)
	d.lineN = len(d.line)
}

// nextLine reads (or continues buffering) a size or trailer line.
func (d *Decoder) nextLine(p []byte, t int64) (int, Kind, error) {
	start := d.off - int64(d.lineN) // wire offset of the line
	room := MaxLineLength - d.lineN // > 0: a full buffer is an error
	q := p
	if len(q) > room {
		q = q[:room]
	}
	i := indexLF(q)
	if i < 0 {
		if len(q) == room {
			return d.fail(start+MaxLineLength, codeLineTooLong, 0)
		}
		d.keepLine(p)
		d.off += int64(len(p))
		return len(p), None, nil
	}
	n := i + 1
	line := p[:n]
	if d.lineN > 0 {
		d.keepLine(line)
		line = d.line[:d.lineN]
		d.lineN = 0
	}
	// RFC 9112 §7.1: chunk lines end in CRLF; a bare LF is rejected, as
	// net/http does (erratum 7633). A CR elsewhere in the line fails the
	// grammar below and is reported as such by lineError.
	ln := len(line)
	if ln < 2 || line[ln-2] != '\r' {
		return d.fail(start+int64(ln-1), codeBareLF, '\n')
	}
	c := line[:ln-2]
	if d.state == stTrailer {
		return d.trailerLine(c, start, n, t)
	}
	return d.sizeLine(c, start, n, t)
}

// sizeLine handles a complete chunk-size line c (CRLF removed) that began at
// wire offset start and whose last n bytes came from the current input.
func (d *Decoder) sizeLine(c []byte, start int64, n int, t int64) (int, Kind, error) {
	size, extLo, extHi, bad, code := parseSizeLine(c)
	if code != codeOK {
		return d.lineError(c, start, bad, code)
	}
	// Overhead accounting exactly as net/http's chunkedReader.beginChunk:
	// the line (without its CRLF) plus the CRLF after the data, minus 16
	// bytes per chunk and twice the data.
	d.excess += int64(len(c)) + 2
	d.excess -= 16 + 2*int64(size)
	d.excess = max(d.excess, 0)
	if d.excess > MaxOverhead {
		return d.fail(start, codeOverhead, 0)
	}
	d.off += int64(n)
	ch := &d.chunk
	ch.Offset, ch.Size, ch.WireOffset, ch.Time = d.body, int64(size), start, t
	if extLo != extHi || ch.Ext != "" {
		ch.Ext = d.internExt(c[extLo:extHi])
	}
	if size == 0 {
		d.state = stTrailer
		return n, None, nil
	}
	d.state = stData
	d.rem = int64(size)
	return n, ChunkStart, nil
}

// trailerLine handles a complete trailer-section line c (CRLF removed).
func (d *Decoder) trailerLine(c []byte, start int64, n int, t int64) (int, Kind, error) {
	if len(c) == 0 {
		d.off += int64(n)
		d.state = stDone
		d.chunk.Time = t
		return n, Done, nil
	}
	nameEnd, valLo, valHi, bad, code := parseField(c)
	if code != codeOK {
		return d.lineError(c, start, bad, code)
	}
	d.excess += int64(len(c)) + 2
	if d.excess > MaxOverhead {
		return d.fail(start, codeOverhead, 0)
	}
	d.off += int64(n)
	d.name, d.value = string(c[:nameEnd]), string(c[valLo:valHi])
	return n, Trailer, nil
}

// skipData accounts for k bytes of chunk data (k <= d.rem) taken from the
// input.
func (d *Decoder) skipData(k int64) {
	d.rem -= k
	d.off += k
	d.body += k
	if d.rem == 0 {
		d.state = stCR
	}
}

// lineError reports a grammar error at c[bad] in the line c (CRLF removed)
// starting at wire offset start, unless c holds a CR: a CR can never be
// part of a line, so the first one is reported instead.
func (d *Decoder) lineError(c []byte, start int64, bad int, code errCode) (int, Kind, error) {
	if i := bytes.IndexByte(c, '\r'); i >= 0 {
		bad, code = i, codeCR
	}
	var b byte
	if bad < len(c) {
		b = c[bad]
	}
	return d.fail(start+int64(bad), code, b)
}

// indexLF is bytes.IndexByte(q, '\n'), faster for the short lines that
// chunk-size lines are.
func indexLF(q []byte) int {
	for i := 0; i < len(q) && i < 16; i++ {
		if q[i] == '\n' {
			return i
		}
	}
	if len(q) <= 16 {
		return -1
	}
	if i := bytes.IndexByte(q[16:], '\n'); i >= 0 {
		return i + 16
	}
	return -1
}

// internExt returns b as a string, reusing the previous chunk's string when
// the bytes are the same so that repeated extensions do not allocate.
func (d *Decoder) internExt(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) != d.ext { // the comparison does not allocate
		d.ext = string(b)
	}
	return d.ext
}

func (d *Decoder) fail(off int64, code errCode, b byte) (int, Kind, error) {
	d.err = &Error{Offset: off, Err: code.err(b)}
	return 0, None, d.err
}

// Offset returns how many encoded bytes the decoder has consumed, including
// bytes skipped by Resync. It is the wire offset of the next byte Next
// expects.
func (d *Decoder) Offset() int64 { return d.off }

// BodyOffset returns how many decoded body bytes the decoder has produced.
// Bytes skipped by Resync are not counted.
func (d *Decoder) BodyOffset() int64 { return d.body }
