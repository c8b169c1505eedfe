package redact

// Objects and what owns a value: the context of each container, which
// strings are candidates and for which owner, kinds (the last one counts),
// and what becomes of a frame's waiting values when it ends.

import (
	"bytes"
	"fmt"
)

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
	if w.qOpen {
		w.qOpen = false
		w.judgeString(w.qStart, w.pos)
	}
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
	if w.one && n == 0 {
		w.stopped, w.stopAt = true, w.pos+1
	}
}
