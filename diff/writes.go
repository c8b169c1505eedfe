package diff

import (
	"fmt"
	"unicode/utf8"

	"github.com/wtrace/wtrace/formats"
)

// compareWrites pairs the writes of each object, in order, by verb.
func (c *comparer) compareWrites() error {
	objs := union(c.a.wOrder, c.a.writes, c.b.wOrder)
	for _, o := range objs {
		wa, wb := c.a.writes[o], c.b.writes[o]
		if c.opts.CollapseRepeats {
			wa, wb = c.firsts(wa), c.firsts(wb)
		}
		al := &aligner[*exch]{
			nextA:  sliceSource(wa),
			nextB:  sliceSource(wb),
			key:    func(e *exch) string { return e.verb() },
			size:   func(*exch) int64 { return 0 },
			window: c.window,
			limbo:  c.window,
			budget: c.windowBytes,
			emit: func(op opKind, a, b *exch) error {
				c.writePair(o, op, a, b)
				return nil
			},
		}
		if err := al.run(); err != nil {
			return err
		}
	}
	return nil
}

// writeID is what makes a write a repeat of another (Options.CollapseRepeats).
type writeID struct {
	verb, key string
	normOK    bool
	hash      uint64
	size      int64
	status    int
}

// firsts returns the writes of one object that repeat no earlier one,
// counting the others in Summary.Writes.Repeats.
func (c *comparer) firsts(ws []*exch) []*exch {
	seen := make(map[writeID]bool, len(ws))
	out := make([]*exch, 0, len(ws))
	for _, e := range ws {
		id := writeID{verb: e.verb(), key: e.req.key, normOK: e.reqDoc.normOK, status: e.status}
		if id.normOK {
			id.hash = e.reqDoc.norm
		} else {
			id.hash, id.size = e.reqDoc.raw, e.reqDoc.size
		}
		if seen[id] {
			c.rep.Summary.Writes.Repeats++
			continue
		}
		seen[id] = true
		out = append(out, e)
	}
	return out
}

// sliceSource reads a slice in order.
func sliceSource[T any](s []T) func() (T, bool, error) {
	i := 0
	return func() (T, bool, error) {
		var zero T
		if i == len(s) {
			return zero, false, nil
		}
		i++
		return s[i-1], true, nil
	}
}

func (c *comparer) writePair(o Object, op opKind, a, b *exch) {
	n := &c.rep.Summary.Writes
	subject := o.String()
	if !o.validObject() {
		subject = c.exchSubject(firstNonNil(a, b))
	}
	obj := &o
	if !o.validObject() {
		obj = nil
	}
	switch op {
	case opMissing:
		n.Missing++
		if c.listing() {
			c.add(subject, obj, Difference{Category: CategoryWrite, Kind: KindMissing, What: a.verb(), A: a.place()})
		}
		return
	case opExtra:
		n.Extra++
		if c.listing() {
			c.add(subject, obj, Difference{Category: CategoryWrite, Kind: KindExtra, What: b.verb(), B: b.place()})
		}
		return
	}
	n.Compared++
	if a.status != b.status {
		n.Status++
		if c.listing() {
			c.add(subject, obj, Difference{Category: CategoryWrite, Kind: KindStatus, What: a.verb(), A: a.place(), B: b.place(),
				Detail: fmt.Sprintf("status %d → %d", a.status, b.status)})
		}
	}
	same := a.req.key == b.req.key && a.reqDoc.same(b.reqDoc)
	if same && !a.reqDoc.bytesSame(b.reqDoc) {
		n.BytesOnly++
	}
	if !same {
		n.Changed++
	}
	if op == opReordered {
		n.Reordered++
		if c.listing() {
			d := Difference{Category: CategoryWrite, Kind: KindReordered, What: a.verb(), A: a.place(), B: b.place()}
			if !same {
				d.Detail = "and changed"
				d.Diff = c.writeDiff(a, b)
			}
			c.add(subject, obj, d)
		}
		return
	}
	if !same && c.listing() {
		c.add(subject, obj, Difference{Category: CategoryWrite, Kind: KindChanged, What: a.verb(), A: a.place(), B: b.place(),
			Diff: c.writeDiff(a, b), Detail: noteOf(a.reqDoc, b.reqDoc)})
	}
}

// verb is what pairs writes of one object: the method, and for a PATCH
// its kind (a JSON patch and a server-side apply are different writes).
func (e *exch) verb() string {
	if e.req.method != "PATCH" {
		return e.req.method
	}
	switch e.req.ctype {
	case "application/json-patch+json":
		return "PATCH (json)"
	case "application/merge-patch+json":
		return "PATCH (merge)"
	case "application/strategic-merge-patch+json":
		return "PATCH (strategic)"
	case "application/apply-patch+yaml", "application/apply-patch+cbor":
		return "PATCH (apply)"
	}
	return "PATCH"
}

func firstNonNil(a, b *exch) *exch {
	if a != nil {
		return a
	}
	return b
}

// validObject: a write to a resource path (not /version or the like).
func (o Object) validObject() bool { return o.Resource != "" }

// noteOf says why bodies were compared byte for byte, if they were.
func noteOf(a, b digest) string {
	switch {
	case a.note != "":
		return "a: " + a.note
	case b.note != "":
		return "b: " + b.note
	}
	return ""
}

func (e *exch) place() *Place {
	return &Place{Exchange: e.id, Request: e.req.method + " " + e.target, Index: e.index, Time: fmtTime(e.time), Status: e.status}
}

// writeDiff is the unified diff of two writes: their request line (method,
// path and the parameters that do not vary from run to run) and their
// normalized bodies.
func (c *comparer) writeDiff(a, b *exch) string {
	ta := c.docText(c.a, a, formats.ClientToServer)
	tb := c.docText(c.b, b, formats.ClientToServer)
	return unified(append([]byte(a.req.key+"\n"), ta...), append([]byte(b.req.key+"\n"), tb...),
		fmt.Sprintf("%s exchange %d", nameOr(c.a.name, "a"), a.id), fmt.Sprintf("%s exchange %d", nameOr(c.b.name, "b"), b.id))
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// docText is the text a body shows in a unified diff: its normalized
// document rendered one value per line, or its bytes if it is text but
// no JSON, or a line naming its size.
func (c *comparer) docText(s *side, e *exch, dir formats.Direction) []byte {
	body, err := c.readBody(s, e.id, dir)
	if err != nil {
		return []byte(fmt.Sprintf("(body not read: %v)\n", err))
	}
	if len(body) == 0 {
		return []byte("(no body)\n")
	}
	ctype, cenc := e.req.ctype, e.req.cenc
	if dir == formats.ServerToClient {
		ctype, cenc = responseMedia(s.f.Exchange(e.id))
	}
	return c.textOf(body, ctype, cenc)
}

// textOf renders a document (see docText).
func (c *comparer) textOf(body []byte, ctype, cenc string) []byte {
	if doc, _ := c.document(body, ctype, cenc); doc != nil {
		if t, err := c.rules.tree(doc); err == nil {
			return render(t)
		}
	}
	if utf8.Valid(body) && !hasControl(body) {
		if body[len(body)-1] != '\n' {
			body = append(body[:len(body):len(body)], '\n')
		}
		return body
	}
	return []byte(fmt.Sprintf("(%d bytes that are not text)\n", len(body)))
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return true
		}
	}
	return false
}
