// Package jsonscan walks JSON text without decoding it: it finds the exact
// bytes of values, object members and array elements, so callers can read a
// few fields or replace values in place while every other byte stays as it
// was sent. It checks string and bracket structure, not literals. Errors are
// *SyntaxError with the byte offset.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDepth bounds nesting, like encoding/json and json-iterator (10000):
// deeper input is not a Kubernetes object and the bracket stack must stay
// small.
const MaxDepth = 10000

// SyntaxError is malformed JSON at byte Offset of the walked text.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("json at byte %d: %s", e.Offset, e.Msg) }

// IsSpace reports JSON whitespace (RFC 8259 §2).
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// SkipSpace returns the index of the first non-whitespace byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

func walkErr(at int, format string, args ...any) error {
	return &SyntaxError{Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// SkipString returns the index just past the string starting at b[i] ('"').
// It looks for each '"' with bytes.IndexByte and takes the one not
// escaped (preceded by an even number of backslashes).
func SkipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
	return 0, walkErr(i, "unterminated string")
}

// SkipValue returns the index just past the JSON value starting at or
// after b[i] (after whitespace). It checks bracket nesting and strings;
// literals and numbers are taken up to the next delimiter unchecked.
func SkipValue(b []byte, i int) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return 0, walkErr(i, "value expected")
	}
	switch c := b[i]; c {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		var stack []byte
		for j := i; j < len(b); {
			switch c := b[j]; c {
			case '"':
				end, err := SkipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end
				continue
			case '{', '[':
				if len(stack) >= MaxDepth {
					return 0, walkErr(j, "nested deeper than %d", MaxDepth)
				}
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
					return 0, walkErr(j, "unexpected %q", c)
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, walkErr(i, "unterminated %q", c)
	case '}', ']', ',', ':':
		return 0, walkErr(i, "unexpected %q", c)
	default:
		j := i
		for j < len(b) && !IsSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ':' {
			j++
		}
		return j, nil
	}
}

// EachMember calls fn for each member of the JSON object in b (exactly one
// object, optionally surrounded by whitespace), with the raw key (between
// the quotes, escapes undecoded) and the value's exact bytes. It stops
// early, without error, when fn returns false.
func EachMember(b []byte, fn func(key, val []byte, valAt int) bool) error {
	stopped := false
	end, err := members(b, SkipSpace(b, 0), func(key []byte, vs int) (int, error) {
		ve, err := SkipValue(b, vs)
		if err != nil {
			return 0, err
		}
		if !fn(key, b[vs:ve:ve], vs) {
			stopped = true
			return 0, errStop
		}
		return ve, nil
	})
	if stopped {
		return nil
	}
	if err != nil {
		return err
	}
	return trailing(b, end)
}

// WalkMembers walks the JSON object in b (exactly one object, optionally
// surrounded by whitespace) as EachMember does, but hands fn each member's
// raw key and the offset of its value in b, for fn to read the value
// itself, in the same pass: fn returns the offset just past the value
// (SkipValue's, for a value it does not read), or an error, which ends
// the walk with it.
func WalkMembers(b []byte, fn func(key []byte, valAt int) (valEnd int, err error)) error {
	end, err := members(b, SkipSpace(b, 0), fn)
	if err != nil {
		return err
	}
	return trailing(b, end)
}

// WalkObjectAt is WalkMembers for the JSON object that starts at b[i]
// (after whitespace), within a larger value: it returns the offset just
// past the object's closing brace.
func WalkObjectAt(b []byte, i int, fn func(key []byte, valAt int) (valEnd int, err error)) (int, error) {
	return members(b, SkipSpace(b, i), fn)
}

// errStop ends a walk that fn stopped.
var errStop = errors.New("jsonscan: stopped")

// members walks the object at b[i]: for each member, fn reads or skips
// its value and returns where it ends. It returns the offset just past
// the closing brace.
func members(b []byte, i int, fn func(key []byte, valAt int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, walkErr(i, "object expected")
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, walkErr(i, "member name expected")
		}
		end, err := SkipString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : end-1]
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, walkErr(i, "':' expected")
		}
		vs := SkipSpace(b, i+1)
		if vs >= len(b) {
			return 0, walkErr(vs, "value expected")
		}
		ve, err := fn(key, vs)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return 0, walkErr(i, "',' or '}' expected")
	}
}

// trailing checks that only whitespace follows b[i-1].
func trailing(b []byte, i int) error {
	if j := SkipSpace(b, i); j < len(b) {
		return walkErr(j, "data after the value")
	}
	return nil
}

// EachElement calls fn for each element of the JSON array in val (or none
// for null), with its exact bytes and offset within val.
func EachElement(val []byte, fn func(elem []byte, at int) error) error {
	i := SkipSpace(val, 0)
	if string(val[i:]) == "null" {
		return nil
	}
	if i >= len(val) || val[i] != '[' {
		return walkErr(i, "array expected")
	}
	i = SkipSpace(val, i+1)
	if i < len(val) && val[i] == ']' {
		return trailing(val, i+1)
	}
	for {
		vs := SkipSpace(val, i)
		ve, err := SkipValue(val, vs)
		if err != nil {
			return err
		}
		if err := fn(val[vs:ve:ve], vs); err != nil {
			return err
		}
		i = SkipSpace(val, ve)
		if i < len(val) && val[i] == ',' {
			i++
			continue
		}
		if i < len(val) && val[i] == ']' {
			return trailing(val, i+1)
		}
		return walkErr(i, "',' or ']' expected")
	}
}

// KeyIs reports whether a raw member name equals name.
func KeyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return json.Unmarshal(q, &s) == nil && s == name
}

// String decodes a JSON string value's exact bytes; null is "".
func String(val []byte, at int) (string, error) {
	if string(val) == "null" {
		return "", nil
	}
	if len(val) < 2 || val[0] != '"' {
		return "", walkErr(at, "string expected")
	}
	if bytes.IndexByte(val, '\\') < 0 {
		return string(val[1 : len(val)-1]), nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return "", walkErr(at, "bad string: %v", err)
	}
	return s, nil
}

// AppendString appends s as a JSON string the way the apiserver's
// encoding/json encoder writes it (HTML-safe escaping included).
func AppendString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil { // cannot happen for a string
		return append(b, `""`...)
	}
	return append(b, q...)
}
