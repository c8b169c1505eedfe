package redact

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/wtrace/wtrace/frame"
	"google.golang.org/protobuf/encoding/protowire"
)

// Protobuf (k8s.io/apimachinery runtime and meta/v1 generated.proto,
// k8s.io/api core/v1, authentication/v1, apps/v1 generated.proto).

// protoMagic is frame.ProtobufMagic as bytes.
var protoMagic = []byte(frame.ProtobufMagic)

const (
	fUnknownTypeMeta   = 1 // runtime.Unknown.typeMeta
	fUnknownRaw        = 2 // runtime.Unknown.raw
	fUnknownCType      = 4 // runtime.Unknown.contentType
	fTypeMetaKind      = 2 // runtime.TypeMeta.kind
	fRawExtensionRaw   = 1 // runtime.RawExtension.raw
	fWatchEventObject  = 2 // metav1.WatchEvent.object
	fMetadata          = 1 // metadata of every object (ObjectMeta) and list (ListMeta)
	fListItems         = 2 // items of every list (SecretList, List, PartialObjectMetadataList, ControllerRevisionList)
	fSecretData        = 2 // Secret.data map<string, bytes>
	fSecretStringData  = 4 // Secret.stringData map<string, string>
	fTokenStatus       = 3 // TokenRequest.status
	fTokenStatusToken  = 1 // TokenRequestStatus.token
	fReviewSpec        = 2 // TokenReview.spec
	fReviewSpecToken   = 1 // TokenReviewSpec.token
	fRevisionData      = 2 // ControllerRevision.data (RawExtension)
	fObjectMetaName    = 1
	fObjectMetaNS      = 3
	fObjectMetaAnnot   = 12
	fMapKey            = 1
	fMapValue          = 2
	maxProtoDepth      = 64 // envelopes nested in envelopes; Kubernetes nests two or three
	minEnvelopeHeader  = 8
	maxEnvelopeHeader  = 4 << 10 // magic + typeMeta + raw's tag and length
	protoKindSecret    = "Secret"
	protoKindPOM       = "PartialObjectMetadata"
	protoKindList      = "List"
	protoKindRevision  = "ControllerRevision"
	protoKindToken     = "TokenRequest"
	protoKindReview    = "TokenReview"
	protoKindWatchEvnt = "WatchEvent"
)

// special reports whether envelopes of kind hold credentials or objects
// that may (and so are parsed); other kinds are Kubernetes typed messages
// that cannot hold a Secret except inside a nested envelope.
func special(kind string) bool {
	switch kind {
	case protoKindSecret, "SecretList", protoKindPOM, "PartialObjectMetadataList", protoKindList,
		protoKindRevision, "ControllerRevisionList", protoKindToken, protoKindReview, "Table", protoKindWatchEvnt:
		return true
	}
	return false
}

// pspan is a region of a protobuf buffer to replace.
type pspan struct {
	start, end int
	why        why
	field      string
	object     string
	unparsed   string // not "": replaced whole because it could not be parsed
}

// protoWalker finds credentials in a complete protobuf buffer.
type protoWalker struct {
	s     *Secrets
	spans []pspan
	jsons []jsonPatch // redactions of JSON nested in protobuf
}

// protoWalkers holds walkers for reuse: their spans keep their storage
// from one event to the next.
var protoWalkers sync.Pool

// pooledProtoWalker returns a walker from the pool (or a new one) for s.
func pooledProtoWalker(s *Secrets) *protoWalker {
	p, _ := protoWalkers.Get().(*protoWalker)
	if p == nil {
		p = &protoWalker{}
	}
	p.s = s
	return p
}

// maxPooledSpans bounds the spans a recycled walker keeps.
const maxPooledSpans = 1024

// recycle resets p and returns it to the pool; p must not be used after.
func (p *protoWalker) recycle() {
	if cap(p.spans) > maxPooledSpans {
		return
	}
	clear(p.spans)
	*p = protoWalker{spans: p.spans[:0]}
	protoWalkers.Put(p)
}

// jsonPatch is a JSON document nested at off whose redacted form is out.
type jsonPatch struct {
	off int
	out []byte
	rep Report
}

// envelopeHeader parses the envelope at b[0:] ("k8s\x00", typeMeta,
// raw's tag and length). It returns the kind and raw's span; truncated
// says raw extends past b (rawEnd is then len(b)); ok is false when b
// does not hold a whole header.
func envelopeHeader(b []byte) (kind string, rawStart, rawEnd int, truncated, ok bool) {
	kind, rawStart, l, ok := envelopeRaw(b)
	switch {
	case !ok:
		return "", 0, 0, false, false
	case l > uint64(len(b)-rawStart):
		return kind, rawStart, len(b), true, true
	}
	return kind, rawStart, rawStart + int(l), false, true
}

// envelopeRaw parses the envelope header at b[0:] as envelopeHeader does
// and returns raw's declared length.
func envelopeRaw(b []byte) (kind string, rawStart int, rawLen uint64, ok bool) {
	if !bytes.HasPrefix(b, protoMagic) {
		return "", 0, 0, false
	}
	i := len(protoMagic)
	for i < len(b) {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 || typ != protowire.BytesType {
			return "", 0, 0, false
		}
		l, m := protowire.ConsumeVarint(b[i+n:])
		if m < 0 {
			return "", 0, 0, false
		}
		vs := i + n + m
		switch num {
		case fUnknownTypeMeta:
			if l > uint64(len(b)-vs) {
				return "", 0, 0, false
			}
			forFields(b[:vs+int(l)], vs, func(f protowire.Number, s, e int) {
				if f == fTypeMetaKind {
					kind = string(b[s:e])
				}
			})
			i = vs + int(l)
		case fUnknownRaw:
			return kind, vs, l, true
		default:
			return "", 0, 0, false
		}
	}
	return "", 0, 0, false
}

// envelope walks the envelope at b[0:] (absolute offset off). It reports
// false if b is not one.
func (p *protoWalker) envelope(b []byte, off, depth int) bool {
	kind, rs, re, truncated, ok := envelopeHeader(b)
	if !ok {
		return false
	}
	if truncated {
		if special(kind) || kind == "" {
			p.unparsed(off+rs, off+re, "a protobuf "+orObject(kind)+" cut short")
			return true
		}
		p.scan(b[:re], rs, off, depth) // nested envelopes in what is there
		return true
	}
	raw := b[rs:re]
	// An envelope may carry JSON (runtime.Unknown.contentType).
	if len(raw) > 0 && raw[0] == '{' {
		p.json(raw, off+rs)
		return true
	}
	p.object(kind, raw, off+rs, depth)
	return true
}

func orObject(kind string) string {
	if kind == "" {
		return "object"
	}
	return kind
}

// object walks the message raw of kind (at absolute offset off).
func (p *protoWalker) object(kind string, raw []byte, off, depth int) {
	if depth > maxProtoDepth {
		p.unparsed(off, off+len(raw), fmt.Sprintf("protobuf objects nested deeper than %d", maxProtoDepth))
		return
	}
	ok := true
	switch kind {
	case protoKindSecret:
		ok = p.secret(raw, off)
	case "SecretList":
		ok = p.items(raw, off, p.secret, "a Secret that does not parse")
	case protoKindPOM:
		ok = p.pom(raw, off)
	case "PartialObjectMetadataList":
		ok = p.items(raw, off, p.pom, "a PartialObjectMetadata that does not parse")
	case protoKindToken:
		ok = p.token(raw, off, fTokenStatus, fTokenStatusToken, whyToken, kind)
	case protoKindReview:
		ok = p.token(raw, off, fReviewSpec, fReviewSpecToken, whyReviewToken, kind)
	case protoKindRevision:
		ok = p.revision(raw, off, depth)
	case "ControllerRevisionList":
		ok = p.items(raw, off, func(m []byte, off int) bool { return p.revision(m, off, depth) },
			"a ControllerRevision that does not parse")
	case protoKindList:
		ok = forFields(raw, 0, func(n protowire.Number, s, e int) {
			if n == fListItems {
				p.rawExtension(raw[s:e], off+s, depth)
			}
		})
	case protoKindWatchEvnt:
		ok = forFields(raw, 0, func(n protowire.Number, s, e int) {
			if n == fWatchEventObject {
				p.rawExtension(raw[s:e], off+s, depth)
			}
		})
	default:
		// A typed message: only a nested envelope can hold a Secret.
		p.scan(raw, 0, off, depth)
		return
	}
	if !ok {
		p.unparsed(off, off+len(raw), "a protobuf "+kind+" that does not parse")
	}
}

// rawExtension walks a runtime.RawExtension message: its raw bytes are a
// nested object, protobuf or JSON.
func (p *protoWalker) rawExtension(m []byte, off, depth int) {
	ok := forFields(m, 0, func(n protowire.Number, s, e int) {
		if n != fRawExtensionRaw {
			return
		}
		raw := m[s:e]
		switch {
		case bytes.HasPrefix(raw, protoMagic):
			if !p.envelope(raw, off+s, depth+1) {
				p.unparsed(off+s, off+e, "a nested protobuf object that does not parse")
			}
		case len(raw) > 0 && (raw[0] == '{' || raw[0] == '['):
			p.json(raw, off+s)
		case mayHoldProto(raw):
			p.unparsed(off+s, off+e, "a nested object in an unknown encoding")
		}
	})
	if !ok {
		p.unparsed(off, off+len(m), "a RawExtension that does not parse")
	}
}

// scan looks for nested envelopes in b[i:] (absolute offset of b: off),
// and for last-applied-configuration annotations of the typed messages
// there (see lastAppliedValues).
func (p *protoWalker) scan(b []byte, i, off, depth int) {
	p.lastAppliedValues(b, i, off)
	p.quotedStrings(b, i, off)
	for {
		k := bytes.Index(b[i:], protoMagic)
		if k < 0 {
			return
		}
		j := i + k
		kind, _, re, _, ok := envelopeHeader(b[j:])
		if !ok {
			i = j + 1
			continue
		}
		if special(kind) {
			if depth+1 > maxProtoDepth {
				p.unparsed(off+j, off+j+re, fmt.Sprintf("protobuf objects nested deeper than %d", maxProtoDepth))
			} else {
				p.envelope(b[j:j+re], off+j, depth+1)
			}
			i = j + re
			continue
		}
		i = j + 1 // look inside it too
	}
}

// quotedStrings judges, in a typed message not otherwise parsed (b[i:],
// at absolute offset off), each string field that names a Secret
// (Secrets.quoted: an Event's message quoting a manifest): the innermost
// length-delimited field that holds the whole word, read without the
// message's schema (a field whose bytes parse as a message holding the
// word in one of its fields is that message). What is not a string is
// judged as one too (fail closed).
func (p *protoWalker) quotedStrings(b []byte, i, off int) {
	words := [][]byte{markerSecret}
	if escapedKind(b[i:]) {
		// A kind whose letters are escaped: the fields naming a kind.
		words = append(words, []byte("kind"), []byte("Kind"), []byte("KIND"))
	}
	var judged [][2]int
	for _, word := range words {
		for j := i; ; {
			k := bytes.Index(b[j:], word)
			if k < 0 {
				break
			}
			at := j + k
			j = at + len(word)
			s, e := leafField(b, i, at, j)
			if s < 0 || e-s < minQuoted || slices.Contains(judged, [2]int{s, e}) {
				continue
			}
			judged = append(judged, [2]int{s, e})
			var rep Report
			out, failed := p.s.quoted(b[s:e], 1, &rep)
			switch {
			case failed != "":
				p.unparsed(off+s, off+e, failed)
			case out != nil:
				p.jsons = append(p.jsons, jsonPatch{off: off + s, out: out, rep: rep})
			}
		}
	}
}

// leafField returns the innermost length-delimited field of the message
// b[i:] whose content holds b[lo:hi], following fields whose content
// parses as a message; -1 if no field of b[i:] holds it.
func leafField(b []byte, i, lo, hi int) (start, end int) {
	start, end = -1, -1
	for depth := 0; depth < maxProtoDepth; depth++ {
		fs, fe := -1, -1
		whole := forFields(b, i, func(_ protowire.Number, vs, ve int) {
			if vs <= lo && hi <= ve {
				fs, fe = vs, ve
			}
		})
		if !whole || fs < 0 {
			return start, end
		}
		start, end = fs, fe
		b, i = b[:fe], fs
	}
	return start, end
}

// lastAppliedKey is the annotation's key as a typed message's ObjectMeta
// carries it: a map entry's key field (1, length-delimited) and the key.
var lastAppliedKey = append([]byte{fMapKey<<3 | 2, byte(len(lastApplied))}, lastApplied...)

// lastAppliedValues judges, in a typed message not otherwise parsed
// (b[i:], at absolute offset off), the value of each
// last-applied-configuration annotation by its content, as the JSON
// walker does for every kind: the map entry's value field (2) after the
// key, if it parses, is replaced when it is (or holds) a Secret or cannot
// be parsed. The key is looked for as bytes, so a message's field that
// merely looks like the entry is judged too (fail closed).
func (p *protoWalker) lastAppliedValues(b []byte, i, off int) {
	for {
		k := bytes.Index(b[i:], lastAppliedKey)
		if k < 0 {
			return
		}
		j := i + k + len(lastAppliedKey)
		i = j
		num, typ, n := protowire.ConsumeTag(b[j:])
		if n < 0 || num != fMapValue || typ != protowire.BytesType {
			continue
		}
		l, m := protowire.ConsumeVarint(b[j+n:])
		if m < 0 || l > uint64(len(b)-j-n-m) {
			continue
		}
		vs := j + n + m
		ve := vs + int(l)
		if objectHoldsSecret(b[vs:ve]) {
			p.spans = append(p.spans, pspan{start: off + vs, end: off + ve, why: whyLastApplied, object: "an object"})
		}
		i = ve
	}
}

// json redacts a JSON document nested in protobuf.
func (p *protoWalker) json(raw []byte, off int) {
	if !mayHoldJSON(raw) {
		return
	}
	var rep Report
	w := newJSONWalker(p.s, &rep, false)
	out := w.whole(raw, true)
	if w.changed {
		p.jsons = append(p.jsons, jsonPatch{off: off, out: out, rep: rep})
	}
}

func (p *protoWalker) unparsed(s, e int, why string) {
	p.spans = append(p.spans, pspan{start: s, end: e, unparsed: why})
}

// meta reads an ObjectMeta's name and namespace and calls ann for each
// annotation (its value's span).
func meta(m []byte, ann func(key []byte, s, e int)) (name, ns []byte, ok bool) {
	ok = forFields(m, 0, func(n protowire.Number, s, e int) {
		switch n {
		case fObjectMetaName:
			name = m[s:e]
		case fObjectMetaNS:
			ns = m[s:e]
		case fObjectMetaAnnot:
			var k []byte
			vs, ve := -1, -1
			forFields(m[:e], s, func(n protowire.Number, s2, e2 int) {
				switch n {
				case fMapKey:
					k = m[s2:e2]
				case fMapValue:
					vs, ve = s2, e2
				}
			})
			if vs >= 0 && ann != nil {
				ann(k, vs, ve)
			}
		}
	})
	return name, ns, ok
}

// secret adds the spans of a Secret message's values.
func (p *protoWalker) secret(m []byte, off int) bool {
	var name, ns []byte
	first := len(p.spans)
	ok := forFields(m, 0, func(n protowire.Number, s, e int) {
		switch n {
		case fMetadata:
			var mok bool
			name, ns, mok = meta(m[s:e], func(k []byte, vs, ve int) {
				if string(k) == lastApplied {
					p.spans = append(p.spans, pspan{start: off + s + vs, end: off + s + ve, why: whyLastApplied})
				}
			})
			if !mok {
				p.spans = append(p.spans, pspan{start: off + s, end: off + e, unparsed: "Secret metadata that does not parse"})
			}
		case fSecretData, fSecretStringData:
			y := whyData
			if n == fSecretStringData {
				y = whyStringData
			}
			var k string
			mok := forFields(m[:e], s, func(n protowire.Number, s2, e2 int) {
				switch n {
				case fMapKey:
					k = string(m[s2:e2])
				case fMapValue:
					p.spans = append(p.spans, pspan{start: off + s2, end: off + e2, why: y, field: k})
				}
			})
			if !mok {
				p.spans = append(p.spans, pspan{start: off + s, end: off + e, unparsed: "a Secret data entry that does not parse"})
			}
		}
	})
	p.named(first, protoKindSecret, ns, name)
	return ok
}

// items redacts each item of the typed list raw, at off in the body,
// with item; an item that does not parse is reported as unparsed.
func (p *protoWalker) items(raw []byte, off int, item func(m []byte, off int) bool, unparsed string) bool {
	return forFields(raw, 0, func(n protowire.Number, s, e int) {
		if n == fListItems && !item(raw[s:e], off+s) {
			p.unparsed(off+s, off+e, unparsed)
		}
	})
}

// named names the object of the spans added since p.spans held first (the
// name is built only when there are some).
func (p *protoWalker) named(first int, kind string, ns, name []byte) {
	if len(p.spans) == first {
		return
	}
	obj := objectNameBytes(kind, ns, name)
	for i := first; i < len(p.spans); i++ {
		p.spans[i].object = obj
	}
}

// pom redacts a PartialObjectMetadata's last-applied annotation when it is
// a Secret's.
func (p *protoWalker) pom(m []byte, off int) bool {
	var name, ns []byte
	first := len(p.spans)
	ok := forFields(m, 0, func(n protowire.Number, s, e int) {
		if n != fMetadata {
			return
		}
		var mok bool
		name, ns, mok = meta(m[s:e], func(k []byte, vs, ve int) {
			if string(k) == lastApplied && objectHoldsSecret(m[s+vs:s+ve]) {
				p.spans = append(p.spans, pspan{start: off + s + vs, end: off + s + ve, why: whyLastApplied})
			}
		})
		if !mok {
			p.spans = append(p.spans, pspan{start: off + s, end: off + e, unparsed: "metadata that does not parse"})
		}
	})
	p.named(first, protoKindPOM, ns, name)
	return ok
}

// token redacts the string field tf of the message field mf (a
// TokenRequest's status.token, a TokenReview's spec.token).
func (p *protoWalker) token(m []byte, off int, mf, tf protowire.Number, y why, kind string) bool {
	var name, ns []byte
	first := len(p.spans)
	ok := forFields(m, 0, func(n protowire.Number, s, e int) {
		switch n {
		case fMetadata:
			name, ns, _ = meta(m[s:e], nil)
		case mf:
			if !forFields(m[:e], s, func(n protowire.Number, s2, e2 int) {
				if n == tf {
					p.spans = append(p.spans, pspan{start: off + s2, end: off + e2, why: y})
				}
			}) {
				p.spans = append(p.spans, pspan{start: off + s, end: off + e, unparsed: kind + " that does not parse"})
			}
		}
	})
	p.named(first, kind, ns, name)
	return ok
}

// revision walks a ControllerRevision's data, a nested object.
func (p *protoWalker) revision(m []byte, off, depth int) bool {
	return forFields(m, 0, func(n protowire.Number, s, e int) {
		if n == fRevisionData {
			p.rawExtension(m[s:e], off+s, depth)
		}
	})
}

// forFields calls fn with the span of every length-delimited field of the
// message b[i:], skipping other wire types. It reports whether the
// message parsed completely.
func forFields(b []byte, i int, fn func(num protowire.Number, vs, ve int)) bool {
	for i < len(b) {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return false
		}
		i += n
		if typ == protowire.BytesType {
			l, m := protowire.ConsumeVarint(b[i:])
			if m < 0 || l > uint64(len(b)-i-m) {
				return false
			}
			vs := i + m
			ve := vs + int(l)
			fn(num, vs, ve)
			i = ve
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i:])
		if m < 0 {
			return false
		}
		i += m
	}
	return true
}

// apply replaces the walker's spans in b (copy on write) and reports them.
func (p *protoWalker) apply(s *Secrets, b []byte, rep *Report) ([]byte, bool) {
	return p.applyTo(nil, s, b, rep)
}

// applyTo is apply with the redacted copy built in dst's storage.
func (p *protoWalker) applyTo(dst []byte, s *Secrets, b []byte, rep *Report) ([]byte, bool) {
	if len(p.spans) == 0 && len(p.jsons) == 0 {
		return b, false
	}
	out := append(dst[:0], b...)
	for _, j := range p.jsons {
		copy(out[j.off:], j.out)
		rep.Merge(&j.rep)
	}
	for _, sp := range p.spans {
		v := out[sp.start:sp.end]
		if sp.unparsed != "" {
			fill(v, unparsedFill)
			rep.fail(int64(sp.start), int64(len(v)), sp.unparsed)
			continue
		}
		s.replace(v, false)
		rep.add(sp.why.reason(), sp.object, sp.why.field(sp.field), 1, int64(len(v)))
	}
	return out, true
}

// Markers: a document that contains none of these cannot hold a value the
// package redacts, whatever its shape (see mayHoldJSON).
var (
	markerSecret = []byte("Secret")
	markerToken  = []byte("TokenRe") // TokenRequest, TokenReview
)

// mayHoldJSON reports whether a complete JSON document may hold a value
// this package redacts. Every rule needs a kind (Secret, SecretList,
// TokenRequest, TokenReview) written in the document — the
// last-applied-configuration of a Secret names its kind too — unless a
// member name or kind is hidden behind a \u escape of a letter, which
// also counts. Bodies sent to a Secret endpoint do not rely on this.
func mayHoldJSON(b []byte) bool {
	if bytes.Contains(b, markerSecret) || bytes.Contains(b, markerToken) || escapedKind(b) {
		return true
	}
	for i := 0; ; {
		k := bytes.Index(b[i:], []byte(`\u`))
		if k < 0 {
			return false
		}
		j := i + k + 2
		if j+4 <= len(b) && b[j] == '0' && b[j+1] == '0' && isLetterHex(b[j+2], b[j+3]) {
			return true
		}
		if j+4 > len(b) {
			return true // cut inside an escape
		}
		i = j
	}
}

func isLetterHex(h, l byte) bool {
	v := hexVal(h)<<4 | hexVal(l)
	return v >= 'A' && v <= 'Z' || v >= 'a' && v <= 'z'
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}

// mayHoldProto reports whether protobuf bytes may hold a value this
// package redacts: it names a kind that does (or embeds JSON that may).
func mayHoldProto(b []byte) bool {
	return bytes.Contains(b, markerSecret) || bytes.Contains(b, markerToken) || bytes.Contains(b, []byte(`\u`)) || escapedKind(b)
}

// protoWhole redacts a complete protobuf object (an envelope) in b.
func (s *Secrets) protoWhole(b []byte, rep *Report) ([]byte, bool) {
	p := protoWalker{s: s}
	if !p.envelope(b, 0, 0) {
		if !mayHoldProto(b) {
			return b, false
		}
		p.unparsed(0, len(b), "protobuf that does not parse")
	}
	return p.apply(s, b, rep)
}
