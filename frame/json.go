package frame

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

var errFormat = fmt.Errorf("%w: the splitter's format is not JSON, protobuf or CBOR", ErrSyntax)

// isSpace reports JSON whitespace (RFC 8259 section 2).
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// stepJSON consumes p (non-empty) in normal mode.
func (s *Splitter) stepJSON(p []byte) (n int, ev Event, ok bool, err error) {
	i := 0
	if !s.inEvent {
		for i < len(p) && isSpace(p[i]) {
			i++
		}
		if len(s.pre) == 0 {
			s.start = s.off
		}
		if len(s.pre)+i > maxWhitespace {
			k := maxWhitespace - len(s.pre)
			s.pre = append(s.pre, p[:k]...)
			s.off += int64(k)
			return k, Event{}, false, s.fail(s.off, fmt.Errorf("%w: more than %d bytes of whitespace between events", ErrSyntax, maxWhitespace))
		}
		if i == len(p) {
			s.pre = append(s.pre, p...)
			s.off += int64(len(p))
			return len(p), Event{}, false, nil
		}
		if p[i] != '{' {
			s.pre = append(s.pre, p[:i]...)
			s.off += int64(i)
			return i, Event{}, false, s.fail(s.off, fmt.Errorf("%w: %q between events (want '{' or whitespace)", ErrSyntax, p[i]))
		}
		s.inEvent = true
		s.depth, s.inStr, s.esc = 0, false, false
		if len(s.pre) > 0 {
			s.pre = append(s.pre, p[:i]...)
		}
	}
	// p[i:] continues (or starts, at '{') the event's data. Scan at most
	// the bytes that keep it within the limit, plus one to see it exceed.
	room := int(s.limit) - len(s.buf)
	end := len(p)
	if end-i > room {
		end = i + room + 1
	}
	j := s.scanJSON(p[i:end])
	if (j < 0 && len(p)-i > room) || j > room {
		// The event is longer than the limit: nothing more is buffered.
		at := s.start + int64(len(s.pre))
		if len(s.pre) == 0 {
			at += int64(i)
		}
		s.dropped += int64(end)
		s.off += int64(end)
		return end, Event{}, false, s.fail(at, fmt.Errorf("%w: JSON event longer than %d bytes", ErrTooLarge, s.limit))
	}
	if j < 0 {
		if len(s.pre) == 0 && len(s.buf) == 0 {
			// The event started in p: its whitespace is still in p too.
			s.pre = append(s.pre, p[:i]...)
		}
		s.buf = append(s.buf, p[i:]...)
		s.off += int64(len(p))
		return len(p), Event{}, false, nil
	}
	j += i
	ev.Offset = s.start
	if len(s.pre) > 0 {
		ev.Pre = s.pre
	} else if i > 0 {
		ev.Pre = p[:i:i]
	}
	if len(s.buf) == 0 {
		ev.Data = p[i:j:j]
	} else {
		s.buf = append(s.buf, p[i:j]...)
		ev.Data = s.buf
	}
	s.off += int64(j)
	// The returned slices stay valid until the next call: only truncate.
	s.pre = s.pre[:0]
	s.buf = s.buf[:0]
	s.inEvent = false
	return j, ev, true, nil
}

// shortString is how many string bytes scanJSON inspects itself, eight at
// a time, before it searches with bytes.IndexByte (whose call costs more
// than a short loop; most keys and values of Kubernetes objects are
// shorter).
const shortString = 64

// SWAR masks (a byte repeated in every byte of a word).
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// quoteOrBackslash returns a word whose lowest set bit is the high bit of
// the first byte of x (little-endian: the first in memory) that is '"' or
// '\\', or 0 if none is. Bits above the lowest may be set for other bytes
// (a borrow of the zero-byte test carries into the next byte): only the
// lowest counts.
func quoteOrBackslash(x uint64) uint64 {
	q := x ^ ('"' * lows)
	e := x ^ ('\\' * lows)
	return ((q-lows)&^q | (e-lows)&^e) & highs
}

// scanJSON advances the JSON state machine over b and returns the index
// just past the '}' that closes the event, or -1 if b ends first. It only
// tracks strings, escapes and brace depth: '{' and '}' outside strings.
// Long strings are crossed with bytes.IndexByte.
func (s *Splitter) scanJSON(b []byte) int {
	depth, inStr := s.depth, s.inStr
	i := 0
	if s.esc {
		// The byte after a backslash that ended the previous input.
		s.esc = false
		i = 1
		if len(b) == 0 {
			s.esc = true
			return -1
		}
	}
	q := -1 // index of the next '"' at or after i, when known
	for i < len(b) {
		if inStr {
			// Most strings (keys, short values) end within a few bytes:
			// look at them eight at a time, then one by one, before
			// calling bytes.IndexByte.
			j, end := i, min(i+shortString, len(b))
			for j+8 <= end {
				if m := quoteOrBackslash(binary.LittleEndian.Uint64(b[j:])); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
					end = j + 1
					break
				}
				j += 8
			}
			for j < end && b[j] != '"' && b[j] != '\\' {
				j++
			}
			if j < end {
				if b[j] == '"' {
					i = j + 1
					inStr = false
					continue
				}
				i = j + 2 // the backslash and the byte it escapes
				if i > len(b) {
					s.esc = true
				}
				continue
			}
			i = j
			if i == len(b) {
				break
			}
			if q < i {
				q = bytes.IndexByte(b[i:], '"')
				if q < 0 {
					q = len(b)
				} else {
					q += i
				}
			}
			k := bytes.IndexByte(b[i:q], '\\')
			if k < 0 {
				if q == len(b) {
					break
				}
				i = q + 1
				inStr = false
				continue
			}
			i += k + 2 // the backslash and the byte it escapes
			if i > len(b) {
				s.esc = true
			}
			continue
		}
		switch b[i] {
		case '"':
			inStr = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				s.depth, s.inStr = 0, false
				return i + 1
			}
		}
		i++
	}
	s.depth, s.inStr = depth, inStr
	return -1
}
