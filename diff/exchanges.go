package diff

import (
	"fmt"

	"github.com/wtrace/wtrace/formats"
)

// compareExchanges pairs the other exchanges (LISTs, GETs, discovery) by
// request key, in order, and compares their statuses and response bodies.
func (c *comparer) compareExchanges() error {
	keys := union(c.a.oOrder, c.a.others, c.b.oOrder)
	n := &c.rep.Summary.Exchanges
	for _, k := range keys {
		xa, xb := c.a.others[k], c.b.others[k]
		for i := 0; i < max(len(xa), len(xb)); i++ {
			switch {
			case i >= len(xb):
				n.Missing++
				if c.listing() {
					c.addExch(xa[i], Difference{Category: CategoryExchange, Kind: KindMissing, What: xa[i].req.method, A: xa[i].place()})
				}
			case i >= len(xa):
				n.Extra++
				if c.listing() {
					c.addExch(xb[i], Difference{Category: CategoryExchange, Kind: KindExtra, What: xb[i].req.method, B: xb[i].place()})
				}
			default:
				c.exchPair(xa[i], xb[i])
			}
		}
	}
	return nil
}

func (c *comparer) exchPair(a, b *exch) {
	n := &c.rep.Summary.Exchanges
	n.Compared++
	same := a.resDoc.same(b.resDoc)
	if same && !a.resDoc.bytesSame(b.resDoc) {
		n.BytesOnly++
	}
	// Another status is one difference, its body (a Status, most often)
	// shown with it; the same status with another body is another.
	d := Difference{Category: CategoryExchange, What: a.req.method, A: a.place(), B: b.place()}
	switch {
	case a.status != b.status:
		n.Status++
		d.Kind, d.Detail = KindStatus, fmt.Sprintf("status %d → %d", a.status, b.status)
	case !same:
		n.Changed++
		d.Kind, d.Detail = KindChanged, noteOf(a.resDoc, b.resDoc)
	default:
		return
	}
	if !c.listing() {
		return
	}
	if !same {
		d.Diff = unified(c.docText(c.a, a, formats.ServerToClient), c.docText(c.b, b, formats.ServerToClient),
			fmt.Sprintf("%s exchange %d (response)", nameOr(c.a.name, "a"), a.id), fmt.Sprintf("%s exchange %d (response)", nameOr(c.b.name, "b"), b.id))
		if d.Diff == "" {
			d.Detail = joinNote(d.Detail, "the bodies differ in bytes that do not show as text")
		}
	}
	c.add(c.exchSubject(a), c.exchObject(a), d)
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// addExch lists d under the subject of exchange e.
func (c *comparer) addExch(e *exch, d Difference) { c.add(c.exchSubject(e), c.exchObject(e), d) }

// exchSubject: the object a request names, or the request itself.
func (c *comparer) exchSubject(e *exch) string {
	if e.hasObj && e.obj.validObject() {
		return e.obj.String()
	}
	return e.req.key
}

func (c *comparer) exchObject(e *exch) *Object {
	if e.hasObj && e.obj.validObject() {
		o := e.obj
		return &o
	}
	return nil
}
