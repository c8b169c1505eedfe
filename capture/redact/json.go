package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/wtrace/wtrace/formats"
)

// Limits of the JSON walker.
const (
	// MaxDepth bounds nesting, like encoding/json and json-iterator
	// (10000): deeper input is not a Kubernetes object; it fails closed.
	MaxDepth = 10000
	// MaxHold bounds the bytes a streaming walker holds back while the kind
	// of an object that may hold a credential is not known yet (an object
	// whose "kind" member comes after its "data", a list whose "kind"
	// comes after its items, a value longer than this). Past it, every
	// value still waiting is redacted (fail closed) and the bytes go on.
	// Kubernetes objects are at most 1.5 MiB (etcd's request limit), and
	// the apiserver writes "kind" first, so real traffic holds far less.
	MaxHold = 16 << 20
	// maxCapture bounds a decoded member name, kind, name or namespace.
	// The longest name the walker looks for is the 48-byte annotation key;
	// Kubernetes names are at most 253 bytes.
	maxCapture = 256
	// maxLiteral bounds a number or literal kept for validation.
	maxLiteral = 64
)

// lastApplied is the annotation kubectl apply writes: for a Secret it
// holds the whole object, values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// why says what a candidate value is.
type why uint8

const (
	whyData        why = iota + 1 // a Secret's data value (base64)
	whyStringData                 // a Secret's stringData value
	whyLastApplied                // the last-applied-configuration annotation
	whyToken                      // TokenRequest status.token
	whyReviewToken                // TokenReview spec.token
	whyPatch                      // a value set by a patch sent to a Secret endpoint
)

func (w why) reason() formats.RedactReason {
	switch w {
	case whyLastApplied:
		return formats.RedactLastApplied
	case whyToken, whyReviewToken:
		return formats.RedactToken
	}
	return formats.RedactSecretValue
}

func (w why) field(key string) string {
	switch w {
	case whyData:
		return "data." + key
	case whyStringData:
		return "stringData." + key
	case whyLastApplied:
		return "last-applied-configuration"
	case whyToken:
		return "status.token"
	case whyReviewToken:
		return "spec.token"
	}
	return "value"
}

// decision is what becomes of a candidate value.
type decision uint8

const (
	dKeep    decision = iota
	dRedact           // replace it
	dContent          // replace it if its own content is (or holds) a Secret
	dPending          // its owner's kind is not known yet
)

// decide applies the rules of the package documentation to a value of
// an object of the given kind ("" when the object has none).
func decide(w why, kind string) decision {
	switch w {
	case whyPatch:
		return dRedact
	case whyData, whyStringData:
		if kind == "Secret" {
			return dRedact
		}
	case whyLastApplied:
		// The annotation copies the object as applied: a Secret's is one;
		// any other's is judged by what it holds (a custom resource may
		// embed a Secret, a PartialObjectMetadata or a kindless object
		// may be a Secret's view).
		if kind == "Secret" {
			return dRedact
		}
		return dContent
	case whyToken:
		if kind == "TokenRequest" {
			return dRedact
		}
	case whyReviewToken:
		if kind == "TokenReview" {
			return dRedact
		}
	}
	return dKeep
}

// itemKind is the kind of the items of a list of kind list ("" if not
// known: a v1 List's items carry their own).
func itemKind(list string) string {
	if k, ok := strings.CutSuffix(list, "List"); ok && k != "" {
		return k
	}
	return ""
}

// ctx is what a container is, relative to the object that owns it.
type ctx uint8

const (
	cNone        ctx = iota
	cData            // inside an owner's data or stringData: strings are candidates
	cPatch           // inside a value of a JSON patch to a Secret: strings are redacted
	cPatchArray      // the root array of a JSON patch (RFC 6902) to a Secret
	cPatchOp         // an operation of cPatchArray
	cMetadata        // an owner's metadata
	cAnnotations     // an owner's metadata.annotations
	cStatus          // an owner's status
	cSpec            // an owner's spec
	cItems           // an owner's items array
)

// member names the walker looks for.
type key uint8

const (
	kOther key = iota
	kKind
	kData
	kStringData
	kMetadata
	kAnnotations
	kStatus
	kSpec
	kToken
	kItems
	kValue
	kName
	kNamespace
	kLastApplied
)

// keyOf returns the member name's key (a switch: faster than a map for
// these few names).
func keyOf(name string) key {
	switch name {
	case "kind":
		return kKind
	case "data":
		return kData
	case "stringData":
		return kStringData
	case "metadata":
		return kMetadata
	case "annotations":
		return kAnnotations
	case "status":
		return kStatus
	case "spec":
		return kSpec
	case "token":
		return kToken
	case "items":
		return kItems
	case "value":
		return kValue
	case "name":
		return kName
	case "namespace":
		return kNamespace
	case lastApplied:
		return kLastApplied
	}
	return kOther
}

// cand is a candidate value: the bytes between a string's quotes, at
// absolute offsets [start, end) (end < 0 while the string is open).
type cand struct {
	start, end int64
	why        why
	b64        bool
	d          decision
	field      string // member name under data / stringData
	owner      int    // stack index of the owning object; -1: none (a patch) or forwarded
	// forwarded: the value of a kindless list item, waiting for the
	// list's kind; the item's kind (once known), namespace and name.
	forwarded         bool
	okind, ons, oname string
}

// jframe is an open object or array.
type jframe struct {
	obj   bool
	ctx   ctx
	owner int // for cData, cMetadata, cAnnotations, cStatus, cSpec, cItems: the owner's index
	dwhy  why // for cData: whyData or whyStringData
	key   key
	ktext string // current member name (clipped)

	// As an owner (objects only).
	kind         string
	hasKind      bool
	itemsDecided bool // values of its kindless items were decided by its kind
	item         bool // an element of the items of the object at owner
	assume       bool // the root of a body sent to a Secret endpoint: a Secret if it has no kind
	name         string
	ns           string
	cands        []cand // waiting for kind
	icands       []cand // waiting for kind, forwarded by kindless items
	done         []done // redacted, reported when the object ends (its name is known then)
}

type done struct {
	why   why
	field string
	n     int64
}

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

// jsonWalker finds and replaces credentials in JSON text fed in pieces,
// in one pass, holding back only the bytes of values whose fate is not
// known yet. It is the engine behind Event, Tail and Body for JSON.
type jsonWalker struct {
	s      *Secrets
	rep    *Report
	assume bool // the body was sent to a Secret endpoint

	arr   []byte // buf's array: buf == arr[off:]
	off   int
	buf   []byte // held bytes; buf[0] is at absolute offset base
	base  int64
	owned bool // buf may be written (else copied first)
	pos   int64

	rootKind string // kind of the first top-level object

	stack []jframe
	st    lstate
	esc   bool // in a string, after '\'
	hex   int  // in a string, \u hex digits still to come
	cp    capture
	cbuf  []byte // captured string or member name, raw (escapes undecoded)
	cover bool   // cbuf overflowed
	open  *cand  // candidate string being read
	lit   []byte // the literal being read (its first maxLiteral bytes)
	litAt int64  // where it began: held until it is known to be valid
	litN  int    // its length
	litNN bool   // it holds a byte that no number holds
	// streaming fill: the open candidate is replaced as it arrives (it
	// outgrew MaxHold)
	streamFill bool

	failed  bool  // fail closed: every byte from failAt on is replaced
	failAt  int64 //
	changed bool
	// pending counts candidates waiting in frames; minPending is the
	// smallest start among them, recomputed only when some left (dirty).
	pending    int
	minPending int64
	dirty      bool
}

func newJSONWalker(s *Secrets, rep *Report, assume bool) *jsonWalker {
	return &jsonWalker{s: s, rep: rep, assume: assume, owned: true}
}

// walkers keeps the walkers of whole events (Secrets.Event) between
// events, with their stacks and buffers: one event after another, a
// recording would otherwise grow a new stack for each.
var walkers sync.Pool

// pooledJSONWalker is newJSONWalker(s, rep, false), reusing a walker that
// recycle returned. Nothing the walker returned refers to its own
// buffers: whole returns the event or a copy of it.
func pooledJSONWalker(s *Secrets, rep *Report) *jsonWalker {
	w, _ := walkers.Get().(*jsonWalker)
	if w == nil {
		return newJSONWalker(s, rep, false)
	}
	w.s, w.rep, w.owned = s, rep, true
	return w
}

// maxPooledFrames bounds the stack a recycled walker keeps (a deeply
// nested event's stack is dropped rather than held).
const maxPooledFrames = 256

// maxPooledCands bounds the waiting values a recycled frame keeps room
// for.
const maxPooledCands = 64

// recycle resets w and returns it to the pool; w must not be used after.
func (w *jsonWalker) recycle() {
	if cap(w.stack) > maxPooledFrames || cap(w.cbuf) > 64<<10 {
		return
	}
	st := w.stack[:cap(w.stack)]
	for i := range st {
		// A slot keeps the storage of its frame's waiting values: the
		// values of most objects wait for its end (see candidate).
		c := st[i].cands[:0]
		if cap(c) > maxPooledCands {
			c = nil
		}
		st[i] = jframe{cands: c}
	}
	*w = jsonWalker{stack: st[:0], cbuf: w.cbuf[:0], lit: w.lit[:0]}
	walkers.Put(w)
}

// write processes p (appended to the held bytes). What take returned
// before must have been consumed.
func (w *jsonWalker) write(p []byte) {
	start := w.pos
	w.appendHeld(p)
	if w.failed {
		w.pos += int64(len(p))
		w.replaceFrom(start)
		return
	}
	w.lex()
	if w.failed {
		w.replaceFrom(w.failAt) // still held: see frontier
		return
	}
	if w.streamFill && w.open != nil {
		w.fillOpen()
	}
	if w.pos-w.frontier() > MaxHold {
		w.overflow()
	}
}

// appendHeld appends p to the held bytes, moving them to the front of
// their array when the released prefix is at least as long (amortised
// O(1) per byte).
func (w *jsonWalker) appendHeld(p []byte) {
	held := len(w.arr) - w.off
	if w.off > 0 && w.off >= held {
		copy(w.arr, w.arr[w.off:])
		w.arr = w.arr[:held]
		w.off = 0
	}
	if cap(w.arr)-len(w.arr) < len(p) {
		n := make([]byte, held, max(2*(held+len(p)), 4<<10))
		copy(n, w.arr[w.off:])
		w.arr, w.off = n, 0
	}
	w.arr = append(w.arr, p...)
	w.buf = w.arr[w.off:]
}

// whole processes b, a complete document, without copying it unless a
// value is replaced; complete says whether it ended where it should.
func (w *jsonWalker) whole(b []byte, complete bool) []byte {
	w.arr, w.buf, w.owned = b, b, false
	w.lex()
	if w.failed {
		w.replaceFrom(w.failAt)
	}
	w.end(complete)
	return w.buf
}

// take returns the bytes that can be released and forgets them. They stay
// valid until the next write.
func (w *jsonWalker) take() []byte {
	f := w.frontier()
	n := int(f - w.base)
	if n <= 0 {
		return nil
	}
	out := w.buf[:n:n]
	w.base = f
	w.off += n
	w.buf = w.arr[w.off:]
	return out
}

// frontier is the absolute offset before which no byte can change any
// more.
func (w *jsonWalker) frontier() int64 {
	f := w.pos
	if w.failed {
		return f
	}
	if w.open != nil && !w.streamFill && w.open.start < f {
		f = w.open.start
	}
	if w.st == sLiteral && w.litAt < f {
		f = w.litAt // a literal is valid only once it ended
	}
	if w.pending == 0 {
		return f
	}
	if w.dirty {
		w.dirty = false
		w.minPending = w.pos
		for i := range w.stack {
			fr := &w.stack[i]
			if len(fr.cands) > 0 && fr.cands[0].start < w.minPending {
				w.minPending = fr.cands[0].start
			}
			if len(fr.icands) > 0 && fr.icands[0].start < w.minPending {
				w.minPending = fr.icands[0].start
			}
		}
	}
	return min(f, w.minPending)
}

// addPending notes a candidate that waits in a frame from now on.
func (w *jsonWalker) addPending(n int, start int64) {
	if w.pending == 0 && !w.dirty {
		w.minPending = start
	} else if !w.dirty {
		w.minPending = min(w.minPending, start)
	}
	w.pending += n
}

// dropPending notes n candidates that no longer wait.
func (w *jsonWalker) dropPending(n int) {
	if n > 0 {
		w.pending -= n
		w.dirty = true
	}
}

// at returns the held byte at absolute offset o.
func (w *jsonWalker) at(o int64) byte { return w.buf[o-w.base] }

// writable makes buf writable (copy on first write in whole mode).
func (w *jsonWalker) writable() {
	if !w.owned {
		w.buf = bytes.Clone(w.buf)
		w.arr, w.off = w.buf, 0
		w.owned = true
	}
	w.changed = true
}

// redact replaces candidate c (complete) and notes it on its owner.
func (w *jsonWalker) redact(c *cand) {
	w.writable()
	v := w.buf[c.start-w.base : c.end-w.base]
	w.s.replace(v, c.b64)
	w.noteDone(c, int64(len(v)))
}

func (w *jsonWalker) noteDone(c *cand, n int64) {
	switch {
	case c.forwarded:
		w.rep.add(c.why.reason(), objectName(c.okind, c.ons, c.oname), c.why.field(c.field), 1, n)
		return
	case c.why == whyPatch:
		w.rep.add(c.why.reason(), "patch to a Secret", "", 1, n)
		return
	}
	if c.owner >= 0 && c.owner < len(w.stack) {
		o := &w.stack[c.owner]
		if len(o.done) < maxReportEntries {
			o.done = append(o.done, done{why: c.why, field: c.field, n: n})
			return
		}
	}
	w.rep.add(c.why.reason(), "", c.why.field(c.field), 1, n)
}

// settle applies decision d to the complete candidate c.
func (w *jsonWalker) settle(c *cand, d decision) {
	switch d {
	case dRedact:
		w.redact(c)
	case dContent:
		if w.contentSecret(w.buf[c.start-w.base : c.end-w.base]) {
			w.redact(c)
		}
	}
}

// contentSecret reports whether a last-applied-configuration value (the
// raw bytes of a JSON string) is, or holds, a Secret — or cannot be
// parsed, which counts as holding one.
func (w *jsonWalker) contentSecret(raw []byte) bool {
	if !mayHoldJSON(raw) {
		return false
	}
	var inner string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if err := json.Unmarshal(q, &inner); err != nil {
		return true
	}
	return objectHoldsSecret([]byte(inner))
}

// objectHoldsSecret reports whether a complete JSON document is a Secret,
// holds a credential, or cannot be parsed.
func objectHoldsSecret(b []byte) bool {
	if !mayHoldJSON(b) {
		return false
	}
	var rep Report
	iw := newJSONWalker(checkSecrets, &rep, false)
	iw.whole(b, true)
	if iw.changed || iw.failed || !rep.Empty() {
		return true
	}
	return iw.rootKind == "Secret"
}

// checkSecrets redacts copies that are only inspected, never stored.
var checkSecrets = &Secrets{}

// fail switches to fail-closed mode at absolute offset at: every value
// still waiting is replaced, and so is every byte from at on.
func (w *jsonWalker) fail(at int64, msg string) {
	if w.failed {
		return
	}
	w.resolveAll()
	w.failed = true
	w.failAt = at
	w.rep.fail(at, 0, msg)
	w.stack = w.stack[:0]
	w.open = nil
	w.pending, w.dirty = 0, false
}

// replaceFrom replaces the held bytes from absolute offset from to pos.
func (w *jsonWalker) replaceFrom(from int64) {
	if from < w.base {
		from = w.base
	}
	if from >= w.pos {
		return
	}
	w.writable()
	fill(w.buf[from-w.base:w.pos-w.base], unparsedFill)
	w.rep.growFailure(w.pos - from)
}

// resolveAll redacts every candidate still waiting, the open one included
// (fail closed: an object whose kind never came is treated as a Secret).
func (w *jsonWalker) resolveAll() {
	for i := range w.stack {
		fr := &w.stack[i]
		for j := range fr.cands {
			w.redact(&fr.cands[j])
		}
		for j := range fr.icands {
			w.redact(&fr.icands[j])
		}
		fr.cands, fr.icands = nil, nil
	}
	w.pending, w.dirty = 0, false
	if c := w.open; c != nil && c.d != dKeep {
		w.writable()
		from := max(c.start, w.base)
		fill(w.buf[from-w.base:w.pos-w.base], unparsedFill)
		w.noteDone(c, w.pos-c.start)
		c.d = dKeep // already replaced
		w.streamFill = false
	}
	for i := len(w.stack) - 1; i >= 0; i-- {
		w.report(&w.stack[i])
	}
}

// overflow handles MaxHold: values waiting for their owner's kind are
// redacted, and an open candidate is replaced as it arrives.
func (w *jsonWalker) overflow() {
	if w.st == sLiteral && w.pos-w.litAt > MaxHold {
		w.fail(w.litAt, fmt.Sprintf("json at byte %d: a literal longer than %d bytes", w.litAt, MaxHold))
		w.replaceFrom(w.failAt)
		return
	}
	var n int64
	for i := range w.stack {
		fr := &w.stack[i]
		for j := range fr.cands {
			w.redact(&fr.cands[j])
			n++
		}
		for j := range fr.icands {
			w.redact(&fr.icands[j])
			n++
		}
		fr.cands, fr.icands = nil, nil
	}
	w.pending, w.dirty = 0, false
	if c := w.open; c != nil && c.d != dKeep && !w.streamFill {
		w.streamFill = true
		w.fillOpen()
		n++
	}
	if n > 0 {
		w.rep.add(formats.RedactUnparsed, "", fmt.Sprintf("kind not known within %d bytes", MaxHold), 0, 0)
	}
}

// fillOpen replaces what has arrived of the open candidate.
func (w *jsonWalker) fillOpen() {
	c := w.open
	from := max(c.start, w.base)
	if from < w.pos {
		w.writable()
		fill(w.buf[from-w.base:w.pos-w.base], unparsedFill)
	}
}

// end finishes the input: complete says the body ended where its framing
// said. Values still waiting when the text ends inside an object are
// redacted (fail closed).
func (w *jsonWalker) end(complete bool) {
	defer func() { w.st = sValue }() // nothing is open any more
	if !w.failed && w.st == sLiteral && len(w.stack) == 0 {
		w.literalEnd()
		if w.failed {
			w.replaceFrom(w.failAt)
		}
	}
	if w.failed {
		return
	}
	if len(w.stack) == 0 && (w.st == sValue || w.st == sAfter) {
		return
	}
	msg := "the text ended inside a value"
	if complete {
		msg = "the body ended inside a JSON value"
	}
	if w.openOrPending() {
		w.resolveAll()
		w.rep.add(formats.RedactUnparsed, "", msg, 0, 0)
	} else {
		for i := len(w.stack) - 1; i >= 0; i-- {
			w.report(&w.stack[i])
		}
	}
	w.stack = w.stack[:0]
	w.open = nil
}

func (w *jsonWalker) openOrPending() bool {
	return w.pending > 0 || w.open != nil && w.open.d != dKeep
}

// report flushes an owner's redactions to the Report.
func (w *jsonWalker) report(fr *jframe) {
	if len(fr.done) == 0 {
		return
	}
	kind := fr.kind
	if !fr.hasKind {
		kind = ""
	}
	obj := objectName(kind, fr.ns, fr.name)
	if !fr.hasKind && fr.assume {
		obj = "patch to a Secret"
	}
	for _, d := range fr.done {
		w.rep.add(d.why.reason(), obj, d.why.field(d.field), 1, d.n)
	}
	fr.done = nil
}

// lex runs the state machine over the held bytes from pos.
func (w *jsonWalker) lex() {
	b := w.buf
	i := int(w.pos - w.base)
	for i < len(b) && !w.failed {
		switch w.st {
		case sString:
			i = w.lexString(b, i)
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
			w.valueStart(c)
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
	case '}', ']', ',', ':':
		w.syntax(c, "value")
	default:
		w.st = sLiteral
	}
}

// child builds the frame of a container starting as the value of the
// current member (or element) of the top frame.
func (w *jsonWalker) child(obj bool) jframe {
	fr := jframe{obj: obj, owner: -1}
	n := len(w.stack)
	if n == 0 {
		switch {
		case w.assume && obj:
			fr.assume = true
		case w.assume:
			fr.ctx = cPatchArray
		}
		return fr
	}
	pi := n - 1
	p := &w.stack[pi]
	switch p.ctx {
	case cPatch:
		fr.ctx, fr.owner, fr.dwhy = p.ctx, p.owner, p.dwhy
		return fr
	case cData:
		// A Secret's data values are strings: a container here is not
		// one. It is redacted whole if its owner is known to be a Secret
		// (fail closed); else it is an object in its own right (the
		// embedded object of a ControllerRevision, say), and the data
		// frame is its owner.
		if o := &w.stack[p.owner]; o.hasKind && o.kind == "Secret" {
			fr.ctx, fr.owner, fr.dwhy = cData, p.owner, p.dwhy
			return fr
		}
	case cItems:
		if obj {
			fr.item, fr.owner = true, p.owner
		}
		return fr
	case cPatchArray:
		if obj {
			fr.ctx = cPatchOp
		}
		return fr
	}
	if !p.obj {
		return fr
	}
	switch p.ctx {
	case cData:
		if p.owner >= 0 && w.stack[p.owner].hasKind && w.stack[p.owner].kind == "Secret" {
			return fr
		}
	case cPatchOp:
		if p.key == kValue {
			fr.ctx = cPatch
		}
		return fr
	case cMetadata:
		if p.key == kAnnotations && obj {
			fr.ctx, fr.owner = cAnnotations, p.owner
		}
		return fr
	case cAnnotations:
		return fr
	}
	switch p.key {
	case kData:
		fr.ctx, fr.owner, fr.dwhy = cData, pi, whyData
	case kStringData:
		fr.ctx, fr.owner, fr.dwhy = cData, pi, whyStringData
	case kMetadata:
		if obj {
			fr.ctx, fr.owner = cMetadata, pi
		}
	case kStatus:
		if obj {
			fr.ctx, fr.owner = cStatus, pi
		}
	case kSpec:
		if obj {
			fr.ctx, fr.owner = cSpec, pi
		}
	case kItems:
		if !obj {
			fr.ctx, fr.owner = cItems, pi
		}
	}
	return fr
}

// stringValue begins a string value (the opening quote is at w.pos): it
// may be captured (kind, name) or be a candidate.
func (w *jsonWalker) stringValue() {
	w.cp = capNone
	w.open = nil
	n := len(w.stack)
	if n == 0 {
		if w.assume {
			w.candidate(whyPatch, -1, "")
		}
		return
	}
	pi := n - 1
	p := &w.stack[pi]
	switch p.ctx {
	case cData:
		w.candidate(p.dwhy, p.owner, dataField(p))
		if !p.obj || p.owner >= 0 && w.stack[p.owner].hasKind && w.stack[p.owner].kind == "Secret" {
			return
		}
		// The data object may be an object in its own right (see child):
		// its kind is read too.
		if p.key == kKind {
			w.cp = capKind
			w.cbuf = w.cbuf[:0]
			w.cover = false
		}
		return
	case cPatch:
		w.candidate(whyPatch, -1, "")
		return
	case cPatchArray, cItems:
		return
	}
	if !p.obj {
		return
	}
	switch p.ctx {
	case cPatchOp:
		if p.key == kValue {
			w.candidate(whyPatch, -1, "")
		}
		return
	case cMetadata:
		switch p.key {
		case kName:
			w.cp = capName
		case kNamespace:
			w.cp = capNamespace
		}
		if w.cp != capNone {
			w.cbuf = w.cbuf[:0]
			w.cover = false
		}
		return
	case cAnnotations:
		if p.key == kLastApplied {
			w.candidate(whyLastApplied, p.owner, "")
		}
		return
	case cStatus:
		if p.key == kToken {
			w.candidate(whyToken, p.owner, "")
			return
		}
	case cSpec:
		if p.key == kToken {
			w.candidate(whyReviewToken, p.owner, "")
			return
		}
	}
	switch p.key {
	case kKind:
		w.cp = capKind
		w.cbuf = w.cbuf[:0]
		w.cover = false
	case kData:
		w.candidate(whyData, pi, "")
	case kStringData:
		w.candidate(whyStringData, pi, "")
	}
}

// dataField is the member name under data/stringData of a cData frame.
func dataField(p *jframe) string {
	if p.obj {
		return p.ktext
	}
	return "[]"
}

// candidate opens a candidate string value of owner oi (-1: none, always
// redacted) starting after the quote at w.pos. A value of an owner waits
// for the owner's end, decided then by its kind: the last of its "kind"
// members, as the apiserver's decoder takes it (a "kind" after the values
// may change what they are).
func (w *jsonWalker) candidate(y why, oi int, field string) {
	d := dRedact
	if oi >= 0 {
		d = dPending
	}
	w.open = &cand{start: w.pos + 1, end: -1, why: y, b64: y == whyData, d: d, field: field, owner: oi}
	w.streamFill = false
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
				return len(b)
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
				return len(b)
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

// stringEnd handles the closing quote at w.pos.
func (w *jsonWalker) stringEnd() {
	cp := w.cp
	w.cp = capNone
	if cp == capKey {
		top := &w.stack[len(w.stack)-1]
		switch {
		case w.cover:
			top.key = kOther
		case bytes.IndexByte(w.cbuf, '\\') < 0:
			top.key = keyOf(string(w.cbuf))
		default:
			top.key = keyOf(w.captured())
		}
		if top.ctx == cData {
			top.ktext = clipField(w.captured())
		}
		w.st = sColon
		return
	}
	w.st = sAfter
	if c := w.open; c != nil {
		w.open = nil
		c.end = w.pos
		switch {
		case w.streamFill:
			w.streamFill = false
			w.fillOpen2(c)
		case c.d == dPending:
			w.stack[c.owner].cands = append(w.stack[c.owner].cands, *c)
			w.addPending(1, c.start)
		default:
			w.settle(c, c.d)
		}
		if cp == capNone {
			return
		}
		// A string both waits and is read: the kind of an object embedded
		// in a data member (a ControllerRevision's).
	}
	if len(w.stack) == 0 {
		return
	}
	top := &w.stack[len(w.stack)-1]
	switch cp {
	case capKind:
		k := w.captured()
		if w.cover {
			k = "(long)"
		}
		w.setKind(len(w.stack)-1, k)
	case capName, capNamespace:
		if top.ctx == cMetadata && top.owner >= 0 {
			o := &w.stack[top.owner]
			if cp == capName {
				o.name = w.captured()
			} else {
				o.ns = w.captured()
			}
		}
	}
}

// fillOpen2 finishes a candidate replaced as it arrived.
func (w *jsonWalker) fillOpen2(c *cand) {
	from := max(c.start, w.base)
	if from < c.end {
		w.writable()
		fill(w.buf[from-w.base:c.end-w.base], unparsedFill)
	}
	w.noteDone(c, c.end-c.start)
}

// setKind records the kind of object oi and settles what its items
// forwarded to it. Its own values wait for its end (see candidate): a
// repeated "kind" replaces the first, as encoding/json keeps the last of
// repeated members — unless items were already decided by the first (a
// list's), which cannot be taken back: then it fails closed.
func (w *jsonWalker) setKind(oi int, kind string) {
	o := &w.stack[oi]
	if o.hasKind {
		if o.kind != kind {
			if o.itemsDecided {
				w.fail(w.pos, fmt.Sprintf("json at byte %d: a list with two kinds (%q, %q) after items decided by the first", w.pos, clipField(o.kind), clipField(kind)))
				return
			}
			o.kind = kind
			if oi == 0 {
				w.rootKind = kind
			}
		}
		return
	}
	o.hasKind, o.kind = true, kind
	if oi == 0 {
		w.rootKind = kind
	}
	icands := o.icands
	o.icands = nil
	w.dropPending(len(icands))
	ik := itemKind(kind)
	for i := range icands {
		icands[i].okind = ik
		w.settle(&icands[i], decide(icands[i].why, ik))
	}
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

// pop closes the top container (its closing byte is at w.pos).
func (w *jsonWalker) pop() {
	n := len(w.stack) - 1
	fr := &w.stack[n]
	if fr.obj && fr.hasKind && len(fr.cands) > 0 {
		w.dropPending(len(fr.cands))
		for i := range fr.cands {
			w.settle(&fr.cands[i], decide(fr.cands[i].why, fr.kind))
		}
		fr.cands = fr.cands[:0]
	}
	if fr.obj && !fr.hasKind && (len(fr.cands) > 0 || len(fr.icands) > 0) {
		w.dropPending(len(fr.cands) + len(fr.icands))
		switch {
		case fr.assume:
			for i := range fr.cands {
				w.settle(&fr.cands[i], decide(fr.cands[i].why, "Secret"))
			}
			for i := range fr.icands {
				w.redact(&fr.icands[i])
			}
		case fr.item && fr.owner >= 0 && fr.owner < n:
			l := &w.stack[fr.owner]
			all := append(fr.cands, fr.icands...)
			for i := range all {
				if !all[i].forwarded {
					all[i].forwarded, all[i].ons, all[i].oname = true, fr.ns, fr.name
				}
				all[i].owner = -1
			}
			if l.hasKind {
				l.itemsDecided = true
				ik := itemKind(l.kind)
				for i := range all {
					all[i].okind = ik
					w.settle(&all[i], decide(all[i].why, ik))
				}
			} else {
				l.icands = append(l.icands, all...)
				w.addPending(len(all), all[0].start)
			}
		default:
			for i := range fr.cands {
				w.settle(&fr.cands[i], decide(fr.cands[i].why, ""))
			}
			for i := range fr.icands {
				w.settle(&fr.icands[i], decide(fr.icands[i].why, ""))
			}
		}
		fr.cands, fr.icands = fr.cands[:0], nil
	}
	w.report(fr)
	w.stack = w.stack[:n]
	w.st = sAfter
}
