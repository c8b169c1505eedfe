package diff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// compareStreams pairs the watch streams of each scope (resource, path
// and selectors), in the order they began, and compares each pair.
func (c *comparer) compareStreams() error {
	keys := union(c.a.sOrder, c.a.streams, c.b.sOrder)
	n := &c.rep.Summary.Streams
	for _, k := range keys {
		ca, cb := c.a.streams[k], c.b.streams[k]
		for i := 0; i < max(len(ca), len(cb)); i++ {
			switch {
			case i >= len(cb):
				if c.wants(CategoryStream) {
					n.Missing++
					if c.listing() {
						c.add(ca[i].req.scope(), nil, Difference{Category: CategoryStream, Kind: KindMissing, Stream: ca[i].req.scope(),
							A: ca[i].place(c.a), Count: int(ca[i].events), Detail: plural(int(ca[i].events), "event")})
					}
				}
			case i >= len(ca):
				if c.wants(CategoryStream) {
					n.Extra++
					if c.listing() {
						c.add(cb[i].req.scope(), nil, Difference{Category: CategoryStream, Kind: KindExtra, Stream: cb[i].req.scope(),
							B: cb[i].place(c.b), Count: int(cb[i].events), Detail: plural(int(cb[i].events), "event")})
					}
				}
			default:
				if err := c.compareChains(ca[i], cb[i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (ch *chain) place(s *side) *Place {
	p := &Place{Exchange: ch.ids[0], Time: fmtTime(ch.start)}
	if x := s.f.Exchange(ch.ids[0]); x != nil && !x.Request.Missing {
		p.Request = x.Request.Method + " " + x.Request.Target
	}
	return p
}

// streamPair is the state of the comparison of two chains.
type streamPair struct {
	x, y   *chain
	scope  string
	timing int
	worst  int64 // B − A offset of the event furthest off
	wa, wb *Place
}

func (c *comparer) compareChains(x, y *chain) error {
	n := &c.rep.Summary.Streams
	n.Compared++
	sp := &streamPair{x: x, y: y, scope: x.req.scope()}
	if c.wants(CategoryStream) && !sameSet(x.statuses, y.statuses) {
		n.Status++
		if c.listing() {
			c.add(sp.scope, nil, Difference{Category: CategoryStream, Kind: KindStatus, Stream: sp.scope, A: x.place(c.a), B: y.place(c.b),
				Detail: "statuses " + statusList(x.statuses) + " → " + statusList(y.statuses)})
		}
	}
	if !c.wants(CategoryEvent) {
		return nil
	}
	ea, eb := c.events(c.a, x), c.events(c.b, y)
	al := &aligner[*event]{
		nextA:  ea.next,
		nextB:  eb.next,
		key:    c.eventKey,
		same:   c.sameIdentity,
		size:   func(e *event) int64 { return int64(len(e.data)) },
		window: c.window,
		limbo:  c.window,
		budget: c.windowBytes,
		emit: func(op opKind, a, b *event) error {
			c.eventPair(sp, op, a, b)
			return nil
		},
	}
	if err := al.run(); err != nil {
		return err
	}
	if sp.timing > 0 {
		c.rep.Summary.Streams.Timing++
		if c.listing() {
			c.add(sp.scope, nil, Difference{Category: CategoryStream, Kind: KindTiming, Stream: sp.scope, A: sp.wa, B: sp.wb,
				Count: sp.timing, Delta: sp.worst,
				Detail: fmt.Sprintf("%s beyond ±%v; furthest off: %s %s, by %s", plural(sp.timing, "event"), c.tolerance,
					sp.wa.what, sp.wa.Name, fmtDelta(sp.worst))})
		}
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func fmtDelta(ns int64) string {
	d := time.Duration(ns).Round(time.Millisecond)
	if ns >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}

func statusList(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
		if v == 0 {
			parts[i] = "none"
		}
	}
	return strings.Join(parts, ", ")
}

// event is one watch event of a stream being compared. It owns data.
type event struct {
	ex, seq, time int64
	start         int64 // its stream's start
	index         int   // position in its stream
	format        frame.Format
	data          []byte
	meta          frame.Meta
	peeked        bool
	key           string
	keyed         bool
	norm          uint64 // canonical hash of the object (eventHash)
	normErr       error
	normDone      bool
	names         *names // its session's generated names
}

// eventSource reads the events of one chain in order.
type eventSource struct {
	c       *comparer
	s       *side
	ch      *chain
	sc      *formats.Scanner
	formats map[int64]frame.Format
	index   int
}

func (c *comparer) events(s *side, ch *chain) *eventSource {
	es := &eventSource{c: c, s: s, ch: ch, sc: s.f.ExchangeRecords(ch.ids...), formats: map[int64]frame.Format{}}
	for _, id := range ch.ids {
		if x := s.f.Exchange(id); x != nil && x.Response != nil {
			es.formats[id] = x.Response.Events
		}
	}
	return es
}

func (es *eventSource) next() (*event, bool, error) {
	for {
		rec, err := es.sc.NextIntact(func(de *formats.DamageError) { es.c.warn("%s: %v", es.s.name, de) })
		if err == io.EOF {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("diff: reading %s: %w", es.s.name, err)
		}
		fr, ok := rec.(*formats.Frame)
		if !ok {
			continue
		}
		e := &event{ex: fr.Exchange, seq: fr.Seq, time: fr.Time, start: es.ch.start, index: es.index, format: es.formats[fr.Exchange], data: fr.Data, names: es.s.names}
		es.index++
		return e, true, nil
	}
}

// peek reads an event's metadata once.
func (e *event) peek() frame.Meta {
	if !e.peeked {
		e.meta, _ = frame.Peek(e.format, e.data)
		e.peeked = true
	}
	return e.meta
}

// eventKey is an event's identity: its type and its object's kind,
// namespace and name; an ERROR's Status code and reason; for an event
// that does not parse, its bytes.
func (c *comparer) eventKey(e *event) string {
	if e.keyed {
		return e.key
	}
	m := e.peek()
	switch {
	case m.Type == "":
		e.key = "?" + string(e.data)
	case m.Type == "ERROR":
		e.key = fmt.Sprintf("ERROR %d %s", m.Code, m.Reason)
	default:
		e.key = m.Type + " " + m.Kind + " " + m.Namespace + "/" + e.names.canonString(m.Name)
	}
	e.keyed = true
	return e.key
}

// sameIdentity is the aligner's fast path: two events are the same item
// if their bytes are equal or, unless ignore paths could hide their
// names, their types and normalized objects are (the built-in rules keep
// kind, namespace and name), without peeking at their identities.
func (c *comparer) sameIdentity(a, b *event) bool {
	if bytes.Equal(a.data, b.data) {
		return true
	}
	if len(c.rules.paths) > 0 {
		return false
	}
	ta, okA := frame.PeekType(a.format, a.data)
	tb, okB := frame.PeekType(b.format, b.data)
	if !okA || !okB || !bytes.Equal(ta, tb) {
		return false
	}
	ha, errA := c.eventHash(a)
	hb, errB := c.eventHash(b)
	return errA == nil && errB == nil && ha == hb
}

// eventHash returns the canonical hash of an event's object, once.
func (c *comparer) eventHash(e *event) (uint64, error) {
	if e.normDone {
		return e.norm, e.normErr
	}
	e.normDone = true
	if !e.names.empty() {
		c.hasher.names = e.names
		defer func() { c.hasher.names = nil }()
	}
	if e.format == frame.JSON && int64(len(e.data)) <= c.maxBody {
		var found bool
		e.norm, found, e.normErr = c.hasher.sumMember(e.data, "object")
		if e.normErr == nil && !found {
			e.normErr = errors.New("json event without an object")
		}
		return e.norm, e.normErr
	}
	doc, err := c.eventDoc(e)
	if err != nil {
		e.normErr = err
		return 0, err
	}
	e.norm, e.normErr = c.hasher.sum(doc)
	return e.norm, e.normErr
}

// eventDoc returns the JSON text of an event's object (transcoded from
// protobuf), or why there is none.
func (c *comparer) eventDoc(e *event) ([]byte, error) {
	if int64(len(e.data)) > c.maxBody {
		return nil, fmt.Errorf("an event of %d bytes, larger than the %d bytes diff normalizes", len(e.data), c.maxBody)
	}
	apiVersion, kind, obj, err := frame.EventObject(e.format, e.data)
	if err != nil {
		return nil, err
	}
	if e.format == frame.Protobuf {
		return protoObjectJSON(apiVersion, kind, obj)
	}
	return obj, nil
}

func (e *event) place(what string) *Place {
	m := e.peek()
	seq, off := e.seq, e.time-e.start
	p := &Place{Exchange: e.ex, Seq: &seq, Index: e.index, Time: fmtTime(e.time), Offset: &off, ResourceVersion: m.ResourceVersion, what: what}
	switch {
	case m.Namespace != "" && m.Name != "":
		p.Name = m.Namespace + "/" + m.Name
	case m.Name != "":
		p.Name = m.Name
	}
	return p
}

// canonName is an event's object's name, generated names read as their
// canonical names.
func (e *event) canonName() string { return e.names.canonString(e.peek().Name) }

// subject is the object an event is about, or its stream for an event
// without a name (BOOKMARK, ERROR).
func (c *comparer) eventSubject(sp *streamPair, e *event) (string, *Object) {
	m := e.peek()
	if m.Name == "" || !sp.x.req.resource {
		return sp.scope, nil
	}
	o := Object{Group: sp.x.req.obj.Group, Resource: sp.x.req.obj.Resource, Namespace: m.Namespace, Name: e.canonName()}
	return o.String(), &o
}

func (c *comparer) eventPair(sp *streamPair, op opKind, a, b *event) {
	n := &c.rep.Summary.Events
	switch op {
	case opMissing:
		n.Missing++
		if c.listing() {
			s, o := c.eventSubject(sp, a)
			c.add(s, o, Difference{Category: CategoryEvent, Kind: KindMissing, What: a.peek().Type, Stream: sp.scope, A: a.place("")})
		}
		return
	case opExtra:
		n.Extra++
		if c.listing() {
			s, o := c.eventSubject(sp, b)
			c.add(s, o, Difference{Category: CategoryEvent, Kind: KindExtra, What: b.peek().Type, Stream: sp.scope, B: b.place("")})
		}
		return
	}
	n.Compared++
	// Timing: each stream's events on a timeline from its start.
	if c.tolerance > 0 {
		d := (b.time - b.start) - (a.time - a.start)
		if d > int64(c.tolerance) || -d > int64(c.tolerance) {
			n.Timing++
			sp.timing++
			if abs(d) > abs(sp.worst) || sp.wa == nil {
				sp.worst = d
				sp.wa, sp.wb = a.place(a.peek().Type), b.place(b.peek().Type)
			}
		}
	}
	same, diffText, note := c.sameEvents(a, b)
	if same && !bytes.Equal(a.data, b.data) {
		n.BytesOnly++
	}
	if !same {
		n.Changed++
	}
	if op == opReordered {
		n.Reordered++
		if c.listing() {
			s, o := c.eventSubject(sp, a)
			d := Difference{Category: CategoryEvent, Kind: KindReordered, What: a.peek().Type, Stream: sp.scope, A: a.place(""), B: b.place("")}
			if !same {
				d.Detail, d.Diff = joinNote("and changed", note), diffText()
			}
			c.add(s, o, d)
		}
	} else if !same && c.listing() {
		s, o := c.eventSubject(sp, a)
		c.add(s, o, Difference{Category: CategoryEvent, Kind: KindChanged, What: a.peek().Type, Stream: sp.scope,
			A: a.place(""), B: b.place(""), Detail: note, Diff: diffText()})
	}
	if c.opts.CompareRV && !bytes.Equal(a.data, b.data) && a.peek().ResourceVersion != b.peek().ResourceVersion {
		n.ResourceVersion++
		if c.listing() {
			s, o := c.eventSubject(sp, a)
			c.add(s, o, Difference{Category: CategoryEvent, Kind: KindResourceVersion, What: a.peek().Type, Stream: sp.scope,
				A: a.place(""), B: b.place(""), Detail: fmt.Sprintf("resourceVersion %s → %s", a.peek().ResourceVersion, b.peek().ResourceVersion)})
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// sameEvents compares two events with the same identity: byte for byte,
// then normalized. diff renders the unified diff of their objects (only
// called for a listed difference); note says why they were compared byte
// for byte, if they were.
func (c *comparer) sameEvents(a, b *event) (same bool, diff func() string, note string) {
	if bytes.Equal(a.data, b.data) {
		return true, nil, ""
	}
	nameA := fmt.Sprintf("%s exchange %d event %d", nameOr(c.a.name, "a"), a.ex, a.seq)
	nameB := fmt.Sprintf("%s exchange %d event %d", nameOr(c.b.name, "b"), b.ex, b.seq)
	ha, errA := c.eventHash(a)
	hb, errB := c.eventHash(b)
	if errA == nil && errB == nil {
		if ha == hb {
			return true, nil, ""
		}
		return false, func() string {
			da, errA := c.eventDoc(a)
			db, errB := c.eventDoc(b)
			if errA != nil || errB != nil {
				return unified(c.textOf(a.data, "", "", a.names), c.textOf(b.data, "", "", b.names), nameA, nameB)
			}
			return unified(c.textOf(da, "application/json", "", a.names), c.textOf(db, "application/json", "", b.names), nameA, nameB)
		}, ""
	}
	if errA != nil {
		note = "compared byte for byte: a: " + errA.Error()
	} else {
		note = "compared byte for byte: b: " + errB.Error()
	}
	return false, func() string {
		return unified(c.textOf(a.data, "", "", a.names), c.textOf(b.data, "", "", b.names), nameA, nameB)
	}, note
}
