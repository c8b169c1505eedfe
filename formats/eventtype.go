package formats

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protowire"
)

// eventType returns the type of a watch event ("ADDED", …) from its exact
// bytes: for JSON the string value of the top-level "type" member, for
// protobuf field 1 of the metav1.WatchEvent. With EventsNone (a response
// head that was not captured) it guesses the format from the first byte.
// ok is false when the type cannot be read. It never allocates for the
// common case of a plain type string; the result aliases data.
func eventType(data []byte, f EventFormat) (typ []byte, ok bool) {
	switch f {
	case EventsJSON:
		return jsonEventType(data)
	case EventsProtobuf:
		return protoEventType(data)
	case EventsNone:
		if i := skipSpace(data, 0); i < len(data) && data[i] == '{' {
			return jsonEventType(data)
		}
		return protoEventType(data)
	}
	return nil, false
}

// protoEventType reads field 1 (type, a string) of a metav1.WatchEvent.
func protoEventType(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == 1 && wt == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			return v, true
		}
		n = protowire.ConsumeFieldValue(num, wt, b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return nil, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the end (after the closing quote) of the JSON string
// starting at b[i] == '"', whether it holds escapes, or -1.
func scanString(b []byte, i int) (end int, escaped bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			i++
		}
	}
	return -1, escaped
}

// unquote returns the contents of the JSON string b (quotes included).
func unquote(b []byte, escaped bool) ([]byte, bool) {
	if !escaped {
		return b[1 : len(b)-1], true
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// skipValue returns the end of the JSON value starting at b[i], or -1. It
// checks only what it needs to find the end: nesting and strings.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			case '"':
				end, _ := scanString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			}
		}
		return -1
	}
	// A number or a literal.
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// jsonEventType returns the string value of the top-level "type" member of
// the JSON object b.
func jsonEventType(b []byte) ([]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end, esc := scanString(b, i)
		if end < 0 {
			return nil, false
		}
		key, ok := unquote(b[i:end], esc)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if string(key) == "type" {
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			end, esc := scanString(b, i)
			if end < 0 {
				return nil, false
			}
			return unquote(b[i:end], esc)
		}
		if i = skipValue(b, i); i < 0 {
			return nil, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return nil, false
		}
		i++
	}
}
