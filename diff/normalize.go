package diff

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wtrace/wtrace/internal/jsonscan"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// Normalization. Two documents (an event's object, a write's body, an
// opaque response body, as JSON text) are the same when they are equal
// after these rules, applied at every depth:
//
//   - a member "resourceVersion" or "uid" whose value is a string is
//     removed (metadata, ownerReferences, involvedObject, preconditions);
//   - in an object under a member "metadata": "generation", "managedFields"
//     and "continue" are removed;
//   - a member whose name ends in "Time", "Timestamp", "At" or "-time"
//     (creationTimestamp, lastTransitionTime, startedAt, renewTime, the
//     annotation endpoints.kubernetes.io/last-change-trigger-time, …)
//     whose value is a string shaped like an RFC 3339 time keeps its place
//     but not its value (it reads "<timestamp>"); with a null value it is
//     removed (an unset time: encoders write null or nothing);
//   - a string that is a redaction placeholder (capture/redact replaces
//     each Secret value by "redacted-" and a hash keyed per recording,
//     repeated to the value's length, or by the base64 of that) reads
//     "<redacted:N>", N its length: placeholders of two recordings never
//     match, the lengths they keep do;
//   - every member or element an ignore path names is removed. Paths start
//     at the document; in a List (a document with "items"), also at each
//     item.
//
// Member order does not matter; numbers are compared as written.
//
// Two implementations share these rules (rules.member, rules.step): a
// canonical hash walked over the text without building anything (the
// comparison), and a decoded tree (for the unified diff of documents that
// differ).

// maxDepth bounds nesting, as encoding/json and internal/jsonscan do: a
// deeper document is not a Kubernetes object, and the walker recurses.
const maxDepth = 10000

// timestampValue replaces the value of a timestamp-style member.
const timestampValue = "<timestamp>"

// ErrIgnorePath: an ignore path that does not parse.
var ErrIgnorePath = errors.New("diff: bad ignore path")

// ipath is a parsed ignore path: member names or array indexes, "*"
// matching any.
type ipath []string

// parseIgnore reads an ignore path: a JSON pointer (RFC 6901,
// "/metadata/labels/app.kubernetes.io~1name") or the dot form
// (".metadata.labels.x", with ["a.b/c"] for names holding dots, [0] or
// [*] for elements, * for any member).
func parseIgnore(s string) (ipath, error) {
	switch {
	case s == "" || s == "/" || s == ".":
		return nil, fmt.Errorf("%w %q: it names the whole document", ErrIgnorePath, s)
	case s[0] == '/':
		var p ipath
		for _, seg := range strings.Split(s[1:], "/") {
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(seg, "~0", ""), "~1", ""), "~") {
				return nil, fmt.Errorf("%w %q: '~' must be followed by 0 or 1 (RFC 6901)", ErrIgnorePath, s)
			}
			p = append(p, strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~"))
		}
		return p, nil
	case s[0] == '.' || s[0] == '[':
		return parseDotPath(s)
	}
	return nil, fmt.Errorf("%w %q: start it with '/' (a JSON pointer) or '.' (.metadata.labels.x)", ErrIgnorePath, s)
}

func parseDotPath(s string) (ipath, error) {
	var p ipath
	bad := func(at int, why string) (ipath, error) {
		return nil, fmt.Errorf("%w %q at byte %d: %s", ErrIgnorePath, s, at, why)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			if j == i+1 {
				return bad(i, "empty name")
			}
			p = append(p, s[i+1:j])
			i = j
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return bad(i, "'[' without ']'")
			}
			in := s[i+1 : i+j]
			switch {
			case in == "" || in == "*":
				p = append(p, "*")
			case in[0] == '"':
				// A quoted name may hold ']': find the closing quote first.
				end, err := quotedEnd(s, i+1)
				if err != nil {
					return bad(i, err.Error())
				}
				name, err := strconv.Unquote(s[i+1 : end])
				if err != nil || end >= len(s) || s[end] != ']' {
					return bad(i, "bad quoted name")
				}
				p = append(p, name)
				j = end - i
			default:
				if _, err := strconv.ParseUint(in, 10, 31); err != nil {
					return bad(i, "an index, * or a quoted name expected between [ and ]")
				}
				p = append(p, in)
			}
			i += j + 1
		default:
			return bad(i, "'.' or '[' expected")
		}
	}
	if len(p) == 0 {
		return bad(0, "empty path")
	}
	return p, nil
}

// quotedEnd returns the index just past the Go-quoted string at s[i].
func quotedEnd(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated quoted name")
}

// rules holds the ignore paths. The zero value applies the built-in rules
// only. Safe for concurrent use.
type rules struct {
	paths []ipath
}

func newRules(ignore []string) (*rules, error) {
	r := &rules{}
	for _, s := range ignore {
		p, err := parseIgnore(s)
		if err != nil {
			return nil, err
		}
		r.paths = append(r.paths, p)
	}
	return r, nil
}

// cursor is an ignore path partly walked: paths[p][pos] is the next
// segment to match.
type cursor struct{ p, pos int32 }

// action is what a rule does with an object member.
type action uint8

const (
	keep action = iota
	drop
	stamp // keep the member, replace its value by timestampValue
)

// member decides a member by the built-in rules. inMeta: the object is
// the value of a "metadata" member. val is the value's text (scalars
// only are looked at).
func (r *rules) member(inMeta bool, key string, val []byte) action {
	switch key {
	case "resourceVersion", "uid":
		if len(val) > 0 && val[0] == '"' {
			return drop
		}
	case "generation", "managedFields", "continue":
		if inMeta {
			return drop
		}
	}
	if isTimeKey(key) {
		switch {
		case string(val) == "null":
			return drop // an unset time: null or absent, as encoders differ
		case looksLikeTime(val):
			return stamp
		}
	}
	return keep
}

// isTimeKey: a member name of a timestamp-style field, or of an
// annotation a controller stamps with a time
// (endpoints.kubernetes.io/last-change-trigger-time).
func isTimeKey(k string) bool {
	for _, suf := range [...]string{"Time", "Timestamp", "At", "-time"} {
		if len(k) > len(suf) && strings.HasSuffix(k, suf) {
			return true
		}
	}
	return false
}

// looksLikeTime: a JSON string starting like an RFC 3339 time
// ("2006-01-02T…").
func looksLikeTime(v []byte) bool {
	if len(v) < 13 || v[0] != '"' {
		return false
	}
	d := v[1:]
	for i, c := range d[:11] {
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' && c != 't' && c != ' ' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// step moves the cursors act into the member or element named seg. It
// appends the cursors still walking to dst and reports whether a path
// ends here (the member or element is ignored). With listItem (an element
// of a root List's "items"), every path also starts again.
func (r *rules) step(dst []cursor, act []cursor, seg string, listItem bool) ([]cursor, bool) {
	ignored := false
	for _, c := range act {
		s := r.paths[c.p][c.pos]
		if s != "*" && s != seg {
			continue
		}
		if int(c.pos)+1 == len(r.paths[c.p]) {
			ignored = true
			continue
		}
		dst = append(dst, cursor{c.p, c.pos + 1})
	}
	if listItem {
		dst = r.roots(dst)
	}
	return dst, ignored
}

// roots appends a cursor at the start of every path.
func (r *rules) roots(dst []cursor) []cursor {
	for i := range r.paths {
		dst = append(dst, cursor{int32(i), 0})
	}
	return dst
}

// ---- the canonical hash ----

// hasher computes the canonical hash of JSON text under the rules: equal
// hashes mean equal documents after normalization (64-bit maphash: the
// chance that two different documents collide is 2⁻⁶⁴). Not safe for
// concurrent use; it reuses its buffers.
type hasher struct {
	r       *rules
	names   *names // generated names of the session hashed (nil: none)
	seed    maphash.Seed
	members [][]hmember // per depth, reused
	acts    [][]cursor  // per depth, reused
}

type hmember struct {
	key     []byte
	h       uint64
	dropped bool // left out by a rule (kept until duplicates are resolved)
}

func newHasher(r *rules, seed maphash.Seed) *hasher { return &hasher{r: r, seed: seed} }

// sum returns the canonical hash of the JSON document b (one value,
// optionally surrounded by whitespace).
func (h *hasher) sum(b []byte) (uint64, error) {
	var act []cursor
	if len(h.r.paths) > 0 {
		act = h.r.roots(h.act(0))
	}
	v, end, err := h.value(b, jsonscan.SkipSpace(b, 0), act, 0, false, true)
	if err != nil {
		return 0, err
	}
	if end = jsonscan.SkipSpace(b, end); end != len(b) {
		return 0, &jsonscan.SyntaxError{Offset: end, Msg: "data after the document"}
	}
	return v, nil
}

// sumMember returns the canonical hash of the value of member name of the
// JSON object b (a watch event's "object"), the value taken as the
// document: the rules start there. found is false when b has no such
// member.
func (h *hasher) sumMember(b []byte, name string) (sum uint64, found bool, err error) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false, &jsonscan.SyntaxError{Offset: i, Msg: "object expected"}
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return 0, false, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false, &jsonscan.SyntaxError{Offset: i, Msg: "member name expected"}
		}
		end, esc, err := scanString(b, i)
		if err != nil {
			return 0, false, err
		}
		key := b[i+1 : end-1]
		if esc {
			var dec string
			if json.Unmarshal(b[i:end], &dec) != nil {
				return 0, false, &jsonscan.SyntaxError{Offset: i, Msg: "bad member name"}
			}
			key = []byte(dec)
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false, &jsonscan.SyntaxError{Offset: i, Msg: "':' expected"}
		}
		vs := jsonscan.SkipSpace(b, i+1)
		var act []cursor
		if string(key) == name && len(h.r.paths) > 0 {
			act = h.r.roots(h.act(1))
			h.acts[1] = act
		}
		v, ve, err := h.value(b, vs, act, 1, false, string(key) == name)
		if err != nil {
			return 0, false, err
		}
		if string(key) == name {
			sum, found = v, true
		}
		i = jsonscan.SkipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			if j := jsonscan.SkipSpace(b, i+1); j != len(b) {
				return 0, false, &jsonscan.SyntaxError{Offset: j, Msg: "data after the document"}
			}
			return sum, found, nil
		}
		return 0, false, &jsonscan.SyntaxError{Offset: i, Msg: "',' or '}' expected"}
	}
}

func (h *hasher) act(depth int) []cursor {
	for len(h.acts) <= depth {
		h.acts = append(h.acts, nil)
	}
	return h.acts[depth][:0]
}

// value hashes the value at b[i]. inMeta: the value is that of a
// "metadata" member; root: it is the document itself.
func (h *hasher) value(b []byte, i int, act []cursor, depth int, inMeta, root bool) (uint64, int, error) {
	if i >= len(b) {
		return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: "value expected"}
	}
	switch c := b[i]; {
	case c == '{':
		return h.object(b, i, act, depth, inMeta, root)
	case c == '[':
		return h.array(b, i, act, depth, false)
	case c == '"':
		end, esc, err := scanString(b, i)
		if err != nil {
			return 0, i, err
		}
		s := b[i+1 : end-1]
		if esc {
			var dec string
			if err := json.Unmarshal(b[i:end], &dec); err != nil {
				return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: "bad string"}
			}
			s = []byte(dec)
		}
		if isPlaceholder(s) {
			return h.scalar('s', []byte(placeholderValue(len(s)))), end, nil
		}
		if h.names != nil && !h.names.empty() {
			s = h.names.canonBytes(s)
		}
		if isServerGenerated(s) {
			s = serverGeneratedValue(s)
		}
		return h.scalar('s', s), end, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(b[i:], []byte(lit)) {
				return h.scalar(lit[0], nil), i + len(lit), nil
			}
		}
		return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: "bad literal"}
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		return h.scalar('n', b[i:j]), j, nil
	}
	return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: fmt.Sprintf("unexpected %q", b[i])}
}

func (h *hasher) scalar(tag byte, v []byte) uint64 {
	var m maphash.Hash
	m.SetSeed(h.seed)
	m.WriteByte(tag)
	m.Write(v)
	return m.Sum64()
}

// scanString returns the index just past the string at b[i] and whether
// it holds escapes.
func scanString(b []byte, i int) (int, bool, error) {
	end, err := jsonscan.SkipString(b, i)
	if err != nil {
		return 0, false, err
	}
	return end, bytes.IndexByte(b[i:end], '\\') >= 0, nil
}

// object hashes the object at b[i]: its members' hashes, by name (see
// membersHash), each member as the rules say (dropped, a stamp, or its
// value's hash); act are the ignore paths' cursors, inMeta whether it is
// an object's metadata, root whether it is the document.
func (h *hasher) object(b []byte, i int, act []cursor, depth int, inMeta, root bool) (uint64, int, error) {
	if depth >= maxDepth {
		return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: fmt.Sprintf("nested deeper than %d", maxDepth)}
	}
	for len(h.members) <= depth {
		h.members = append(h.members, nil)
	}
	ms := h.members[depth][:0]
	end, err := jsonscan.WalkObjectAt(b, i, func(key []byte, vs int) (int, error) {
		if bytes.IndexByte(key, '\\') >= 0 {
			var dec string
			if err := json.Unmarshal(quoted(key), &dec); err != nil {
				return 0, &jsonscan.SyntaxError{Offset: vs, Msg: "bad member name"}
			}
			key = []byte(dec)
		}
		a := h.r.member(inMeta, string(key), peekScalar(b, vs))
		var sub []cursor
		ignored := false
		if len(act) > 0 {
			sub, ignored = h.r.step(h.act(depth+1), act, string(key), false)
			h.acts[depth+1] = sub
		}
		var vh uint64
		var ve int
		var err error
		if root && len(h.r.paths) > 0 && string(key) == "items" && b[vs] == '[' {
			vh, ve, err = h.array(b, vs, sub, depth+1, true)
		} else {
			vh, ve, err = h.value(b, vs, sub, depth+1, string(key) == "metadata", false)
		}
		if err != nil {
			return 0, err
		}
		switch {
		case ignored || a == drop:
			ms = append(ms, hmember{key: key, dropped: true})
		case a == stamp:
			ms = append(ms, hmember{key: key, h: h.scalar('s', []byte(timestampValue))})
		default:
			ms = append(ms, hmember{key: key, h: vh})
		}
		return ve, nil
	})
	if err != nil {
		return 0, i, err
	}
	if len(ms) == 0 {
		return h.scalar('{', nil), end, nil
	}
	sum := h.membersHash(ms)
	h.members[depth] = ms[:0]
	return sum, end, nil
}

// quoted puts a member name read raw back in its quotes.
func quoted(key []byte) []byte {
	q := make([]byte, 0, len(key)+2)
	return append(append(append(q, '"'), key...), '"')
}

// peekScalar returns the scalar value at b[vs] (a string with its quotes,
// decoded and cut to 32 characters when it holds escapes, as the tree's
// rules see it), nil for an object, an array or bad input: the built-in
// rules look at scalars only.
func peekScalar(b []byte, vs int) []byte {
	if vs >= len(b) || b[vs] == '{' || b[vs] == '[' {
		return nil
	}
	if b[vs] != '"' {
		e := vs
		for e < len(b) && b[e] != ',' && b[e] != '}' && b[e] != ']' && b[e] != ' ' && b[e] != '\n' && b[e] != '\r' && b[e] != '\t' {
			e++
		}
		return b[vs:e]
	}
	e, esc, err := scanString(b, vs)
	if err != nil {
		return nil
	}
	scalar := b[vs:e]
	if esc {
		var dec string
		if json.Unmarshal(scalar, &dec) == nil {
			scalar = []byte(strconv.Quote(dec[:min(len(dec), 32)]))
		}
	}
	return scalar
}

// membersHash hashes an object's members sorted by name; of members with
// the same name the last one counts, as when encoding/json decodes the
// object; dropped members are left out. It reorders ms.
func (h *hasher) membersHash(ms []hmember) uint64 {
	slices.SortStableFunc(ms, func(x, y hmember) int { return bytes.Compare(x.key, y.key) })
	var m maphash.Hash
	m.SetSeed(h.seed)
	m.WriteByte('{')
	var n [8]byte
	for k, e := range ms {
		if k+1 < len(ms) && bytes.Equal(e.key, ms[k+1].key) || e.dropped {
			continue
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(e.key)))
		m.Write(n[:])
		m.Write(e.key)
		binary.LittleEndian.PutUint64(n[:], e.h)
		m.Write(n[:])
	}
	return m.Sum64()
}

// array hashes the array at b[i]; listItems: it is a root List's "items",
// whose elements are documents the ignore paths start at again.
func (h *hasher) array(b []byte, i int, act []cursor, depth int, listItems bool) (uint64, int, error) {
	if depth >= maxDepth {
		return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: fmt.Sprintf("nested deeper than %d", maxDepth)}
	}
	var m maphash.Hash
	m.SetSeed(h.seed)
	m.WriteByte('[')
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return m.Sum64(), i + 1, nil
	}
	var n [8]byte
	var idx [20]byte
	for k := 0; ; k++ {
		var sub []cursor
		ignored := false
		if len(act) > 0 || listItems {
			sub, ignored = h.r.step(h.act(depth+1), act, string(strconv.AppendInt(idx[:0], int64(k), 10)), listItems)
			h.acts[depth+1] = sub
		}
		vh, ve, err := h.value(b, jsonscan.SkipSpace(b, i), sub, depth+1, false, false)
		if err != nil {
			return 0, i, err
		}
		if !ignored {
			binary.LittleEndian.PutUint64(n[:], vh)
			m.Write(n[:])
		}
		i = jsonscan.SkipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == ']' {
			return m.Sum64(), i + 1, nil
		}
		return 0, i, &jsonscan.SyntaxError{Offset: i, Msg: "',' or ']' expected"}
	}
}

// ---- the tree, for diffs ----

// tree decodes JSON text and applies the rules, generated names read
// through n (nil: none); numbers stay as written (json.Number).
func (r *rules) tree(b []byte, n *names) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the document")
	}
	var act []cursor
	if len(r.paths) > 0 {
		act = r.roots(nil)
	}
	return r.apply(v, act, false, true, n), nil
}

func (r *rules) apply(v any, act []cursor, inMeta, root bool, n *names) any {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			var sub []cursor
			ignored := false
			if len(act) > 0 {
				sub, ignored = r.step(nil, act, k, false)
			}
			switch a := r.member(inMeta, k, scalarText(val)); {
			case ignored || a == drop:
				delete(v, k)
			case a == stamp:
				v[k] = timestampValue
			case root && k == "items" && len(r.paths) > 0:
				if arr, ok := val.([]any); ok {
					v[k] = r.applyArray(arr, sub, true, n)
				}
			default:
				v[k] = r.apply(val, sub, k == "metadata", false, n)
			}
		}
		return v
	case []any:
		return r.applyArray(v, act, false, n)
	case string:
		if isPlaceholder([]byte(v)) {
			return placeholderValue(len(v))
		}
		if isServerGenerated([]byte(v)) {
			return string(serverGeneratedValue([]byte(v)))
		}
		return n.canonString(v)
	}
	return v
}

// isPlaceholder reports whether s is a redaction placeholder that holds
// part of a hash (formats.IsPlaceholder: the format's one definition).
func isPlaceholder(s []byte) bool { return formats.IsPlaceholder(s) }

func placeholderValue(n int) string { return "<redacted:" + strconv.Itoa(n) + ">" }

// serverGenerated are the prefixes of names the apiserver generates
// inside the objects it admits, each followed by genSuffixLen characters
// of its name generator: the projected service account token volume of a
// Pod (plugin/pkg/admission/serviceaccount: "kube-api-access-" and 5
// random characters).
var serverGenerated = []string{"kube-api-access-"}

// genAlphabet is the alphabet of k8s.io/apiserver's name generator
// (utilrand.String: no vowels, no confusable digits).
const genAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// isServerGenerated reports whether s is a name the apiserver generated
// inside an object (serverGenerated).
func isServerGenerated(s []byte) bool {
	for _, p := range serverGenerated {
		if len(s) == len(p)+genSuffixLen && bytes.HasPrefix(s, []byte(p)) {
			for _, c := range s[len(p):] {
				if strings.IndexByte(genAlphabet, c) < 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

// serverGeneratedValue is what a server-generated name reads as: its
// prefix and "<generated>".
func serverGeneratedValue(s []byte) []byte {
	return append(s[:len(s)-genSuffixLen:len(s)-genSuffixLen], "<generated>"...)
}

func (r *rules) applyArray(v []any, act []cursor, listItems bool, n *names) []any {
	out := v[:0]
	for i, e := range v {
		var sub []cursor
		ignored := false
		if len(act) > 0 || listItems {
			sub, ignored = r.step(nil, act, strconv.Itoa(i), listItems)
		}
		if !ignored {
			out = append(out, r.apply(e, sub, false, false, n))
		}
	}
	return out
}

// scalarText is the JSON text of a decoded scalar as the built-in rules
// look at it (a string's text only needs its first bytes).
func scalarText(v any) []byte {
	switch v := v.(type) {
	case nil:
		return []byte("null")
	case string:
		return []byte(strconv.Quote(v[:min(len(v), 32)]))
	case json.Number:
		return []byte(v)
	case bool:
		return []byte(strconv.FormatBool(v))
	}
	return nil
}

// render writes a tree as indented JSON with sorted member names, one
// value per line: the text unified diffs are made of.
func render(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil { // only decoded JSON gets here: cannot fail
		return []byte(fmt.Sprintf("(cannot render: %v)\n", err))
	}
	return buf.Bytes()
}
