package redact

import (
	"bytes"
	"fmt"

	"github.com/wtrace/wtrace/internal/cborscan"
)

// CBOR (k8s.io/apimachinery pkg/runtime/serializer/cbor): every object a
// self-described map (tag 55799), strings and member names as byte
// strings, []byte values (Secret data) as byte strings tagged 22 (their
// raw bytes, not base64). A CBOR body or event is one data item, read
// whole with internal/cborscan and walked like JSON: the same rules
// (decide, itemKind), the kind of every map read before its members
// (member order does not matter; the apiserver writes "kind" last).
//
// A string's content is replaced in place by a placeholder of the same
// length, so its head, and the framing of everything around it, stay as
// they were. An item that cannot be parsed is replaced by a byte string
// of exactly its length (a head and filler), so the map or sequence that
// holds it stays well-formed.

// maxCBORDepth bounds the nesting the walker follows: Kubernetes' own CBOR
// decoder stops at 64 levels (apimachinery's DecOptions.MaxNestedLevels),
// so nothing deeper is an object any client or apiserver reads. Deeper
// items fail closed. The bound also keeps the walk linear: each level
// re-reads the bytes below it.
const maxCBORDepth = 64

// cspan is a region of a CBOR buffer to replace: string content chunks,
// or (unparsed) a whole item.
type cspan struct {
	chunks   [][2]int // indefinite-length strings: absolute [start, end) of each chunk
	why      why
	field    string
	obj      *cobj // the object the value belongs to
	start    int   // definite-length strings, unparsed items: the span
	end      int
	unparsed string
	// A string that quotes a Secret (quoted.go): its content's redacted
	// bytes, what that replaced; or, with unparsed, its content filled
	// (the head kept).
	repl []byte
	rep  *Report
	text bool
}

// cobj names an object for the report (objectName, made when a span of
// it is reported).
type cobj struct{ kind, ns, name string }

// cborWalker finds credentials in a complete CBOR data item.
type cborWalker struct {
	s     *Secrets
	spans []cspan
}

// mayHoldCBOR reports whether the CBOR item b may hold a value this
// package redacts: every rule needs a kind written in the item (Secret,
// SecretList, TokenRequest, TokenReview, or a Secret's kind inside a
// last-applied-configuration), and CBOR strings carry their bytes as
// they are, with no escapes — unless an indefinite-length string (initial
// byte 0x5f or 0x7f) splits a word into chunks, which only a walk tells
// (a byte 0x5f is also an underscore), or b is not well-formed.
func mayHoldCBOR(b []byte) bool {
	if bytes.Contains(b, markerSecret) || bytes.Contains(b, markerToken) || escapedKind(b) {
		return true
	}
	if bytes.IndexByte(b, 0x5f) < 0 && bytes.IndexByte(b, 0x7f) < 0 {
		return false
	}
	return cborscan.HasIndefiniteString(b)
}

// cborWhole redacts one complete CBOR data item in b (a body of
// application/cbor or a watch event). assume: the body was sent to a
// Secret endpoint (its root map without a kind is a Secret; a root that
// is not a map is replaced). Bytes that do not parse as exactly one item
// are replaced whole (fail closed) when they may hold a credential.
func (s *Secrets) cborWhole(b []byte, assume bool, rep *Report) ([]byte, bool) {
	if !assume && !mayHoldCBOR(b) {
		return b, false
	}
	w := cborWalker{s: s}
	end, err := cborscan.Skip(b, 0)
	switch {
	case err != nil:
		w.unparsed(0, len(b), fmt.Sprintf("CBOR that does not parse (%v)", err))
	case end != len(b):
		w.unparsed(0, len(b), fmt.Sprintf("%d bytes after a CBOR item", len(b)-end))
	case assume && !w.isMap(b):
		w.unparsed(0, len(b), "a body sent to a Secret endpoint in a form that cannot be parsed")
	default:
		w.value(b, 0, 0, "", assume)
	}
	return w.apply(s, b, rep)
}

func (w *cborWalker) isMap(item []byte) bool {
	i, _ := cborscan.Untag(item, 0)
	return i < len(item) && item[i]>>5 == cborscan.Map
}

func (w *cborWalker) unparsed(s, e int, why string) {
	w.spans = append(w.spans, cspan{start: s, end: e, unparsed: why})
}

// value walks one well-formed item (absolute offset off): maps are
// objects (implied is the kind of one that has no "kind" member, from
// its list), arrays are walked element by element.
func (w *cborWalker) value(b []byte, off, depth int, implied string, assume bool) {
	i, _ := cborscan.Untag(b, 0)
	if i >= len(b) {
		return
	}
	switch b[i] >> 5 {
	case cborscan.Map:
		w.object(b, off, depth, implied, assume)
	case cborscan.Bytes, cborscan.Text:
		w.quoted(b, off)
	case cborscan.Array:
		if depth >= maxCBORDepth {
			w.unparsed(off, off+len(b), fmt.Sprintf("CBOR nested deeper than %d", maxCBORDepth))
			return
		}
		cborscan.EachElement(b, func(e []byte, at int) error {
			w.value(e, off+at, depth+1, implied, false)
			return nil
		})
	}
}

// object walks a map: its kind first, then its members by the rules of
// decide.
func (w *cborWalker) object(b []byte, off, depth int, implied string, assume bool) {
	if depth >= maxCBORDepth {
		w.unparsed(off, off+len(b), fmt.Sprintf("CBOR nested deeper than %d", maxCBORDepth))
		return
	}
	kind, hasKind, conflict := implied, false, false
	var name, ns string
	cborscan.EachMember(b, func(k, v []byte, _ int) bool {
		switch {
		case cborscan.KeyIs(k, "kind"):
			s, ok := cborscan.String(v)
			if !ok {
				return true
			}
			if hasKind && string(s) != kind {
				conflict = true
				return false
			}
			kind, hasKind = string(s), true
		case cborscan.KeyIs(k, "metadata"):
			cborscan.EachMember(v, func(k, v []byte, _ int) bool {
				switch {
				case cborscan.KeyIs(k, "name"):
					s, _ := cborscan.String(v)
					name = string(s)
				case cborscan.KeyIs(k, "namespace"):
					s, _ := cborscan.String(v)
					ns = string(s)
				}
				return true
			})
		}
		return true
	})
	if conflict {
		w.unparsed(off, off+len(b), "an object whose kind is given twice, differently")
		return
	}
	if !hasKind && assume {
		kind = "Secret"
	}
	obj := &cobj{kind, ns, name}
	cborscan.EachMember(b, func(k, v []byte, at int) bool {
		voff := off + at
		switch {
		case cborscan.KeyIs(k, "kind"):
		case cborscan.KeyIs(k, "data"), cborscan.KeyIs(k, "stringData"):
			y := whyData
			if cborscan.KeyIs(k, "stringData") {
				y = whyStringData
			}
			if decide(y, kind) != dRedact {
				if mayHoldCBOR(v) {
					w.value(v, voff, depth+1, "", false)
				}
				return true
			}
			w.values(v, voff, y, obj)
		case cborscan.KeyIs(k, "metadata"):
			w.metadata(v, voff, kind, obj)
		case cborscan.KeyIs(k, "status") && kind == "TokenRequest",
			cborscan.KeyIs(k, "spec") && kind == "TokenReview":
			y := whyToken
			if kind == "TokenReview" {
				y = whyReviewToken
			}
			w.member(v, voff, "token", y, obj, depth)
		case cborscan.KeyIs(k, "items"):
			if ik := itemKind(kind); ik != "" && decide(whyData, ik) == dRedact || mayHoldCBOR(v) {
				w.value(v, voff, depth+1, ik, false)
			}
		default:
			// A value that names no kind the rules act on holds
			// nothing to redact: not walked.
			if mayHoldCBOR(v) {
				w.value(v, voff, depth+1, "", false)
			}
		}
		return true
	})
}

// values adds every string value of the map m (a Secret's data or
// stringData) as a candidate; a value that is not a string fails closed.
func (w *cborWalker) values(m []byte, off int, y why, obj *cobj) {
	if len(m) == 1 && m[0] == 0xf6 {
		return // null
	}
	if !w.isMap(m) {
		w.unparsed(off, off+len(m), "a Secret's "+y.field("")+" that is not a map")
		return
	}
	cborscan.EachMember(m, func(k, v []byte, at int) bool {
		key, _ := cborscan.String(k)
		w.str(v, off+at, y, string(key), obj)
		return true
	})
}

// str adds the string item v (absolute offset off) as a span; null is
// skipped, anything else replaced whole.
func (w *cborWalker) str(v []byte, off int, y why, field string, obj *cobj) {
	if len(v) == 1 && v[0] == 0xf6 {
		return
	}
	sp := cspan{why: y, field: field, obj: obj}
	var ok bool
	sp.start, sp.end, sp.chunks, ok = stringChunks(v, off)
	if !ok {
		w.unparsed(off, off+len(v), fmt.Sprintf("a %s that is not a string", y.field(field)))
		return
	}
	w.spans = append(w.spans, sp)
}

// member adds the string member name of map m (a TokenRequest's status,
// a TokenReview's spec).
func (w *cborWalker) member(m []byte, off int, name string, y why, obj *cobj, depth int) {
	if !w.isMap(m) {
		w.value(m, off, depth+1, "", false)
		return
	}
	cborscan.EachMember(m, func(k, v []byte, at int) bool {
		if cborscan.KeyIs(k, name) {
			w.str(v, off+at, y, "", obj)
		}
		return true
	})
}

// metadata handles an object's metadata: its last-applied-configuration
// annotation by decide (for an object without a kind or a
// PartialObjectMetadata, by what the annotation's JSON holds).
func (w *cborWalker) metadata(m []byte, off int, kind string, obj *cobj) {
	if !w.isMap(m) {
		return
	}
	cborscan.EachMember(m, func(k, v []byte, at int) bool {
		if !cborscan.KeyIs(k, "annotations") || !w.isMap(v) {
			return true
		}
		aoff := off + at
		cborscan.EachMember(v, func(k, av []byte, vat int) bool {
			if !cborscan.KeyIs(k, lastApplied) {
				if mayHoldCBOR(av) {
					w.quoted(av, aoff+vat)
				}
				return true
			}
			switch decide(whyLastApplied, kind) {
			case dRedact:
				w.str(av, aoff+vat, whyLastApplied, "", obj)
			case dContent:
				s, ok := cborscan.String(av)
				if !ok || objectHoldsSecret(s) {
					w.str(av, aoff+vat, whyLastApplied, "", obj)
				}
			}
			return true
		})
		return true
	})
}

// quoted judges the string item v (absolute offset off), no rule's
// value, for a quoted Secret (Secrets.quoted): its content redacted in
// place, or filled whole when it cannot be judged (fail closed). An
// indefinite-length string, whose chunks may split a word, is judged
// joined and filled whole if anything in it must change.
func (w *cborWalker) quoted(v []byte, off int) {
	start, end, chunks, ok := stringChunks(v, off)
	if !ok {
		return
	}
	text := v[start-off : end-off]
	if chunks != nil {
		text = nil
		for _, c := range chunks {
			text = append(text, v[c[0]-off:c[1]-off]...)
		}
	}
	if len(text) < minQuoted {
		return
	}
	var rep Report
	out, failed := w.s.quoted(text, 1, &rep)
	switch {
	case out == nil && failed == "":
		return
	case chunks != nil:
		w.spans = append(w.spans, cspan{chunks: chunks, unparsed: whyQuoted, text: true})
	case failed != "":
		w.spans = append(w.spans, cspan{start: start, end: end, unparsed: failed, text: true})
	default:
		w.spans = append(w.spans, cspan{start: start, end: end, repl: out, rep: &rep})
	}
}

// stringChunks returns the absolute span of a definite-length string
// item's content, or the spans of an indefinite one's chunks.
func stringChunks(v []byte, off int) (start, end int, chunks [][2]int, ok bool) {
	i, _ := cborscan.Untag(v, 0)
	h, err := cborscan.ParseHead(v[i:], i)
	if err != nil || h.Major != cborscan.Bytes && h.Major != cborscan.Text {
		return 0, 0, nil, false
	}
	j := i + h.Len
	if !h.Indef() {
		return off + j, off + j + int(h.Arg), nil, true
	}
	chunks = [][2]int{}
	for j < len(v) && v[j] != 0xff {
		c, err := cborscan.ParseHead(v[j:], j)
		if err != nil {
			return 0, 0, nil, false
		}
		j += c.Len
		chunks = append(chunks, [2]int{off + j, off + j + int(c.Arg)})
		j += int(c.Arg)
	}
	return 0, 0, chunks, true
}

// apply replaces the walker's spans in b (copy on write) and reports them.
func (w *cborWalker) apply(s *Secrets, b []byte, rep *Report) ([]byte, bool) {
	if len(w.spans) == 0 {
		return b, false
	}
	out := bytes.Clone(b)
	for _, sp := range w.spans {
		switch {
		case sp.text && sp.chunks != nil:
			for _, c := range sp.chunks {
				fill(out[c[0]:c[1]], unparsedFill)
				rep.fail(int64(c[0]), int64(c[1]-c[0]), sp.unparsed)
			}
			continue
		case sp.text:
			fill(out[sp.start:sp.end], unparsedFill)
			rep.fail(int64(sp.start), int64(sp.end-sp.start), sp.unparsed)
			continue
		case sp.unparsed != "":
			fillCBOR(out[sp.start:sp.end])
			rep.fail(int64(sp.start), int64(sp.end-sp.start), sp.unparsed)
			continue
		case sp.repl != nil:
			copy(out[sp.start:sp.end], sp.repl)
			rep.Merge(sp.rep)
			continue
		}
		var n int
		chunks := sp.chunks
		val := b[sp.start:sp.end]
		if chunks == nil {
			chunks = [][2]int{{sp.start, sp.end}}
		} else {
			val = nil
			for _, c := range chunks {
				val = append(val, b[c[0]:c[1]]...)
			}
		}
		var buf [tagLen]byte
		t := s.tag(&buf, val)
		for _, c := range chunks {
			v := out[c[0]:c[1]]
			for i := range v {
				v[i] = t[(n+i)%len(t)]
			}
			n += len(v)
		}
		rep.add(sp.why.reason(), objectName(sp.obj.kind, sp.obj.ns, sp.obj.name), sp.why.field(sp.field), 1, int64(n))
	}
	return out, true
}

// fillCBOR overwrites b with one well-formed CBOR item of exactly len(b)
// bytes: a byte string of filler (its head takes 1, 2, 3 or 5 bytes).
// An empty b stays empty.
func fillCBOR(b []byte) {
	n := len(b)
	if n == 0 {
		return
	}
	var h []byte
	switch {
	case n-1 < 24:
		h = cborscan.AppendHead(nil, cborscan.Bytes, uint64(n-1))
	case n-2 <= 0xff:
		h = []byte{cborscan.Bytes<<5 | 24, byte(n - 2)}
	case n-3 <= 0xffff:
		h = []byte{cborscan.Bytes<<5 | 25, byte((n - 3) >> 8), byte(n - 3)}
	default:
		m := uint32(n - 5)
		h = []byte{cborscan.Bytes<<5 | 26, byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	}
	copy(b, h)
	fill(b[len(h):], unparsedFill)
}
