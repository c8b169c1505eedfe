package redact

// Secrets quoted in text: a string value (an Event's message, an
// admission error, a failed apply's report, a log line) whose text quotes
// a Secret manifest, in JSON or in a form this package does not parse.

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of the judgement of quoted text.
const (
	// minQuoted is the shortest string that can name a Secret's kind
	// ("kind:Secret"); shorter strings are not looked at.
	minQuoted = len("kind:Secret")
	// maxQuotedDepth bounds the strings quoted inside quoted strings that
	// are followed (a manifest in an apply's patch, in a message, in an
	// Event): deeper text that may name a Secret is replaced (fail
	// closed). Real reports nest two or three levels.
	maxQuotedDepth = 8
	// maxQuotedStarts bounds the places of one string where a JSON value
	// is looked for (each '{' and '[' not inside a value already read):
	// past it, what is left unread counts as unparsed.
	maxQuotedStarts = 256
)

// whyQuoted says why a quoted string was replaced whole.
const whyQuoted = "a string quoting a Secret manifest that cannot be parsed"

// quoted judges text, the content of a string value (escapes decoded),
// for quoted Secrets: every JSON value in it (from a '{' or a '[') is
// walked by the rules of the package, with the kindless objects of a
// body sent to a Secret endpoint (the text speaks of a Secret: a patch it
// quotes is the Secret's), and each place where the text names the kind
// Secret as a manifest does (see secretMentions) must lie inside a value
// so walked. It returns the text redacted (nil if nothing changed, else
// of the same length) and, when a mention lies outside every JSON value
// that parsed (YAML, a value cut short, Go's %v of an object), why the
// whole string must be replaced instead (fail closed). What the walks
// replaced is added to rep.
func (s *Secrets) quoted(text []byte, depth int, rep *Report) (out []byte, failed string) {
	// Every mention of the kind, and every Secret a JSON value may be,
	// names it in a way mayHoldJSON sees (letters escaped included).
	if !mayHoldJSON(text) {
		return nil, ""
	}
	mentions := secretMentions(text)
	if depth > maxQuotedDepth {
		return nil, "strings quoted deeper than the redaction follows"
	}
	type span struct{ start, end int }
	var docs []span
	var inner Report
	starts := 0
	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '{' && c != '[' {
			continue
		}
		if starts++; starts > maxQuotedStarts {
			break
		}
		n, redacted, ok := s.walkOne(text[i:], depth, &inner)
		if !ok {
			continue
		}
		if redacted != nil {
			if out == nil {
				out = bytes.Clone(text)
			}
			copy(out[i:], redacted)
		}
		docs = append(docs, span{i, i + n})
		i += n - 1
	}
	for _, m := range mentions {
		covered := false
		for _, d := range docs {
			covered = covered || d.start <= m[0] && m[1] <= d.end
		}
		if !covered {
			return nil, whyQuoted
		}
	}
	if out != nil || !inner.Empty() {
		rep.Merge(&inner)
	}
	return out, ""
}

// escapedKind reports whether b may quote text that names a kind with
// escaped letters no JSON decoder reads (YAML's \x53 and \U00000053, in
// text quoted once or more): a backslash before an x or a U, and the word
// kind. (JSON's own \u escapes are mayHoldJSON's.)
func escapedKind(b []byte) bool {
	for i := 0; ; {
		k := bytes.IndexByte(b[i:], '\\')
		if k < 0 {
			return false
		}
		j := i + k + 1
		if j < len(b) && (b[j] == 'x' || b[j] == 'U') {
			return containsFold(b, "kind")
		}
		i = j
	}
}

// walkOne walks the JSON value at the start of text (a '{' or a '['),
// holding no more than text. It returns the value's length, its redacted
// bytes (nil if unchanged) and whether it parsed as one whole value.
func (s *Secrets) walkOne(text []byte, depth int, rep *Report) (n int, out []byte, ok bool) {
	var r Report
	w := newJSONWalker(s, &r, true)
	w.one, w.depth = true, depth
	w.arr, w.buf, w.owned = text, text, false
	w.lex()
	if w.failed || !w.stopped {
		return 0, nil, false
	}
	rep.Merge(&r)
	n = int(w.stopAt)
	if !w.changed {
		return n, nil, true
	}
	return n, w.buf[:n], true
}

// secretMentions returns the spans of text where it names the kind
// Secret (or SecretList) as a manifest does: a "kind" member name, in any
// case, then ':', then the name — JSON ("kind":"Secret"), YAML (kind:
// Secret), Go's %+v (Kind:Secret) — with quotes, backslashes of nested quoting and blanks
// around the words, and the name's letters possibly escaped (\u0053,
// \x53, any number of backslashes before them); and Go's %v of a Secret
// value (&Secret{ObjectMeta:…, Data:map[…]}). A group-version-kind as
// kubectl prints one (/v1, Kind=Secret) names no manifest: it is no
// mention.
func secretMentions(text []byte) [][2]int {
	var out [][2]int
	for i := 0; i+4 <= len(text); i++ {
		if text[i]|0x20 != 'k' || !equalFold(text[i:i+4], "kind") || i > 0 && isIdent(text[i-1]) {
			continue
		}
		j := skipQuoting(text, i+4)
		if j >= len(text) || text[j] != ':' {
			continue
		}
		j = skipQuoting(text, j+1)
		name, end := looseWord(text, j)
		if name == "Secret" || name == "SecretList" {
			out = append(out, [2]int{i, end})
		}
	}
	for i := 0; ; {
		k := bytes.Index(text[i:], markerSecret)
		if k < 0 {
			return out
		}
		j := i + k
		end := j + len(markerSecret)
		if bytes.HasPrefix(text[end:], []byte("List")) {
			end += len("List")
		}
		if end < len(text) && text[end] == '{' && (j == 0 || !isIdent(text[j-1])) {
			out = append(out, [2]int{j, end + 1})
		}
		i = end
	}
}

// skipQuoting skips blanks and quotes from text[i], and backslashes that
// escape a quote (nested quoting); a backslash before anything else may
// begin an escaped letter, and stops it.
func skipQuoting(text []byte, i int) int {
	for i < len(text) {
		switch text[i] {
		case ' ', '\t', '"', '\'', '`':
			i++
			continue
		case '\\':
			j := i
			for j < len(text) && text[j] == '\\' {
				j++
			}
			if j < len(text) && (text[j] == '"' || text[j] == '\'') {
				i = j + 1
				continue
			}
		}
		break
	}
	return i
}

// looseWord reads the word at text[i] — letters and digits, each possibly
// written as an escape (\uXXXX, \xXX behind any number of backslashes) —
// and returns it (at most 16 letters) and where it ends.
func looseWord(text []byte, i int) (string, int) {
	var w []byte
	for i < len(text) && len(w) <= 16 {
		c := text[i]
		if isIdent(c) {
			w = append(w, c)
			i++
			continue
		}
		if c != '\\' {
			break
		}
		j := i
		for j < len(text) && text[j] == '\\' {
			j++
		}
		switch {
		case j+5 <= len(text) && text[j] == 'u' && text[j+1] == '0' && text[j+2] == '0' && isHex(text[j+3]) && isHex(text[j+4]):
			w = append(w, hexVal(text[j+3])<<4|hexVal(text[j+4]))
			i = j + 5
		case j+9 <= len(text) && text[j] == 'U' && string(text[j+1:j+7]) == "000000" && isHex(text[j+7]) && isHex(text[j+8]):
			w = append(w, hexVal(text[j+7])<<4|hexVal(text[j+8]))
			i = j + 9
		case j+3 <= len(text) && text[j] == 'x' && isHex(text[j+1]) && isHex(text[j+2]):
			w = append(w, hexVal(text[j+1])<<4|hexVal(text[j+2]))
			i = j + 3
		default:
			return string(w), i
		}
	}
	return string(w), i
}

func isIdent(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func equalFold(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}

// containsFold reports whether b contains the lower-case word s (its
// first byte a letter) in any case.
func containsFold(b []byte, s string) bool {
	for _, c := range [2]byte{s[0], s[0] &^ 0x20} {
		for i := 0; i+len(s) <= len(b); {
			k := bytes.IndexByte(b[i:], c)
			if k < 0 || i+k+len(s) > len(b) {
				break
			}
			if equalFold(b[i+k:i+k+len(s)], s) {
				return true
			}
			i += k + 1
		}
	}
	return false
}

// unquote decodes the raw bytes of a JSON string (between its quotes,
// escapes valid: the lexer checked them) into text, and returns for each
// byte of text the raw offset of what it came from (nil when raw holds no
// escape: text is raw). A lone surrogate decodes to U+FFFD, as
// encoding/json decodes it.
func unquote(raw []byte) (text []byte, at []int32) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	text = make([]byte, 0, len(raw))
	at = make([]int32, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			text = append(text, c)
			at = append(at, int32(i))
			i++
			continue
		}
		start := i
		var r rune
		switch e := raw[i+1]; e {
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		case 'u':
			r, i = hex4(raw, i+2), i+6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw, i+2)
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r, i = d, i+6
				} else {
					r = utf8.RuneError
				}
			}
		default: // '"', '\\', '/'
			r, i = rune(e), i+2
		}
		n := len(text)
		text = utf8.AppendRune(text, r)
		for range len(text) - n {
			at = append(at, int32(start))
		}
	}
	return text, at
}

// hex4 reads four hex digits at raw[i:] (-1 if cut short).
func hex4(raw []byte, i int) rune {
	if i+4 > len(raw) {
		return -1
	}
	var r rune
	for _, c := range raw[i : i+4] {
		r = r<<4 | rune(hexVal(c))
	}
	return r
}

// requote writes the changes of out (text, redacted) back into raw, the
// string's bytes as sent, through at (see unquote): a changed run whose
// raw bytes hold no escape is copied as it is (a placeholder stays a
// placeholder, base64 stays base64); one that spans escapes is filled,
// its raw length kept, so the string stays a valid JSON string of the
// same length.
func requote(raw, text, out []byte, at []int32) {
	if at == nil {
		copy(raw, out)
		return
	}
	for i := 0; i < len(text); {
		if text[i] == out[i] {
			i++
			continue
		}
		j := i
		for j < len(text) && (text[j] != out[j] || at[j] == at[j-1]) {
			j++
		}
		for i > 0 && at[i] == at[i-1] {
			i--
		}
		rs, re := int(at[i]), len(raw)
		if j < len(text) {
			re = int(at[j])
		}
		if re-rs == j-i && bytes.IndexByte(raw[rs:re], '\\') < 0 {
			copy(raw[rs:re], out[i:j])
		} else {
			fill(raw[rs:re], unparsedFill)
		}
		i = j
	}
}

// judgeString judges the string value the walker holds at absolute
// offsets [start, end) (its bytes between the quotes) for a quoted Secret
// manifest, and replaces what must be.
func (w *jsonWalker) judgeString(start, end int64) {
	raw := w.buf[start-w.base : end-w.base]
	if len(raw) < minQuoted || !mayHoldJSON(raw) {
		return
	}
	text, at := unquote(raw)
	out, failed := w.s.quoted(text, w.depth+1, w.rep)
	if out == nil && failed == "" {
		return
	}
	w.writable()
	raw = w.buf[start-w.base : end-w.base]
	if failed != "" {
		fill(raw, unparsedFill)
		w.rep.fail(start, int64(len(raw)), failed)
		return
	}
	if at == nil {
		copy(raw, out) // text aliased the held bytes: copy from out, not text
		return
	}
	requote(raw, text, out, at)
}
