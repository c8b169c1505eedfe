package redact

import (
	"bytes"
	"io"
	"mime"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// MaxHoldWhole bounds a body held whole before it is redacted: a
	// protobuf Secret, SecretList, List, PartialObjectMetadataList,
	// ControllerRevision(List), TokenRequest or TokenReview (whose
	// envelope names the kind first), the part of a protobuf body from a
	// nested object on, a CBOR body (one data item, walked whole), and
	// YAML, which this package does not parse. A body larger than this is
	// replaced (fail closed).
	MaxHoldWhole = 64 << 20
	// maxSniff bounds the whitespace read before a body's first byte
	// decides how it is parsed.
	maxSniff = 64 << 10
)

// BodyOptions describe a body handed to NewBody.
type BodyOptions struct {
	// ContentType is the body's Content-Type ("" if none or unknown).
	ContentType string
	// AssumeSecret: the body was sent to a Secret endpoint (a request to
	// a path whose resource is secrets, see SecretPath): an object without
	// a kind is a Secret (a patch), a JSON array is a JSON patch whose
	// values are all redacted, and a body in a form the package cannot
	// parse is replaced whole.
	AssumeSecret bool
	// Midstream: the body's beginning was not captured. Its bytes cannot
	// be parsed, so all of them are replaced.
	Midstream bool
	// SecretPath: the body answers (or is sent to) a request whose path
	// addresses Secrets (SecretPath). A body of such an exchange is judged
	// whatever its Content-Type says: JSON served as text is read as JSON,
	// and a text or untyped body that is not JSON (YAML, say) is held whole
	// and replaced if it may hold a Secret, as a YAML body is.
	SecretPath bool
}

type bmode uint8

const (
	mSniff   bmode = iota
	mPass          // not an object: stored as is
	mReplace       // every byte replaced
	mJSON          // the streaming JSON walker
	mProto         // protobuf
	mWhole         // held whole (YAML, CBOR, JSON media that is not JSON)
)

// Body redacts one body, decoded (no content or transfer encoding), fed
// in pieces of any size. It decides by content: how the body begins (a
// JSON value, the protobuf envelope) picks the parser, and what the parser
// finds (kinds, members) picks the values to replace; the Content-Type
// only tells YAML, CBOR and text apart. Every byte handed to Write comes
// out of emit exactly once, in order, and the same number of bytes comes
// out as went in; bytes may be held back until what they are is known.
// A Body is not safe for concurrent use.
type Body struct {
	s    *Secrets
	rep  *Report
	o    BodyOptions
	mt   string
	mode bmode

	sniff   []byte
	sniffed int // sniff[:sniffed] is whitespace
	jw      *jsonWalker
	pb      *protoBody
	held    []byte // mWhole
	in      int64  // bytes written
	changed bool
	gapped  bool
	scratch []byte
}

// NewBody returns a Body that adds what it replaces to rep.
func (s *Secrets) NewBody(o BodyOptions, rep *Report) *Body {
	mt, _, _ := mime.ParseMediaType(o.ContentType)
	b := &Body{s: s, rep: rep, o: o, mt: strings.ToLower(mt)}
	if o.Midstream {
		b.mode = mReplace
		rep.fail(0, 0, "the body's beginning was not captured")
	}
	return b
}

// Changed reports whether any byte emitted so far differs from the input.
func (b *Body) Changed() bool {
	return b.changed || b.jw != nil && b.jw.changed || b.pb != nil && b.pb.changed
}

// Write redacts p; emit is called with the bytes that can be released
// (valid only during the call).
func (b *Body) Write(p []byte, emit func([]byte)) {
	if len(p) == 0 {
		return
	}
	b.in += int64(len(p))
	switch b.mode {
	case mSniff:
		b.sniff = append(b.sniff, p...)
		if !b.decide(false) {
			return
		}
		p, b.sniff = b.sniff, nil
		b.Write2(p, emit)
	default:
		b.Write2(p, emit)
	}
}

// Write2 is Write once the mode is known.
func (b *Body) Write2(p []byte, emit func([]byte)) {
	switch b.mode {
	case mPass:
		emit(p)
	case mReplace:
		b.replaced(p, emit)
	case mJSON:
		b.jw.write(p)
		if out := b.jw.take(); len(out) > 0 {
			emit(out)
		}
	case mProto:
		b.pb.write(p, emit)
	case mWhole:
		if len(b.held)+len(p) > MaxHoldWhole {
			b.rep.fail(0, 0, "a body larger than the limit for one held whole")
			b.held = append(b.held, p...)
			b.replaced(b.held, emit)
			b.held = nil
			b.mode = mReplace
			return
		}
		b.held = append(b.held, p...)
	}
}

// replaced emits len(p) filler bytes.
func (b *Body) replaced(p []byte, emit func([]byte)) {
	b.changed = true
	b.rep.growFailure(int64(len(p)))
	for len(p) > 0 {
		n := min(len(p), 64<<10)
		if len(b.scratch) < n {
			b.scratch = make([]byte, 64<<10)
			fill(b.scratch, unparsedFill)
		}
		emit(b.scratch[:n])
		p = p[n:]
	}
}

// decide picks the mode from the sniffed bytes; final: no more bytes will
// come. It reports whether the mode is known.
func (b *Body) decide(final bool) bool {
	i := b.sniffed
	for i < len(b.sniff) && (b.sniff[i] == ' ' || b.sniff[i] == '\n' || b.sniff[i] == '\r' || b.sniff[i] == '\t') {
		i++
	}
	b.sniffed = i
	if i == len(b.sniff) && !final && len(b.sniff) < maxSniff {
		return false
	}
	if i == 0 && len(b.sniff) < len(protoMagic) && bytes.HasPrefix(protoMagic, b.sniff) && !final {
		return false
	}
	text := strings.HasPrefix(b.mt, "text/")
	secretPath := b.o.AssumeSecret || b.o.SecretPath
	switch {
	case b.form():
		// No Kubernetes API takes a form (kube-apiserver answers 415),
		// and a form is how credentials are posted: held whole, judged.
		b.mode = mWhole
	case bytes.HasPrefix(b.sniff, protoMagic):
		b.mode = mProto
		b.pb = &protoBody{s: b.s, rep: b.rep}
	case i < len(b.sniff) && (b.sniff[i] == '{' || b.sniff[i] == '[') && (!text || secretPath):
		b.mode = mJSON
		b.jw = newJSONWalker(b.s, b.rep, b.o.AssumeSecret)
	case text && !secretPath:
		// Text: a Secret's JSON served as text/plain (through a
		// service's or a pod's proxy, in a log) is judged as JSON; other
		// lines are text (see jsonWalker.text).
		b.mode = mJSON
		b.jw = newJSONWalker(b.s, b.rep, false)
		b.jw.text = true
	case i == len(b.sniff) && final && !b.o.AssumeSecret:
		b.mode = mPass // only whitespace
	case i == len(b.sniff) && !text:
		// maxSniff bytes of whitespace and more to come: the walker
		// reads whatever follows (and fails closed on what is not JSON).
		b.mode = mJSON
		b.jw = newJSONWalker(b.s, b.rep, b.o.AssumeSecret)
	case b.structured(), b.o.SecretPath && (text || b.mt == ""):
		b.mode = mWhole
	case b.o.AssumeSecret:
		b.mode = mReplace
		b.rep.fail(0, 0, "a body sent to a Secret endpoint in a form that cannot be parsed")
	default:
		b.mode = mPass
	}
	return true
}

// structured reports whether the media type is one that may carry an
// object the package does not parse (YAML, CBOR, JSON that is not JSON).
// A body with no Content-Type that is neither JSON nor protobuf is not a
// Kubernetes object.
func (b *Body) structured() bool {
	mt := b.mt
	switch {
	case strings.HasSuffix(mt, "json"), strings.HasSuffix(mt, "yaml"), strings.Contains(mt, "cbor"):
		return true
	}
	return false
}

// Gap tells the Body that n bytes were lost here: what follows cannot be
// parsed in context, so values still waiting are replaced and, for a
// parsed body, so is everything after the gap.
func (b *Body) Gap(n int64, emit func([]byte)) {
	if b.mode == mSniff {
		// What the body is was not seen: nothing after the gap can be
		// trusted.
		b.mode = mReplace
		b.rep.fail(0, 0, "bytes were lost before the body's kind was seen")
		p := b.sniff
		b.sniff = nil
		b.Write2(p, emit)
	}
	b.gapped = true
	switch b.mode {
	case mJSON:
		b.jw.gap()
		if out := b.jw.take(); len(out) > 0 {
			emit(out)
		}
	case mProto:
		b.pb.gap(emit)
	case mWhole:
		b.rep.fail(0, 0, "bytes were lost in a body held whole")
		b.replaced(b.held, emit)
		b.held = nil
		b.mode = mReplace
	}
}

// Close ends the body; complete says it ended where its framing said.
// Everything held is emitted.
func (b *Body) Close(complete bool, emit func([]byte)) {
	if b.mode == mSniff {
		if len(b.sniff) == 0 {
			return
		}
		b.decide(true)
		p := b.sniff
		b.sniff = nil
		b.Write2(p, emit)
	}
	switch b.mode {
	case mJSON:
		b.jw.end(complete)
		b.jw.pos = b.jw.base + int64(len(b.jw.buf))
		if out := b.jw.take(); len(out) > 0 {
			emit(out)
		}
	case mProto:
		b.pb.close(emit)
	case mWhole:
		h := b.held
		b.held = nil
		if complete && b.cbor() {
			out, changed := b.s.cborWhole(h, b.o.AssumeSecret, b.rep)
			b.changed = b.changed || changed
			if len(out) > 0 {
				emit(out)
			}
			return
		}
		if b.o.AssumeSecret || !complete || b.mayHold(h) {
			b.rep.fail(0, 0, "a "+b.what()+" body that may hold a Secret cannot be parsed")
			b.replaced(h, emit)
			return
		}
		if len(h) > 0 {
			emit(h)
		}
	}
}

// form reports a form-encoded body (application/x-www-form-urlencoded,
// multipart/form-data).
func (b *Body) form() bool {
	return b.mt == "application/x-www-form-urlencoded" || b.mt == "multipart/form-data"
}

// cbor reports a CBOR body (application/cbor, or a +cbor suffix).
func (b *Body) cbor() bool {
	return b.mt == "application/cbor" || strings.HasSuffix(b.mt, "+cbor")
}

func (b *Body) what() string {
	switch {
	case strings.HasSuffix(b.mt, "yaml"):
		return "YAML"
	case strings.Contains(b.mt, "cbor"):
		return "CBOR"
	case b.form():
		return "form-encoded"
	case b.mt == "":
		return "untyped"
	}
	return b.mt
}

// mayHold reports whether a body the package cannot parse may hold a
// credential: it mentions a secret or a token in any case, or holds what
// could hide such a word from that check. CBOR: an escape or an
// indefinite-length string. A form, always: a form is how passwords are
// posted, under any field name, and no Kubernetes API takes one (the
// apiserver answers 415), so nothing is lost. YAML, text and untyped
// bodies, as a YAML decoder reads them: a backslash (an escape in a
// double-quoted scalar: "\x53ecret"), a tag ("!!binary U2VjcmV0" is
// "Secret", as a key or a value; any tag may resolve to a string), or
// bytes that are not plain UTF-8 text (a NUL or a byte-order mark: UTF-16
// spells a word with NULs between its letters).
func (b *Body) mayHold(h []byte) bool {
	l := bytes.ToLower(h)
	if bytes.Contains(l, []byte("secret")) || bytes.Contains(l, []byte("token")) {
		return true
	}
	switch {
	case strings.Contains(b.mt, "cbor"):
		return bytes.IndexByte(h, 0x7f) >= 0 || bytes.IndexByte(h, 0x5f) >= 0
	case b.form():
		return true
	}
	return bytes.IndexByte(h, '\\') >= 0 || yamlTag(h) || bytes.IndexByte(h, 0) >= 0 ||
		bytes.HasPrefix(h, []byte{0xef, 0xbb, 0xbf}) || bytes.HasPrefix(h, []byte{0xfe, 0xff}) || bytes.HasPrefix(h, []byte{0xff, 0xfe})
}

// yamlTag reports whether h holds a YAML tag: a '!' that begins a node
// (YAML 1.1 §6.9.1, "c-tag"), at the start of a line or after a space, a
// tab or a flow indicator.
func yamlTag(h []byte) bool {
	for i := 0; ; {
		k := bytes.IndexByte(h[i:], '!')
		if k < 0 {
			return false
		}
		j := i + k
		if j == 0 {
			return true
		}
		switch h[j-1] {
		case ' ', '\t', '\n', '\r', '[', '{', ',', '-', ':', '?':
			return true
		}
		i = j + 1
	}
}

// protoBody is the protobuf path of a Body. The envelope's kind comes
// first: kinds that hold credentials or objects (see special) are held
// whole and walked at the end; other kinds are typed messages that can
// hold a Secret only inside a nested envelope or quoted in a string, so
// each top-level field of their raw message is held until whole, walked
// (proto_fields.go) and released; where the fields do not parse the rest
// streams until a nested envelope's magic appears, and that is held and
// walked.
type protoBody struct {
	s       *Secrets
	rep     *Report
	st      pstate
	held    []byte
	heldOff int64 // absolute offset of held[0]
	pos     int64 // bytes written
	tail    []byte
	changed bool
	scratch []byte
	// pAnnot: the annotation value field's tag and length as they arrive,
	// and the value's length once they are known (-1 before).
	annHdr  []byte
	annNeed int
	// pFields (proto_fields.go): raw's bytes still to come, the field
	// being read (its tag and length; its value in held, fneed bytes of
	// it, -1 while the head is read) and where it began.
	rawLeft int64
	fhdr    []byte
	fneed   int
	fieldAt int64
}

type pstate uint8

const (
	pHeader   pstate = iota // reading the root envelope's header
	pHoldAll                // a special kind: all of it held
	pPass                   // a typed message: streamed, scanning for a nested envelope
	pHoldRest               // from a nested envelope on: held
	pReplace                // failed closed: every byte replaced
	pAnnot                  // a last-applied-configuration annotation's value: held until whole, judged, then pPass again
	pFields                 // a typed message's raw: each top-level field held until whole, walked, released
)

func (p *protoBody) write(b []byte, emit func([]byte)) {
	p.pos += int64(len(b))
	switch p.st {
	case pHeader:
		p.held = append(p.held, b...)
		kind, _, _, _, ok := envelopeHeader(p.held)
		switch {
		case ok && !special(kind):
			h := p.held
			p.held = nil
			_, rs, n, _ := envelopeRaw(h)
			emit(h[:rs]) // the magic, typeMeta, raw's tag and length
			p.startFields(h[rs:], p.heldOff+int64(rs), n, emit)
		case ok, len(p.held) > maxEnvelopeHeader:
			p.st = pHoldAll
		}
	case pHoldAll, pHoldRest:
		if len(p.held)+len(b) > MaxHoldWhole {
			p.rep.fail(p.heldOff, 0, "a protobuf object larger than the limit for one held whole")
			p.st = pReplace
			p.replace(p.held, emit)
			p.held = nil
			p.replace(b, emit)
			return
		}
		p.held = append(p.held, b...)
	case pPass:
		p.pass(b, p.pos-int64(len(b)), emit)
	case pReplace:
		p.replace(b, emit)
	case pAnnot:
		p.annot(b, emit)
	case pFields:
		p.fields(b, p.pos-int64(len(b)), emit)
	}
}

// pass streams b (at absolute offset off) until a nested envelope begins,
// or the key of a last-applied-configuration annotation (whose value a
// typed object's ObjectMeta carries right after it: see annot).
func (p *protoBody) pass(b []byte, off int64, emit func([]byte)) {
	d := append(p.tail, b...)
	doff := off - int64(len(p.tail))
	k := bytes.Index(d, protoMagic)
	if a := bytes.Index(d, lastAppliedKey); a >= 0 && (k < 0 || a < k) {
		end := a + len(lastAppliedKey)
		emit(d[:end])
		rest := bytes.Clone(d[end:]) // d may share p.tail's storage
		p.tail = p.tail[:0]
		p.st, p.annHdr, p.annNeed = pAnnot, p.annHdr[:0], -1
		p.annot(rest, emit)
		return
	}
	if k >= 0 {
		if k > 0 {
			emit(d[:k])
		}
		p.held = append([]byte(nil), d[k:]...)
		p.heldOff = doff + int64(k)
		p.tail = p.tail[:0]
		p.st = pHoldRest
		if len(p.held) > MaxHoldWhole {
			p.rep.fail(p.heldOff, 0, "a protobuf object larger than the limit for one held whole")
			p.st = pReplace
			p.replace(p.held, emit)
			p.held = nil
		}
		return
	}
	keep := min(len(d), len(lastAppliedKey)-1) // what may begin a magic or a key cut by the piece's end
	if n := len(d) - keep; n > 0 {
		emit(d[:n])
	}
	p.tail = append(p.tail[:0:0], d[len(d)-keep:]...)
}

// maxFieldHead bounds a field's tag and length: a one-byte tag and a
// varint of at most 10 bytes.
const maxFieldHead = 11

// annot reads the value field after a last-applied-configuration key in a
// streamed typed object: its tag and length, then the value, held until
// whole (at most MaxHoldWhole), judged as the JSON walker judges the
// annotation of any kind (objectHoldsSecret), replaced if it is or holds
// a Secret, and emitted; streaming then goes on. What is not a value
// field is emitted as it is.
func (p *protoBody) annot(b []byte, emit func([]byte)) {
	for len(b) > 0 {
		if p.annNeed < 0 {
			p.annHdr = append(p.annHdr, b[0])
			b = b[1:]
			num, typ, n := protowire.ConsumeTag(p.annHdr)
			var l uint64
			m := -1
			if n > 0 {
				l, m = protowire.ConsumeVarint(p.annHdr[n:])
			}
			switch {
			case (n < 0 || m < 0) && len(p.annHdr) < maxFieldHead && (n < 0 && protowire.ParseError(n) == io.ErrUnexpectedEOF || n > 0 && num == fMapValue && typ == protowire.BytesType):
				continue // more of the head to come
			case n < 0 || m < 0 || num != fMapValue || typ != protowire.BytesType:
				p.annotEnd(b, emit) // not the entry's value: as it is
				return
			case l > MaxHoldWhole:
				p.rep.fail(p.pos-int64(len(b)), 0, "an annotation larger than the limit for one held whole")
				p.st = pReplace
				p.replace(p.annHdr, emit)
				p.replace(b, emit)
				return
			}
			p.annNeed = int(l)
			p.held = p.held[:0]
			continue
		}
		k := min(len(b), p.annNeed-len(p.held))
		p.held = append(p.held, b[:k]...)
		b = b[k:]
		if len(p.held) == p.annNeed {
			if v := p.held; objectHoldsSecret(v) {
				p.s.replace(v, false)
				p.changed = true
				p.rep.add(whyLastApplied.reason(), "an object", whyLastApplied.field(""), 1, int64(len(v)))
			}
			p.annotEnd(b, emit)
			return
		}
	}
}

// annotEnd emits what annot holds and streams the rest b again.
func (p *protoBody) annotEnd(b []byte, emit func([]byte)) {
	if len(p.annHdr) > 0 {
		emit(p.annHdr)
	}
	if len(p.held) > 0 {
		emit(p.held)
	}
	p.annHdr, p.held, p.annNeed = p.annHdr[:0], nil, -1
	p.st = pPass
	if len(b) > 0 {
		p.pass(b, p.pos-int64(len(b)), emit)
	}
}

func (p *protoBody) replace(b []byte, emit func([]byte)) {
	if len(b) == 0 {
		return
	}
	p.changed = true
	p.rep.growFailure(int64(len(b)))
	if len(p.scratch) < 64<<10 {
		p.scratch = make([]byte, 64<<10)
		fill(p.scratch, unparsedFill)
	}
	for len(b) > 0 {
		n := min(len(b), len(p.scratch))
		emit(p.scratch[:n])
		b = b[n:]
	}
}

// walkHeld redacts the held bytes and emits them.
func (p *protoBody) walkHeld(emit func([]byte)) {
	h := p.held
	p.held = nil
	if len(h) == 0 {
		return
	}
	var out []byte
	var changed bool
	var rep Report
	switch p.st {
	case pHoldRest:
		w := protoWalker{s: p.s}
		w.scan(h, 0, 0, 0)
		out, changed = w.apply(p.s, h, &rep)
	default:
		out, changed = p.s.protoWhole(h, &rep)
	}
	for i := range rep.failures {
		rep.failures[i].Offset += p.heldOff
	}
	p.rep.Merge(&rep)
	p.changed = p.changed || changed
	emit(out)
}

func (p *protoBody) gap(emit func([]byte)) {
	switch p.st {
	case pHeader, pHoldAll, pHoldRest:
		p.rep.fail(p.heldOff, 0, "bytes were lost in a protobuf object")
		p.replace(p.held, emit)
		p.held = nil
		p.st = pReplace
	case pPass:
		if len(p.tail) > 0 {
			emit(p.tail)
			p.tail = p.tail[:0]
		}
	case pAnnot:
		p.annotCut(emit, "bytes were lost in an annotation")
	case pFields:
		// The fields' framing is lost: what follows streams (nested
		// envelopes and annotations are still found).
		p.fieldsCut(emit, "bytes were lost in a protobuf field")
		p.st = pPass
	}
}

// annotCut ends an annotation that will not be whole: what was held of
// it is replaced (fail closed), and streaming goes on.
func (p *protoBody) annotCut(emit func([]byte), why string) {
	p.rep.fail(p.pos, 0, why)
	p.replace(p.annHdr, emit)
	p.replace(p.held, emit)
	p.annHdr, p.held, p.annNeed = p.annHdr[:0], nil, -1
	p.st = pPass
}

func (p *protoBody) close(emit func([]byte)) {
	switch p.st {
	case pHeader:
		h := p.held
		p.held = nil
		if mayHoldProto(h) {
			p.rep.fail(0, 0, "a protobuf body too short to parse")
			p.replace(h, emit)
			return
		}
		if len(h) > 0 {
			emit(h)
		}
	case pHoldAll, pHoldRest:
		p.walkHeld(emit)
	case pPass:
		if len(p.tail) > 0 {
			emit(p.tail)
			p.tail = p.tail[:0]
		}
	case pAnnot:
		p.annotCut(emit, "the body ended inside an annotation")
	case pFields:
		p.fieldsCut(emit, "the body ended inside a protobuf field")
	}
}
