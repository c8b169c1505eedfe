package diff

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wtrace/wtrace/formats"
)

// compareWrites compares the writes of each object (resource, namespace,
// name, subresource; an Event by its identity): the sequence of its
// successful writes in A with B's, aligned as an edit script (an
// inserted or a missing write is one difference, not a shift of every
// later pair; a write with the same verb in both places but another
// request, body or status is one changed write: seqalign.go). Failed attempts (no
// answer, or anything but a 2xx: exch.failed) are left out and counted in
// Counts.Attempts; where an object's successful writes differ, its first
// listed difference says how its failed attempts differ too.
func (c *comparer) compareWrites() error {
	objs := union(c.a.wOrder, c.a.writes, c.b.wOrder)
	n := &c.rep.Summary.Writes
	for _, o := range objs {
		sa, fa := splitFailed(c.a.writes[o])
		sb, fb := splitFailed(c.b.writes[o])
		n.Attempts += len(fa) + len(fb)
		c.rep.Attempts.A += len(fa)
		c.rep.Attempts.B += len(fb)
		if c.opts.CollapseRepeats {
			sa, sb = c.firsts(sa), c.firsts(sb)
		} else {
			sa, sb = c.unrepeated(sa), c.unrepeated(sb)
		}
		note := attemptsNote(fa, fb)
		steps := alignWrites(sa, sb, c.window)
		var between []bool
		if o.Subresource == "status" {
			between = intermediate(steps)
		}
		for k, st := range steps {
			if between != nil && between[k] {
				n.Coalesced++
				continue
			}
			var a, b *exch
			if st.i >= 0 {
				a = sa[st.i]
			}
			if st.j >= 0 {
				b = sb[st.j]
			}
			if c.writePair(o, st.op, a, b, note) {
				note = ""
			}
		}
	}
	return nil
}

// intermediate marks the steps of a status subresource's alignment that
// are a report one session made and the other did not, between reports
// both made: a missing or an extra write whose session's next write of
// the object is the same in both (wMatch). A controller writes the
// status it observes, and how many intermediate states it observes
// depends on how its informers' events were coalesced (the DaemonSet
// controller reports 1 of 2 Pods scheduled when its cache has seen one of
// the two it created at once, or 2 when it has seen both); the state both
// reach next, and the end state, are what it did. A status report
// missing at the end, or before a write that differs, stays a difference.
func intermediate(steps []wstep) []bool {
	out := make([]bool, len(steps))
	for k, st := range steps {
		if st.op != wMissing && st.op != wExtra {
			continue
		}
		for m := k + 1; m < len(steps); m++ {
			next := steps[m]
			if st.op == wMissing && next.i < 0 || st.op == wExtra && next.j < 0 {
				continue // the other session's
			}
			out[k] = next.op == wMatch
			break
		}
	}
	return out
}

// splitFailed returns an object's successful writes and its failed
// attempts, each in order.
func splitFailed(ws []*exch) (ok, failed []*exch) {
	for _, e := range ws {
		if e.failed() {
			failed = append(failed, e)
		} else {
			ok = append(ok, e)
		}
	}
	return ok, failed
}

// attemptsNote says how two sessions' failed attempts at an object
// differ ("" when they do not: same number, same statuses).
func attemptsNote(fa, fb []*exch) string {
	list := func(fs []*exch) string {
		if len(fs) == 0 {
			return "none"
		}
		parts := make([]string, len(fs))
		for i, e := range fs {
			parts[i] = e.verb() + " " + strconv.Itoa(e.status)
			if e.status == 0 {
				parts[i] = e.verb() + " unanswered"
			}
		}
		return strings.Join(parts, ", ")
	}
	la, lb := list(fa), list(fb)
	if la == lb {
		return ""
	}
	return "failed attempts: a " + la + "; b " + lb
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

// unrepeated returns the successful writes of one object without those
// that repeat the write just before them (same verb, request, normalized
// body and status): such a write leaves the object as it was — a client
// that wrote again what it had written, after a conflict or a stale
// read. They are counted in Summary.Writes.Repeats.
func (c *comparer) unrepeated(ws []*exch) []*exch {
	out := ws[:0:0]
	for i, e := range ws {
		if i > 0 && sameWrite(ws[i-1], e) {
			c.rep.Summary.Writes.Repeats++
			continue
		}
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

// writePair counts (and lists) one step of an object's write alignment;
// note, if not "", is added to the first difference listed. It reports
// whether it listed one.
func (c *comparer) writePair(o Object, op writeOp, a, b *exch, note string) bool {
	n := &c.rep.Summary.Writes
	subject := o.String()
	if !o.validObject() {
		subject = c.exchSubject(firstNonNil(a, b))
	}
	obj := &o
	if !o.validObject() {
		obj = nil
	}
	list := func(d Difference) bool {
		if !c.listing() {
			return false
		}
		d.Detail = joinNote(d.Detail, note)
		c.add(subject, obj, d)
		return true
	}
	switch op {
	case wMissing:
		n.Missing++
		return list(Difference{Category: CategoryWrite, Kind: KindMissing, What: a.verb(), A: a.place()})
	case wExtra:
		n.Extra++
		return list(Difference{Category: CategoryWrite, Kind: KindExtra, What: b.verb(), B: b.place()})
	}
	n.Compared++
	same := a.req.key == b.req.key && a.reqDoc.same(b.reqDoc)
	if same && !a.reqDoc.bytesSame(b.reqDoc) {
		n.BytesOnly++
	}
	switch op {
	case wReordered:
		n.Reordered++
		return list(Difference{Category: CategoryWrite, Kind: KindReordered, What: a.verb(), A: a.place(), B: b.place()})
	case wMatch:
		return false
	}
	// wChanged: the same verb, another request, body or status.
	if a.status != b.status {
		n.Status++
		d := Difference{Category: CategoryWrite, Kind: KindStatus, What: a.verb(), A: a.place(), B: b.place(),
			Detail: fmt.Sprintf("status %d → %d", a.status, b.status)}
		if same {
			return list(d)
		}
		d.Diff, d.Detail = c.writeDiff(a, b), joinNote(d.Detail, noteOf(a.reqDoc, b.reqDoc))
		n.Changed++
		return list(d)
	}
	n.Changed++
	return list(Difference{Category: CategoryWrite, Kind: KindChanged, What: a.verb(), A: a.place(), B: b.place(),
		Diff: c.writeDiff(a, b), Detail: noteOf(a.reqDoc, b.reqDoc)})
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
	return c.textOf(body, ctype, cenc, s.names)
}

// textOf renders a document (see docText), generated names read through
// n.
func (c *comparer) textOf(body []byte, ctype, cenc string, n *names) []byte {
	if doc, _ := c.document(body, ctype, cenc); doc != nil {
		if t, err := c.rules.tree(doc, n); err == nil {
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
