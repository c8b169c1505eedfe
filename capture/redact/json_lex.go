package redact

// The JSON walker's lexer: the state machine over the held bytes, strings
// (escapes, what is captured of them), literals checked whole.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// lexer states.
type lstate uint8

const (
	sValue      lstate = iota // a value is expected (top level: also whitespace)
	sValueOrEnd               // after '[': a value or ']'
	sKeyOrEnd                 // after '{': a member name or '}'
	sKey                      // after ',' in an object: a member name
	sColon                    // after a member name: ':'
	sAfter                    // after a value: ',' or the container's end (top level: another value)
	sString                   // inside a string
	sLiteral                  // inside a number or true/false/null
	// Text (a text/* body, see jsonWalker.text): JSON values are walked
	// where they begin at the top level, other bytes are text.
	sText     // a line of text: passed to its end
	sTextHold // the rest of a line after a value that did not parse: held, judged at its end
	sTextFill // the rest of such a line, too long to hold: replaced to its end
)

// capture says what the string being read is kept for.
type capture uint8

const (
	capNone capture = iota
	capKey
	capKind
	capName
	capNamespace
)

// lex runs the state machine over the held bytes from pos.
func (w *jsonWalker) lex() {
	b := w.buf
	i := int(w.pos - w.base)
	for i < len(b) && !w.failed && !w.stopped {
		switch w.st {
		case sString:
			i = w.lexString(b, i)
			continue
		case sText, sTextHold, sTextFill:
			i = w.lexText(b, i)
			continue
		case sLiteral:
			c := b[i]
			if isDelim(c) {
				w.pos = w.base + int64(i)
				w.literalEnd()
				continue
			}
			if len(w.lit) < maxLiteral {
				w.lit = append(w.lit, c)
			}
			w.litN++
			w.litNN = w.litNN || !isNumByte(c)
			i++
			continue
		}
		c := b[i]
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			i++
			continue
		}
		w.pos = w.base + int64(i)
		w.token(c)
		if w.st == sLiteral {
			w.lit = append(w.lit[:0], c)
			w.litN, w.litNN, w.litAt = 1, !isNumByte(c), w.pos
		}
		i++
	}
	w.pos = w.base + int64(len(b))
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ':' || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '"' || c == '{' || c == '['
}

func (w *jsonWalker) syntax(c byte, want string) {
	w.fail(w.pos, fmt.Sprintf("json at byte %d: %s expected, found %q", w.pos, want, c))
}

// token handles a structural byte (not whitespace) at w.pos.
func (w *jsonWalker) token(c byte) {
	switch w.st {
	case sValue, sValueOrEnd:
		if c == ']' && w.st == sValueOrEnd {
			w.pop()
			return
		}
		if len(w.stack) == 0 {
			w.topValue(c)
			return
		}
		w.valueStart(c)
	case sKeyOrEnd, sKey:
		if c == '}' && w.st == sKeyOrEnd {
			w.pop()
			return
		}
		if c != '"' {
			w.syntax(c, "member name")
			return
		}
		w.st = sString
		w.cp = capKey
		w.cbuf = w.cbuf[:0]
		w.cover = false
	case sColon:
		if c != ':' {
			w.syntax(c, "':'")
			return
		}
		w.st = sValue
	case sAfter:
		if len(w.stack) == 0 {
			// Another top-level value (a stream of documents).
			w.topValue(c)
			return
		}
		top := &w.stack[len(w.stack)-1]
		switch {
		case c == ',' && top.obj:
			w.st = sKey
		case c == ',':
			w.st = sValue
		case c == '}' && top.obj, c == ']' && !top.obj:
			w.pop()
		default:
			w.syntax(c, "',' or the end of the container")
		}
	}
}

// topValue begins a top-level value at c, or, in text, a line of text
// where no object or array begins.
func (w *jsonWalker) topValue(c byte) {
	if w.text && c != '{' && c != '[' {
		w.st = sText
		return
	}
	w.valueStart(c)
}

// afterFail is where lexing goes on after a failure at b[i]: nowhere
// (every byte from the failure is replaced), or, in text, at i (the rest
// of the line is held).
func (w *jsonWalker) afterFail(b []byte, i int) int {
	if w.failed {
		return len(b)
	}
	return i
}

// lexText reads text from b[i] to the end of its line; the line's end
// (LF) returns to the top level. It returns the index after what it
// consumed.
func (w *jsonWalker) lexText(b []byte, i int) int {
	j := bytes.IndexByte(b[i:], '\n')
	end := len(b)
	if j >= 0 {
		end = i + j
	}
	if w.st == sTextFill {
		w.writable()
		fill(w.buf[i:end], unparsedFill)
		w.rep.growFailure(int64(end - i))
	}
	if j < 0 {
		return len(b)
	}
	w.pos = w.base + int64(end)
	if w.st == sTextHold {
		w.judgeLine(w.lineAt, w.pos)
	}
	w.st = sValue
	return end + 1
}

// valueStart begins the value whose first byte c is at w.pos.
func (w *jsonWalker) valueStart(c byte) {
	switch c {
	case '{', '[':
		if len(w.stack) >= MaxDepth {
			w.fail(w.pos, fmt.Sprintf("json at byte %d: nested deeper than %d", w.pos, MaxDepth))
			return
		}
		fr := w.child(c == '{')
		if n := len(w.stack); n < cap(w.stack) {
			fr.cands = w.stack[:n+1][n].cands[:0] // the slot's storage, reused
		}
		w.stack = append(w.stack, fr)
		if c == '{' {
			w.st = sKeyOrEnd
		} else {
			w.st = sValueOrEnd
		}
	case '"':
		w.stringValue()
		w.st = sString
		// A string no rule reads is judged whole at its end, for a
		// quoted Secret (quoted.go).
		w.qOpen, w.qStart = w.open == nil && w.cp == capNone, w.pos+1
	case '}', ']', ',', ':':
		w.syntax(c, "value")
	default:
		w.st = sLiteral
	}
}

// lexString reads string bytes from b[i]; it returns the index after what
// it consumed.
func (w *jsonWalker) lexString(b []byte, i int) int {
	quote := -1 // index of the next '"' at or after i, once looked for
	for i < len(b) {
		if w.hex > 0 {
			if !isHex(b[i]) {
				w.pos = w.base + int64(i)
				w.fail(w.pos, fmt.Sprintf("json at byte %d: bad \\u escape", w.pos))
				return w.afterFail(b, i)
			}
			w.hex--
			if w.cp != capNone {
				w.keep(b[i])
			}
			i++
			continue
		}
		if w.esc {
			w.esc = false
			c := b[i]
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				w.hex = 4
			default:
				w.pos = w.base + int64(i)
				w.fail(w.pos, fmt.Sprintf("json at byte %d: bad escape %q", w.pos, c))
				return w.afterFail(b, i)
			}
			if w.cp != capNone {
				w.keep(c)
			}
			i++
			continue
		}
		j := i
		if w.cp == capNone {
			// Control characters are not checked: they do not move a
			// string's end, so they cannot hide a credential. The next
			// quote is looked for once, not again after every escape
			// before it.
			if quote < i {
				quote = bytes.IndexByte(b[i:], '"')
				if quote < 0 {
					quote = len(b)
				} else {
					quote += i
				}
			}
			j = quote
			if k := bytes.IndexByte(b[i:quote], '\\'); k >= 0 {
				j = i + k
			}
			if j == len(b) {
				return j
			}
		} else {
			for j < len(b) && b[j] != '"' && b[j] != '\\' {
				w.keep(b[j])
				j++
			}
			if j == len(b) {
				return j
			}
		}
		if b[j] == '\\' {
			w.esc = true
			if w.cp != capNone {
				w.keep('\\')
			}
			i = j + 1
			continue
		}
		w.pos = w.base + int64(j)
		w.stringEnd()
		return j + 1
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (w *jsonWalker) keep(c byte) {
	if len(w.cbuf) < maxCapture {
		w.cbuf = append(w.cbuf, c)
	} else {
		w.cover = true
	}
}

// captured decodes the captured string.
func (w *jsonWalker) captured() string {
	if bytes.IndexByte(w.cbuf, '\\') < 0 {
		return string(w.cbuf)
	}
	q := make([]byte, 0, len(w.cbuf)+2)
	q = append(append(append(q, '"'), w.cbuf...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(w.cbuf)
	}
	return s
}

// literalEnd validates the literal that ended before w.pos: true, false,
// null or a number, checked whole (a long one must hold only number
// bytes, so that nothing can hide behind a valid beginning).
func (w *jsonWalker) literalEnd() {
	ok := validLiteral(w.lit)
	if w.litN > len(w.lit) {
		ok = ok && !w.litNN
	}
	if !ok {
		at := w.pos - int64(w.litN)
		w.fail(at, fmt.Sprintf("json at byte %d: bad literal %q", at, clipField(string(w.lit))))
		return
	}
	w.st = sAfter
}

func isNumByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func validLiteral(l []byte) bool {
	switch string(l) {
	case "true", "false", "null":
		return true
	}
	if len(l) == 0 {
		return false
	}
	for i, c := range l {
		switch {
		case c >= '0' && c <= '9':
		case c == '-' || c == '+':
			if i > 0 && l[i-1] != 'e' && l[i-1] != 'E' {
				return false
			}
		case c == '.' || c == 'e' || c == 'E':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return l[0] == '-' || l[0] >= '0' && l[0] <= '9'
}
