package redact

// What becomes of a value: redacted in place and reported, judged by its
// content (last-applied-configuration), or replaced because the text
// cannot be parsed or the held bytes outgrew MaxHold (fail closed).

import (
	"encoding/json"
	"fmt"

	"github.com/wtrace/wtrace/formats"
)

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
	if w.qOpen {
		// The string being read is replaced from its start if what
		// arrived of it may quote a Secret.
		w.qOpen = false
		if w.qStart < at && w.heldQuotes() {
			at = w.qStart
		}
	}
	if w.text {
		// In text, a value that does not parse is text: the values it
		// held back are replaced, and the rest of its line is held and
		// judged at the line's end (judgeLine).
		if w.openOrPending() {
			w.resolveAll()
			w.rep.fail(at, 0, msg)
		}
		w.stack = w.stack[:0]
		w.open = nil
		w.pending, w.dirty = 0, false
		w.st, w.lineAt = sTextHold, at
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

// gap tells the walker that bytes were lost at w.pos: every value still
// waiting, and every byte from here on, is replaced (fail closed) — but
// for text lost between its values and lines, where what follows is read
// as any text is.
func (w *jsonWalker) gap() {
	if w.text && len(w.stack) == 0 && (w.st == sText || w.st == sValue || w.st == sAfter) {
		w.st = sText // the rest of the line the gap cut is text
		return
	}
	if w.st == sTextHold {
		w.judgeLine(w.lineAt, w.pos)
	}
	w.text = false
	w.fail(w.pos, "bytes were lost")
}

// judgeLine judges the held rest of a line of text, [from, to), after a
// value that did not parse: replaced if it may hold a credential (it
// names a kind that does, or hides a letter behind an escape).
func (w *jsonWalker) judgeLine(from, to int64) {
	from = max(from, w.base)
	if from >= to {
		return
	}
	line := w.buf[from-w.base : to-w.base]
	if !mayHoldJSON(line) && len(secretMentions(line)) == 0 {
		return
	}
	w.writable()
	fill(w.buf[from-w.base:to-w.base], unparsedFill)
	w.rep.fail(from, to-from, "a line of text that does not parse as JSON and may hold a credential")
}

// heldQuotes reports whether what arrived of the string being read may
// quote a Secret (see Secrets.quoted).
func (w *jsonWalker) heldQuotes() bool {
	raw := w.buf[max(w.qStart, w.base)-w.base : w.pos-w.base]
	return mayHoldJSON(raw) || len(secretMentions(raw)) > 0
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
		if w.failed {
			w.replaceFrom(w.failAt)
		}
		return
	}
	if w.st == sTextHold && w.pos-w.lineAt > MaxHold {
		// A line too long to hold: replaced from where its value failed
		// if what arrived may hold a credential, else let go.
		line := w.buf[max(w.lineAt, w.base)-w.base : w.pos-w.base]
		if mayHoldJSON(line) {
			w.judgeLine(w.lineAt, w.pos)
			w.st = sTextFill
		} else {
			w.st = sText
		}
		return
	}
	if w.qOpen && w.pos-w.qStart > MaxHold {
		// A string too long to hold until its end: replaced from its
		// start if what arrived may quote a Secret, else let go unjudged.
		if w.heldQuotes() {
			w.fail(w.qStart, fmt.Sprintf("json at byte %d: a string longer than %d bytes that may quote a Secret", w.qStart, MaxHold))
			if w.failed {
				w.replaceFrom(w.failAt)
			}
			return
		}
		w.qOpen = false
		if w.pos-w.frontier() <= MaxHold {
			return
		}
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
