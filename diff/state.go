package diff

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/wtrace/wtrace/formats"
)

// The end state. Of every object the clients of a session wrote (its
// writes of every subresource together; an Event by its identity), its
// state at the end of the session: deleted, if its last successful write
// was a DELETE, or if a DELETE of its collection (its resource in its
// namespace, or in all, without selectors) succeeded after it; else the object as the apiserver answered that write
// (normalized, generated names read as their canonical names); for an
// Event, how many times it happened (the sum of the last count of each
// Event object with that identity). It is the most robust verdict: what
// the controller made of the world, whatever path its writes took.

// State names what became of an object in one session.
type State string

const (
	StateCreated State = "created" // created (and maybe changed since)
	StateChanged State = "changed" // written, not created
	StateDeleted State = "deleted" // its last successful write deleted it
)

// ObjectState is one object's end state in both sessions (Report.States).
type ObjectState struct {
	Subject string    `json:"subject"`
	Object  Object    `json:"object"`
	A       *EndState `json:"a,omitempty"` // nil: not written in A (successfully)
	B       *EndState `json:"b,omitempty"`
	Same    bool      `json:"same"`
	// Excused says why a difference of a comparison with a perturbed run
	// is the perturbation's (Same is then true).
	Excused string `json:"excused,omitempty"`
}

// EndState is an object's end state in one session.
type EndState struct {
	State State `json:"state"`
	// Writes counts its successful writes; Attempts its failed ones.
	Writes   int `json:"writes"`
	Attempts int `json:"attempts,omitempty"`
	// Count is an Event's count.
	Count int64 `json:"count,omitempty"`
	// Last is its last successful write.
	Last *Place `json:"last"`
}

// objState is an object's end state in one session, as compared.
type objState struct {
	obj      Object
	last     *exch // the last successful write (or DELETE of its collection)
	created  bool
	writes   int
	attempts int
	count    int64
	counts   map[string]int64 // an Event's: the last count per Event name
}

func (o *objState) state() State {
	switch {
	case o.last.req.method == "DELETE" && o.obj.Event == "":
		return StateDeleted
	case o.created:
		return StateCreated
	}
	return StateChanged
}

// states gathers the end states of a side's written objects, in the order
// of their first write; objects with failed attempts only have none.
func (s *side) states() (map[Object]*objState, []Object) {
	m := map[Object]*objState{}
	var order []Object
	var all []*exch
	for _, o := range s.wOrder {
		all = append(all, s.writes[o]...)
	}
	slices.SortFunc(all, func(x, y *exch) int { return cmp.Compare(x.id, y.id) })
	for _, e := range all {
		if !e.hasObj || !e.obj.validObject() || (e.obj.Name == "" && e.obj.Event == "") {
			if e.req.method == "DELETE" && !e.failed() && e.hasObj && e.obj.Subresource == "" && e.req.label == "" && e.req.field == "" {
				for _, o := range order { // a DELETE of a collection: all of it, without selectors
					if st := m[o]; st.last != nil && o.Event == "" && o.Group == e.obj.Group && o.Resource == e.obj.Resource &&
						(e.obj.Namespace == "" || o.Namespace == e.obj.Namespace) {
						st.last = e
					}
				}
			}
			continue // a collection (DELETE of many, a create without a name)
		}
		b := e.base()
		st := m[b]
		if st == nil {
			st = &objState{obj: b}
		}
		if e.failed() {
			st.attempts++
			if m[b] == nil {
				m[b] = st
				order = append(order, b)
			}
			continue
		}
		if m[b] == nil {
			m[b] = st
			order = append(order, b)
		}
		st.writes++
		st.last = e
		if e.req.method == "POST" && e.obj.Subresource == "" {
			st.created = true
		}
		if e.kev != nil && b.Event != "" {
			if st.counts == nil {
				st.counts = map[string]int64{}
			}
			if e.kev.hasCount || e.req.method == "POST" {
				st.counts[e.kev.name] = e.kev.count
			}
			st.count = 0
			for _, n := range st.counts {
				st.count += n
			}
		}
	}
	out := order[:0]
	for _, o := range order {
		if m[o].last != nil {
			out = append(out, o)
		} else {
			delete(m, o)
		}
	}
	return m, out
}

func (o *objState) end() *EndState {
	if o == nil {
		return nil
	}
	return &EndState{State: o.state(), Writes: o.writes, Attempts: o.attempts, Count: o.count, Last: o.last.place()}
}

// compareState compares the end state of every object either session
// wrote, in A's order then B's, and lists every object in Report.States.
func (c *comparer) compareState() {
	ma, oa := c.a.states()
	mb, ob := c.b.states()
	n := &c.rep.Summary.State
	c.rep.States = []ObjectState{}
	for _, o := range union(oa, ma, ob) {
		x, y := ma[o], mb[o]
		os := ObjectState{Subject: o.String(), Object: o, A: x.end(), B: y.end()}
		if (x == nil) != (y == nil) {
			if z := cmp.Or(x, y); z.created && z.state() == StateDeleted {
				if c.madeAndGone == nil {
					c.madeAndGone = map[Object]bool{}
				}
				c.madeAndGone[o] = true
			}
		}
		switch {
		case y == nil:
			n.Missing++
			if c.listing() {
				c.add(os.Subject, &o, Difference{Category: CategoryState, Kind: KindMissing, What: string(x.state()), A: x.last.place(),
					Detail: string(x.state()) + " in a: " + x.words()})
			}
		case x == nil:
			n.Extra++
			if c.listing() {
				c.add(os.Subject, &o, Difference{Category: CategoryState, Kind: KindExtra, What: string(y.state()), B: y.last.place(),
					Detail: string(y.state()) + " in b: " + y.words()})
			}
		default:
			n.Compared++
			os.Same = c.sameState(x, y)
			if os.Same {
				if o.Event == "" && x.state() != StateDeleted && !x.last.resDoc.bytesSame(y.last.resDoc) {
					n.BytesOnly++
				}
				break
			}
			n.Changed++
			if c.listing() {
				d := Difference{Category: CategoryState, Kind: KindChanged, A: x.last.place(), B: y.last.place()}
				switch {
				case o.Event != "":
					d.Detail = fmt.Sprintf("happened %s in a, %s in b", countText(x.count), countText(y.count))
				case x.state() == StateDeleted || y.state() == StateDeleted:
					d.Detail = fmt.Sprintf("%s in a, %s in b", x.state(), y.state())
				default:
					if x.state() != y.state() {
						d.Detail = fmt.Sprintf("%s in a, %s in b", x.state(), y.state())
					}
					d.Diff = unified(c.docText(c.a, x.last, formats.ServerToClient), c.docText(c.b, y.last, formats.ServerToClient),
						fmt.Sprintf("%s exchange %d (response)", nameOr(c.a.name, "a"), x.last.id),
						fmt.Sprintf("%s exchange %d (response)", nameOr(c.b.name, "b"), y.last.id))
					d.Detail = joinNote(d.Detail, noteOf(x.last.resDoc, y.last.resDoc))
				}
				c.add(os.Subject, &o, d)
			}
		}
		c.rep.States = append(c.rep.States, os)
	}
}

// sameState: both deleted; or neither, and the objects the apiserver
// answered their last writes with the same; for an Event, the same count.
func (c *comparer) sameState(x, y *objState) bool {
	if x.obj.Event != "" {
		return x.count == y.count
	}
	dx, dy := x.state() == StateDeleted, y.state() == StateDeleted
	if dx || dy {
		return dx && dy
	}
	return x.last.resDoc.same(y.last.resDoc)
}

// words says an object's end state for a missing or extra one: how it
// came to be, in how many writes.
func (o *objState) words() string {
	s := plural(o.writes, "write")
	if o.attempts > 0 {
		s += ", " + plural(o.attempts, "failed attempt")
	}
	if o.obj.Event != "" {
		s = "happened " + countText(o.count) + "; " + s
	}
	return s
}
