package chunked

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

// event is a token normalized for comparison: consecutive Data tokens of
// one chunk are merged, None tokens are dropped.
type event struct {
	Kind  Kind
	Chunk Chunk
	Data  string
	Name  string
	Value string
}

func (e event) String() string {
	switch e.Kind {
	case Data:
		return fmt.Sprintf("Data(%q)", e.Data)
	case Trailer:
		return fmt.Sprintf("Trailer(%q: %q)", e.Name, e.Value)
	default:
		return fmt.Sprintf("%v%+v", e.Kind, e.Chunk)
	}
}

// result is everything observable about decoding one input.
type result struct {
	events []event
	data   []byte // all Data bytes
	done   bool
	err    error // *Error, or nil
	rest   string
	offset int64 // Offset() at the end
	body   int64 // BodyOffset() at the end
}

func (r *result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "done=%v err=%v rest=%q offset=%d body=%d events:", r.done, r.err, r.rest, r.offset, r.body)
	for _, e := range r.events {
		b.WriteString(" ")
		b.WriteString(e.String())
	}
	return b.String()
}

func (r *result) equal(o *result) bool {
	// After an error, how much of the failing line had been consumed (and
	// so Offset and rest) depends on where the input was split.
	if r.err == nil && (r.rest != o.rest || r.offset != o.offset) {
		return false
	}
	if r.done != o.done || r.body != o.body ||
		!bytes.Equal(r.data, o.data) || fmt.Sprint(r.err) != fmt.Sprint(o.err) || len(r.events) != len(o.events) {
		return false
	}
	for i := range r.events {
		if r.events[i] != o.events[i] {
			return false
		}
	}
	return true
}

// decodeSegments feeds segs to d in order, segment i with time times(i),
// looping on Next as the capture code does. It stops at an error or Done
// (the remaining bytes go to rest).
func decodeSegments(d *Decoder, segs [][]byte, times func(int) int64) *result {
	r := &result{}
	var rest []byte
	var starts []int // offset in r.data of each Data event
	for si, p := range segs {
		t := times(si)
		if r.done || r.err != nil {
			rest = append(rest, p...)
			continue
		}
		for len(p) > 0 {
			n, tok, err := d.Next(p, t)
			if n < 0 || n > len(p) {
				panic(fmt.Sprintf("Next returned n=%d for %d bytes", n, len(p)))
			}
			if err == nil && n == 0 && tok.Kind == None {
				panic("Next made no progress")
			}
			p = p[n:]
			if err != nil {
				r.err = err
				rest = append(rest, p...)
				break
			}
			switch tok.Kind {
			case None:
			case Data:
				if k := len(r.events) - 1; k < 0 || r.events[k].Kind != Data {
					r.events = append(r.events, event{Kind: Data, Chunk: tok.Chunk})
					starts = append(starts, len(r.data))
				}
				r.data = append(r.data, tok.Data...)
			default:
				r.events = append(r.events, event{Kind: tok.Kind, Chunk: tok.Chunk, Name: tok.Name, Value: tok.Value})
			}
			if tok.Kind == Done {
				r.done = true
				rest = append(rest, p...)
				break
			}
		}
	}
	// Fill in the merged Data events (appending strings token by token
	// would be quadratic for one-byte segments).
	k := 0
	for i := range r.events {
		if r.events[i].Kind == Data {
			end := len(r.data)
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			r.events[i].Data = string(r.data[starts[k]:end])
			k++
		}
	}
	r.rest = string(rest)
	r.offset, r.body = d.Offset(), d.BodyOffset()
	return r
}

func zeroTime(int) int64 { return 0 }

func decodeString(in string) *result {
	return decodeSegments(NewDecoder(), [][]byte{[]byte(in)}, zeroTime)
}

// splitAt cuts in at the given increasing offsets.
func splitAt(in []byte, cuts ...int) [][]byte {
	var segs [][]byte
	prev := 0
	for _, c := range cuts {
		segs = append(segs, in[prev:c])
		prev = c
	}
	return append(segs, in[prev:])
}

func bytewise(in []byte) [][]byte {
	segs := make([][]byte, len(in))
	for i := range in {
		segs[i] = in[i : i+1]
	}
	return segs
}

// chunkedEncode writes body as chunks of the given sizes (cycled), then
// the last-chunk and final CRLF.
func chunkedEncode(body []byte, sizes ...int) []byte {
	var b bytes.Buffer
	for i := 0; len(body) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(body))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(body[:n])
		b.WriteString("\r\n")
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// asError returns err as *Error or nil.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// httputilDecode decodes in with net/http's chunked reader, the reference.
func httputilDecode(tb testing.TB, in []byte) []byte {
	tb.Helper()
	b, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in)))
	if err != nil {
		tb.Fatalf("httputil: %v", err)
	}
	return b
}
