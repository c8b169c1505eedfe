package redact

// A typed protobuf body (a kind that is not special: a Pod, an EventList)
// field by field: each top-level field of the envelope's raw message is
// held until whole and walked as a typed message is (nested envelopes,
// last-applied-configuration annotations, strings that quote a Secret),
// then released. An EventList streams an Event at a time.

import (
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// startFields begins the field-by-field walk of raw, whose first bytes
// are b (at absolute offset off) and declared length n. The bytes before
// raw (the envelope's magic, typeMeta, raw's tag and length) were
// emitted.
func (p *protoBody) startFields(b []byte, off int64, n uint64, emit func([]byte)) {
	p.st, p.rawLeft, p.fneed, p.fhdr, p.held = pFields, int64(n), -1, p.fhdr[:0], p.held[:0]
	p.fields(b, off, emit)
}

// fields consumes b (at absolute offset off) in pFields.
func (p *protoBody) fields(b []byte, off int64, emit func([]byte)) {
	for len(b) > 0 && p.st == pFields {
		if p.rawLeft == 0 {
			// The envelope's fields after raw (content encoding and type).
			p.st = pPass
			p.pass(b, off, emit)
			return
		}
		if p.fneed < 0 {
			if len(p.fhdr) == 0 {
				p.fieldAt = off
			}
			p.fhdr = append(p.fhdr, b[0])
			b, off, p.rawLeft = b[1:], off+1, p.rawLeft-1
			p.fieldHead(emit)
			continue
		}
		k := int(min(int64(len(b)), int64(p.fneed-len(p.held)), p.rawLeft))
		p.held = append(p.held, b[:k]...)
		b, off, p.rawLeft = b[k:], off+int64(k), p.rawLeft-int64(k)
		if len(p.held) == p.fneed {
			p.fieldEnd(emit)
		} else if p.rawLeft == 0 {
			p.fieldsBroken(emit) // raw ends inside the field
		}
	}
	if len(b) > 0 {
		p.write2(b, off, emit)
	}
}

// fieldHead reads the tag and length of the next field from fhdr; a
// field that is not length-delimited is released whole, its value read.
func (p *protoBody) fieldHead(emit func([]byte)) {
	num, typ, n := protowire.ConsumeTag(p.fhdr)
	if n < 0 {
		if protowire.ParseError(n) != io.ErrUnexpectedEOF || len(p.fhdr) >= maxFieldHead {
			p.fieldsBroken(emit)
		}
		return
	}
	if m := protowire.ConsumeFieldValue(num, typ, p.fhdr[n:]); typ != protowire.BytesType {
		switch {
		case m >= 0:
			emit(p.fhdr)
			p.fhdr = p.fhdr[:0]
		case protowire.ParseError(m) != io.ErrUnexpectedEOF || len(p.fhdr) >= maxFieldHead:
			p.fieldsBroken(emit)
		}
		return
	}
	l, m := protowire.ConsumeVarint(p.fhdr[n:])
	switch {
	case m < 0 && len(p.fhdr) < maxFieldHead:
		return // more of the length to come
	case m < 0 || l > uint64(p.rawLeft) || l > MaxHoldWhole:
		p.fieldsBroken(emit)
		return
	}
	p.fneed = int(l)
	if p.fneed == 0 {
		p.fieldEnd(emit)
	}
}

// fieldEnd judges the whole field held (fhdr, held) and releases it.
func (p *protoBody) fieldEnd(emit func([]byte)) {
	v := p.held
	w := protoWalker{s: p.s}
	var out []byte
	var changed bool
	var rep Report
	if forFields(v, 0, func(protowire.Number, int, int) {}) {
		w.scan(v, 0, 0, 0)
		out, changed = w.apply(p.s, v, &rep)
	} else if q, failed := p.s.quoted(v, 1, &rep); failed != "" {
		// A string field (a typed message's own) that quotes a Secret
		// it cannot parse.
		out, changed = make([]byte, len(v)), true
		fill(out, unparsedFill)
		rep.fail(0, int64(len(v)), failed)
	} else if q != nil {
		out, changed = q, true
	}
	if !changed {
		out = v
	}
	for i := range rep.failures {
		rep.failures[i].Offset += p.fieldAt + int64(len(p.fhdr))
	}
	p.rep.Merge(&rep)
	p.changed = p.changed || changed
	emit(p.fhdr)
	if len(out) > 0 {
		emit(out)
	}
	p.fhdr, p.fneed = p.fhdr[:0], -1
	if cap(p.held) > 1<<20 {
		p.held = nil // let a large object go
	} else {
		p.held = p.held[:0]
	}
}

// fieldsBroken ends the field-by-field walk where the fields do not parse
// (or raw ends inside one): what is held, and the rest, stream as before
// (pPass: nested envelopes and annotations are still found).
func (p *protoBody) fieldsBroken(emit func([]byte)) {
	rest := append(p.fhdr, p.held...)
	at := p.fieldAt
	p.fhdr, p.held, p.fneed = p.fhdr[:0], nil, -1
	p.st = pPass
	p.pass(rest, at, emit)
}

// write2 goes on with b in the state fields left for.
func (p *protoBody) write2(b []byte, off int64, emit func([]byte)) {
	switch p.st {
	case pPass:
		p.pass(b, off, emit)
	case pHoldRest, pAnnot:
		// pass switched: feed the rest as write does.
		p.pos -= int64(len(b))
		p.write(b, emit)
	}
}

// fieldsCut ends the walk at a gap or at the body's end inside a field:
// what is held of the field is replaced if it may hold a credential.
func (p *protoBody) fieldsCut(emit func([]byte), why string) {
	h := append(p.fhdr, p.held...)
	p.fhdr, p.held, p.fneed = p.fhdr[:0], nil, -1
	if mayHoldProto(h) {
		p.rep.fail(p.fieldAt, int64(len(h)), why)
		p.replace(h, emit)
		return
	}
	if len(h) > 0 {
		emit(h)
	}
}
