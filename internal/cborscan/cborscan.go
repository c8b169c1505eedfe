// Package cborscan walks CBOR (RFC 8949) without decoding it: it reads
// data item heads and finds the exact bytes of items, map members and
// array elements, so callers can read a few fields or replace values in
// place while every other byte stays as it was sent. It checks
// well-formedness (RFC 8949 section 5.2 and appendix C): reserved
// additional information, indefinite lengths where none may be, break
// codes outside an indefinite-length item, string chunks of the wrong
// type, lengths past the end of the input. It does not check validity
// (UTF-8 of text strings, duplicate map keys). Errors are *SyntaxError
// with the byte offset.
//
// Kubernetes encodes every object as a self-described CBOR data item (tag
// 55799, the prefix d9 d9 f7), with strings and map keys as byte strings
// (k8s.io/apimachinery pkg/runtime/serializer/cbor); the functions here
// take byte and text strings alike.
//
// Nothing here allocates on well-formed input except String of an
// indefinite-length string and Skip inside indefinite-length items nested
// deeper than 16; nothing panics on any input.
package cborscan

import (
	"fmt"
	"math"
)

// Major types (RFC 8949 section 3.1).
const (
	Uint   = 0
	NegInt = 1
	Bytes  = 2
	Text   = 3
	Array  = 4
	Map    = 5
	Tag    = 6
	Simple = 7 // simple values, floats and the break code
)

// SelfDescribed is the head of tag 55799, "self-described CBOR" (RFC 8949
// section 3.4.6): Kubernetes writes it before every object it encodes, so
// it begins every CBOR watch event and body of the apiserver.
const SelfDescribed = "\xd9\xd9\xf7"

// MaxDepth bounds the nesting of indefinite-length items Skip follows (each
// needs a stack entry; definite-length nesting needs none) and is the depth
// a recursive walker of this package's callers should stop at: like
// encoding/json's and jsonscan's 10000, far beyond any Kubernetes object
// (whose CBOR decoder stops at 64).
const MaxDepth = 10000

// SyntaxError is malformed CBOR at byte Offset of the walked bytes.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("cbor at byte %d: %s", e.Offset, e.Msg) }

func errAt(at int, format string, args ...any) error {
	return &SyntaxError{Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// Head is a data item's head: its initial byte's major type and
// additional information, and the argument that follows.
type Head struct {
	Major byte
	Info  byte   // the initial byte's low 5 bits; 31 is indefinite length (or break)
	Arg   uint64 // value, length, count or tag number; 0 when Info is 31
	Len   int    // bytes of the head (1, 2, 3, 5 or 9)
}

// Indef reports an indefinite-length string, array or map (or, with major
// type 7, the break code).
func (h Head) Indef() bool { return h.Info == 31 }

// IsBreak reports the break code 0xff that ends an indefinite-length item.
func (h Head) IsBreak() bool { return h.Major == Simple && h.Info == 31 }

// HeadLen returns the length of the head that begins with initial byte c,
// or 0 when c's additional information is reserved (28, 29, 30).
func HeadLen(c byte) int {
	switch info := c & 31; {
	case info < 24, info == 31:
		return 1
	case info == 24:
		return 2
	case info == 25:
		return 3
	case info == 26:
		return 5
	case info == 27:
		return 9
	}
	return 0
}

// ParseHead reads the head at the start of b, which holds at least
// HeadLen(b[0]) bytes (a shorter b is an error). at is b's offset for
// errors. It rejects what is never well-formed in a head: reserved
// additional information, indefinite length on an integer or tag, and a
// one-byte simple value below 32 (RFC 8949 section 3.3).
func ParseHead(b []byte, at int) (Head, error) {
	if len(b) == 0 {
		return Head{}, errAt(at, "unexpected end of input")
	}
	c := b[0]
	h := Head{Major: c >> 5, Info: c & 31}
	h.Len = HeadLen(c)
	if h.Len == 0 {
		return Head{}, errAt(at, "reserved additional information %d in initial byte 0x%02x", h.Info, c)
	}
	if len(b) < h.Len {
		return Head{}, errAt(at, "head of %d bytes cut after %d", h.Len, len(b))
	}
	switch {
	case h.Info < 24:
		h.Arg = uint64(h.Info)
	case h.Info == 31:
		if h.Major == Uint || h.Major == NegInt || h.Major == Tag {
			return Head{}, errAt(at, "indefinite length on major type %d", h.Major)
		}
	default:
		for _, x := range b[1:h.Len] {
			h.Arg = h.Arg<<8 | uint64(x)
		}
		if h.Major == Simple && h.Info == 24 && h.Arg < 32 {
			return Head{}, errAt(at, "simple value %d in two bytes", h.Arg)
		}
	}
	return h, nil
}

// indef is an open indefinite-length item during Skip.
type indef struct {
	major byte
	saved uint64 // items owed to enclosing definite-length items
	n     uint64 // elements so far (a map's must be even)
}

// Skip returns the index just past the data item starting at b[i] (its
// tags included). It walks iteratively: items owed by definite-length
// arrays and maps are counted, not stacked, and every owed item needs at
// least one byte, so a count larger than the rest of b is an error before
// anything is read; indefinite-length items take a stack entry each, at
// most MaxDepth.
func Skip(b []byte, i int) (int, error) {
	var small [16]indef
	stack := small[:0]
	owed := uint64(1)
	j := i
	for owed > 0 || len(stack) > 0 {
		if j >= len(b) {
			return 0, errAt(j, "unexpected end of input (%d more items owed)", owed+uint64(len(stack)))
		}
		h, err := ParseHead(b[j:], j)
		if err != nil {
			return 0, err
		}
		if h.IsBreak() {
			if owed > 0 || len(stack) == 0 {
				return 0, errAt(j, "break code outside an indefinite-length item")
			}
			top := stack[len(stack)-1]
			if top.major == Map && top.n%2 == 1 {
				return 0, errAt(j, "indefinite-length map with a key and no value")
			}
			stack = stack[:len(stack)-1]
			owed = top.saved
			j++
			continue
		}
		if owed == 0 {
			// An element of the innermost indefinite-length item.
			top := &stack[len(stack)-1]
			top.n++
			if (top.major == Bytes || top.major == Text) && (h.Major != top.major || h.Indef()) {
				return 0, errAt(j, "chunk of major type %d in an indefinite-length string of type %d", h.Major, top.major)
			}
		} else {
			owed--
		}
		j += h.Len
		rest := uint64(len(b) - j)
		switch h.Major {
		case Bytes, Text, Array, Map:
			if h.Indef() {
				if len(stack) >= MaxDepth {
					return 0, errAt(j-1, "indefinite-length items nested deeper than %d", MaxDepth)
				}
				stack = append(stack, indef{major: h.Major, saved: owed})
				owed = 0
				continue
			}
		}
		switch h.Major {
		case Bytes, Text:
			if h.Arg > rest {
				return 0, errAt(j-h.Len, "string of %d bytes past the end (%d left)", h.Arg, rest)
			}
			j += int(h.Arg)
		case Array:
			if h.Arg > rest || owed+h.Arg > rest {
				return 0, errAt(j-h.Len, "array of %d items past the end (%d bytes left)", h.Arg, rest)
			}
			owed += h.Arg
		case Map:
			if h.Arg > rest/2 || owed+2*h.Arg > rest {
				return 0, errAt(j-h.Len, "map of %d pairs past the end (%d bytes left)", h.Arg, rest)
			}
			owed += 2 * h.Arg
		case Tag:
			owed++
		}
	}
	return j, nil
}

// HasIndefiniteString reports whether the item at b[0:] holds an
// indefinite-length byte or text string anywhere (whose chunks can split
// a word a caller looks for), or is not well-formed (which a caller must
// not trust either). It walks the item once, like Skip.
func HasIndefiniteString(b []byte) bool {
	var small [16]indef
	stack := small[:0]
	owed := uint64(1)
	j := 0
	for owed > 0 || len(stack) > 0 {
		if j >= len(b) {
			return true
		}
		h, err := ParseHead(b[j:], j)
		if err != nil {
			return true
		}
		if h.IsBreak() {
			if owed > 0 || len(stack) == 0 {
				return true
			}
			owed = stack[len(stack)-1].saved
			stack = stack[:len(stack)-1]
			j++
			continue
		}
		if owed > 0 {
			owed--
		}
		j += h.Len
		rest := uint64(len(b) - j)
		switch h.Major {
		case Bytes, Text:
			if h.Indef() || h.Arg > rest {
				return true
			}
			j += int(h.Arg)
		case Array, Map:
			n := h.Arg
			if h.Major == Map {
				if n > rest/2 {
					return true
				}
				n *= 2
			}
			if h.Indef() {
				if len(stack) >= MaxDepth {
					return true
				}
				stack = append(stack, indef{major: h.Major, saved: owed})
				owed = 0
				continue
			}
			if n > rest || owed+n > rest {
				return true
			}
			owed += n
		case Tag:
			owed++
		}
	}
	return false
}

// Untag returns the index of the first head at or after i that is not a
// tag, and the number of the last tag skipped (-1 when none).
func Untag(b []byte, i int) (int, int64) {
	tag := int64(-1)
	for i < len(b) && b[i]>>5 == Tag {
		h, err := ParseHead(b[i:], i)
		if err != nil {
			return i, tag
		}
		if h.Arg > math.MaxInt64 {
			tag = math.MaxInt64
		} else {
			tag = int64(h.Arg)
		}
		i += h.Len
	}
	return i, tag
}

// EachMember calls fn for each member of the map that item (exactly one
// data item, tags allowed) holds, with the exact bytes of key and value
// and the value's offset in item; fn returns false to stop. It returns a
// *SyntaxError if item is not a well-formed map or holds more than it.
func EachMember(item []byte, fn func(key, val []byte, valAt int) bool) error {
	i, _ := Untag(item, 0)
	h, err := ParseHead(item[i:], i)
	if err != nil {
		return err
	}
	if h.Major != Map {
		return errAt(i, "major type %d where a map is expected", h.Major)
	}
	j := i + h.Len
	for n := uint64(0); h.Indef() || n < h.Arg; n++ {
		if h.Indef() && j < len(item) && item[j] == 0xff {
			j++
			break
		}
		k, err := Skip(item, j)
		if err != nil {
			return err
		}
		v, err := Skip(item, k)
		if err != nil {
			return err
		}
		if !fn(item[j:k:k], item[k:v:v], k) {
			return nil
		}
		j = v
	}
	if j != len(item) {
		return errAt(j, "%d bytes after the map", len(item)-j)
	}
	return nil
}

// EachElement calls fn for each element of the array that item (exactly
// one data item, tags allowed) holds, with the element's exact bytes and
// offset in item; an error from fn stops the walk and is returned. A null
// (0xf6) is an empty array, as a nil slice encodes.
func EachElement(item []byte, fn func(elem []byte, at int) error) error {
	i, _ := Untag(item, 0)
	h, err := ParseHead(item[i:], i)
	if err != nil {
		return err
	}
	if h.Major == Simple && h.Info == 22 {
		return nil
	}
	if h.Major != Array {
		return errAt(i, "major type %d where an array is expected", h.Major)
	}
	j := i + h.Len
	for n := uint64(0); h.Indef() || n < h.Arg; n++ {
		if h.Indef() && j < len(item) && item[j] == 0xff {
			j++
			break
		}
		e, err := Skip(item, j)
		if err != nil {
			return err
		}
		if err := fn(item[j:e:e], j); err != nil {
			return err
		}
		j = e
	}
	if j != len(item) {
		return errAt(j, "%d bytes after the array", len(item)-j)
	}
	return nil
}

// String returns the content of a byte or text string item (tags
// allowed, such as Kubernetes' tag 22 on []byte values). A definite
// string's content aliases item; an indefinite one's chunks are joined
// into a new slice. ok is false for any other item and for malformed
// input. A null (0xf6) is "" with ok true, as a nil string pointer.
func String(item []byte) (s []byte, ok bool) {
	i, _ := Untag(item, 0)
	h, err := ParseHead(item[i:], i)
	if err != nil {
		return nil, false
	}
	if h.Major == Simple && h.Info == 22 {
		return nil, true
	}
	if h.Major != Bytes && h.Major != Text {
		return nil, false
	}
	j := i + h.Len
	if !h.Indef() {
		if h.Arg > uint64(len(item)-j) {
			return nil, false
		}
		return item[j : j+int(h.Arg) : j+int(h.Arg)], true
	}
	var out []byte
	for j < len(item) && item[j] != 0xff {
		c, err := ParseHead(item[j:], j)
		if err != nil || c.Major != h.Major || c.Indef() || c.Arg > uint64(len(item)-j-c.Len) {
			return nil, false
		}
		j += c.Len
		out = append(out, item[j:j+int(c.Arg)]...)
		j += int(c.Arg)
	}
	if j >= len(item) {
		return nil, false
	}
	if out == nil {
		out = []byte{}
	}
	return out, true
}

// KeyIs reports whether a map key item is a string equal to name.
func KeyIs(key []byte, name string) bool {
	s, ok := String(key)
	return ok && string(s) == name
}

// Int returns the value of an unsigned or negative integer item (tags
// allowed); ok is false for any other item or a value outside int64.
func Int(item []byte) (v int64, ok bool) {
	i, _ := Untag(item, 0)
	h, err := ParseHead(item[i:], i)
	if err != nil || h.Arg > math.MaxInt64 {
		return 0, false
	}
	switch h.Major {
	case Uint:
		return int64(h.Arg), true
	case NegInt:
		return -1 - int64(h.Arg), true
	}
	return 0, false
}

// AppendHead appends a definite head of major type m with argument v in
// its shortest form (RFC 8949 section 4.2.1, as Kubernetes encodes).
func AppendHead(b []byte, m byte, v uint64) []byte {
	m <<= 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v <= math.MaxUint8:
		return append(b, m|24, byte(v))
	case v <= math.MaxUint16:
		return append(b, m|25, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, m|26, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(b, m|27, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// AppendString appends s as a byte string, the way Kubernetes encodes
// strings and map keys.
func AppendString(b []byte, s string) []byte {
	b = AppendHead(b, Bytes, uint64(len(s)))
	return append(b, s...)
}
