package chunked

// API CONTRACT SKELETON — the chunked helper replaces these bodies (and may
// split this file), keeping every exported name and signature below.

import (
	"errors"
	"io"
)

// Limits (see net/http/internal/chunked.go for the model).
const (
	// MaxLineLength bounds a chunk-size line (size, extensions, CRLF) and a
	// trailer line.
	MaxLineLength = 4096
	// MaxChunkSize bounds one chunk's declared size. Kubernetes never writes
	// chunks near this; anything larger is hostile or garbage.
	MaxChunkSize = 1 << 40
	// MaxOverhead bounds the framing bytes (size lines, extensions, trailers)
	// relative to data: like net/http, more than 16 KiB of overhead beyond
	// what the data volume justifies is rejected.
	MaxOverhead = 16 << 10
)

var (
	ErrLineTooLong   = errors.New("chunked: line too long")
	ErrMalformed     = errors.New("chunked: malformed chunked encoding")
	ErrChunkTooLarge = errors.New("chunked: chunk size too large")
	ErrOverhead      = errors.New("chunked: too much framing overhead")
)

// Error is a decoding error with its offset in the encoded stream.
type Error struct {
	Offset int64 // offset in the encoded (wire) stream
	Err    error // a sentinel above, wrapped with detail
}

func (e *Error) Error() string { panic("unimplemented") }
func (e *Error) Unwrap() error { return e.Err }

// Kind says what a Token is.
type Kind uint8

const (
	None       Kind = iota // nothing to report (more input needed)
	Data                   // Token.Data holds decoded body bytes
	ChunkStart             // a chunk-size line was read: Token.Chunk has Offset, Size, Ext, WireOffset
	ChunkEnd               // the CRLF after a chunk's data: Token.Chunk is complete, Time set
	Trailer                // a trailer field: Token.Name, Token.Value
	Done                   // the last chunk and trailer section ended; the body is complete
)

// Chunk describes one chunk as framed on the wire.
type Chunk struct {
	Offset     int64  // body offset of the chunk's first data byte
	Size       int64  // declared size
	Ext        string // extensions as sent, without the leading ';' ("" if none)
	WireOffset int64  // offset of the chunk-size line in the encoded stream
	Time       int64  // capture time of the chunk's last byte (the t passed with that input)
}

// Token is one step of decoding.
type Token struct {
	Kind  Kind
	Data  []byte // Kind Data: aliases the input, valid until the next call
	Chunk Chunk  // ChunkStart, ChunkEnd
	Name  string // Trailer
	Value string // Trailer
}

// Decoder is an incremental HTTP/1.1 chunked-transfer decoder (RFC 9112
// §7.1): it is fed whatever bytes are available and never blocks or
// allocates per chunk. Not safe for concurrent use.
type Decoder struct{ _ int }

// NewDecoder returns a Decoder at the start of a chunked body.
func NewDecoder() *Decoder { panic("unimplemented") }

// Next consumes a prefix of p and returns it length and at most one token.
// t is the capture time of the bytes in p; it becomes Chunk.Time of a chunk
// whose last byte is in p. Call again with p[n:] until p is empty or the
// token is Done. Errors are *Error and sticky. A partial line is buffered
// (up to MaxLineLength).
func (d *Decoder) Next(p []byte, t int64) (n int, tok Token, err error) { panic("unimplemented") }

// Offset returns how many encoded bytes the decoder has consumed.
func (d *Decoder) Offset() int64 { panic("unimplemented") }

// BodyOffset returns how many decoded body bytes the decoder has produced.
func (d *Decoder) BodyOffset() int64 { panic("unimplemented") }

// Resync finds where chunk framing resumes in p, for a stream captured from
// its middle or after a gap. It looks for a chunk-size line (at p[0], or
// right after a CRLF) such that the chunk sizes chain consistently for as far
// as p reaches: each chunk's data is followed by CRLF and another valid size
// line (or p ends). On success it returns the number of bytes of p to skip,
// and the decoder is positioned at the start of that size line; the
// decoder's counters then treat the skipped bytes as lost. ok is false when
// no such point exists in p yet: the caller keeps at most the last
// MaxLineLength bytes of p and calls again with more data.
func (d *Decoder) Resync(p []byte) (skip int, ok bool) { panic("unimplemented") }

// Reader is an io.Reader that decodes a chunked body from r, like
// net/http/httputil.NewChunkedReader. Read returns io.EOF after the last
// chunk and trailers.
type Reader struct{ _ int }

// NewReader returns a Reader decoding from r.
func NewReader(r io.Reader) *Reader { panic("unimplemented") }

func (r *Reader) Read(p []byte) (int, error) { panic("unimplemented") }

// Trailer returns the trailer fields read after the last chunk.
func (r *Reader) Trailer() [][2]string { panic("unimplemented") }
