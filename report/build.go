package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Event types, as the events' type column numbers them.
var typeCodes = map[string]uint8{"ADDED": 0, "MODIFIED": 1, "DELETED": 2, "BOOKMARK": 3, "ERROR": 4}

// typeOther is the code of an event whose type could not be read.
const typeOther = 5

// Flags of an event (the events' flags column).
const (
	evCaused   = 1 // caused by a write of the client under test
	evRedacted = 2 // redaction replaced values in it
	evCut      = 4 // its bytes were cut to Options.MaxBodySize in the page
	evLeft     = 8 // its bytes were left out of the page (Options.MaxBodyBytes)
)

// Flags of a request (the requests' flags column).
const (
	rqWrite  = 1 // POST, PUT, PATCH, DELETE
	rqTested = 2 // made by the client under test
	rqCut    = 4 // its response did not end complete
	rqFailed = 8 // answered 4xx, 5xx, or not at all
)

// endSlack: a watch whose body ended this close to the session's last
// record ended with the recording, not by what the server did.
const endSlack = int64(time.Second)

// maxHeld bounds the bytes of the bodies still open held at once (their
// first bytes, to be shown or peeked): thousands of pipelined requests
// left unanswered cost no more. Past it, a body is shown as far as it was
// held.
const maxHeld = 64 << 20

// maxAnomalies bounds the anomalies the page lists and marks (the
// first, by time); the rest are counted (session.AnomaliesLeft).
const maxAnomalies = 10000

// maxPeek bounds the response body of a write read for the resourceVersion
// it answered: metadata comes first in what the apiserver writes.
const maxPeek = 1 << 20

// ev is one event mark while the session is read.
type ev struct {
	lane  int32
	typ   uint8
	flags uint8
	name  int32
	t     int64 // ns
	seq   int64
	item  int32 // store item + 1, 0 none
	jitem int32 // store item + 1 of its JSON (a protobuf or CBOR event), 0 none
	rv    uint64
}

// rq is one request mark.
type rq struct {
	lane   int32
	method int32
	flags  uint8
	status int32
	name   int32 // the object its path names (-1: none)
	t, end int64 // ns
	ex     int64
}

// write is a write's answer: which object it changed and at which
// resourceVersion, to tell the events it caused.
type write struct {
	key    string // resource, namespace, name
	delete bool
	t      int64
	rv     uint64
	tested bool
}

// bodyBuf gathers the first bytes of one direction of an exchange's body.
type bodyBuf struct {
	buf  bytes.Buffer
	size int64
	keep int // how many bytes to keep
}

// builder reads one session into its page model.
type builder struct {
	f      *formats.File
	idx    *formats.Index
	opts   Options
	st     *store
	s      *session
	start  int64
	exs    []export.Exchange
	conns  map[uint64]*export.Conn
	exLane map[int64]int // an exchange's lane
	laneOf map[string]int
	names  map[string]int32
	meth   map[string]int32
	events []ev
	reqs   []rq
	writes []write
	bodies map[[2]int64]*bodyBuf // exchange, direction
	peek   map[int64]*bodyBuf    // a write's response body, for its resourceVersion
	refs   map[[2]int64]*bodyRef
	// the budget of event and body bytes (Options.MaxBodyBytes), shared
	// in proportion to what each exchange holds: ratio is budget/total.
	ratio    float64
	seen     map[int64]int64
	embedded map[int64]int64
	perSec   map[int64]int64
	held     int64 // bytes held in bodies and peek
	tested   func(ua, addr string) bool
	lastT    int64
	json     *codec.Writer
}

func newBuilder(f *formats.File, name string, st *store, opts Options) *builder {
	idx := f.Index()
	b := &builder{
		f: f, idx: idx, opts: opts, st: st,
		conns:  map[uint64]*export.Conn{},
		exLane: map[int64]int{},
		laneOf: map[string]int{},
		names:  map[string]int32{},
		meth:   map[string]int32{},
		bodies: map[[2]int64]*bodyBuf{},
		peek:   map[int64]*bodyBuf{},
		refs:   map[[2]int64]*bodyRef{},
		seen:   map[int64]int64{}, embedded: map[int64]int64{},
		perSec: map[int64]int64{},
		json:   jsonWriter(),
	}
	b.s = &session{Name: name, Clean: f.Clean(), Groups: []group{}, Lanes: []*lane{}, Names: []string{}, Anomalies: []mark{}}
	b.tested, b.s.ClientRule = opts.clientRule(idx.Meta)
	return b
}

// build reads the session: its index and notes (export.NewSession, one
// pass), then its records (a second pass), writing what a click shows to
// the store as it goes.
func (b *builder) build() (*session, error) {
	es := export.NewSession(b.f)
	b.s.Meta, b.s.Summary, b.s.Problems = es.Meta, es.Summary, es.Problems
	b.exs = es.Exchanges
	for i := range es.Conns {
		b.conns[es.Conns[i].ConnID] = &es.Conns[i]
	}
	b.start = sessionStart(b.idx)
	b.lanes()
	var total int64
	for _, x := range b.idx.Exchanges {
		total += x.BodyBytes
		if x.RequestEnd != nil {
			total += x.RequestEnd.Size
		}
	}
	b.ratio = 1
	if total > b.opts.maxBodyBytes() {
		b.ratio = float64(b.opts.maxBodyBytes()) / float64(total)
	}
	if err := b.records(); err != nil {
		return nil, err
	}
	b.finish()
	return b.s, nil
}

// sessionStart is the earliest time of the session's exchanges, or of its
// blocks (0: time 0 is the epoch).
func sessionStart(idx *formats.Index) int64 {
	var t int64
	low := func(v int64) {
		if v != 0 && (t == 0 || v < t) {
			t = v
		}
	}
	for _, x := range idx.Exchanges {
		low(x.First)
		low(x.Request.Time)
	}
	if t == 0 {
		for _, bl := range idx.Blocks {
			low(bl.First)
		}
	}
	return t
}

// us is a time in µs since the session's start.
func (b *builder) us(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return (ns - b.start) / 1e3
}

// isWatch says whether an exchange is a watch: split into events, or a
// watch request.
func isWatch(x *formats.ExchangeInfo) bool {
	if x.Frames > 0 || (x.Response != nil && x.Response.Events != frame.Unknown) {
		return true
	}
	return !x.Request.Missing && apipath.IsWatch(x.Request.Method, x.Request.Target)
}

// resourceOf names the group of a request target: its resource (with its
// API group) and namespace, and the object it names.
func resourceOf(target string) (res, ns, name string, params string) {
	req, err := apipath.Parse("GET", target)
	if err != nil {
		return "", "", "", ""
	}
	r, ok := req.Resource, req.IsResource
	var ps []string
	for _, sp := range apipath.StableParams(req.Query) {
		ps = append(ps, sp.Name+"="+sp.Value)
	}
	params = strings.Join(ps, "&")
	if !ok {
		return "", "", "", params
	}
	res = r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	return res, r.Namespace, r.Name, params
}

// clientOf names an exchange's client: its User-Agent's product and its
// connection's address.
func (b *builder) clientOf(x *formats.ExchangeInfo) (label, ua, addr string) {
	for _, h := range x.Request.Header {
		if strings.EqualFold(h.Name, "User-Agent") {
			ua = h.Value
		}
	}
	if c := b.conns[x.Request.Conn]; c != nil {
		addr = c.Client
	}
	prod, _, _ := strings.Cut(ua, " ")
	prod, _, _ = strings.Cut(prod, "/")
	host := addr
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		host = addr[:i]
	}
	switch {
	case prod == "" && host == "":
		return "unknown client", ua, addr
	case prod == "":
		return host, ua, addr
	}
	return prod + " @ " + host, ua, addr
}

// lanes makes the groups and lanes: a lane per watch, and one per client
// for the other requests of a group, groups sorted by resource and
// namespace, watches in the order they began.
func (b *builder) lanes() {
	type pending struct {
		l     *lane
		x     *formats.ExchangeInfo
		res   string
		ns    string
		order int64
	}
	var ls []pending
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		res, ns, _, params := resourceOf(x.Request.Target)
		client, ua, addr := b.clientOf(x)
		tested := b.tested(ua, addr)
		if isWatch(x) {
			l := &lane{Kind: "watch", Exchange: x.Request.Exchange, Client: client, Tested: tested,
				From: b.us(cmp.Or(x.Request.Time, x.First)), To: b.us(x.Last)}
			if x.End != nil {
				l.To = b.us(max(x.End.Time, x.Last))
				l.End = x.End.Status.String()
			}
			if x.Response != nil {
				l.Status = x.Response.Status
			}
			l.Label = "watch"
			if params != "" {
				l.Label += " " + params
			}
			l.Label += fmt.Sprintf(" · #%d · %s", x.Request.Exchange, client)
			l.Title = x.Request.Method + " " + x.Request.Target
			if x.Request.Missing {
				l.Title = "a watch captured from its middle (no request)"
			}
			ls = append(ls, pending{l: l, x: x, res: res, ns: ns, order: x.Request.Exchange})
			continue
		}
		key := res + "\x00" + ns + "\x00" + client
		if _, ok := b.laneOf[key]; ok {
			continue
		}
		b.laneOf[key] = -1
		l := &lane{Kind: "requests", Exchange: -1, Client: client, Tested: tested, key: key,
			Label: "requests · " + client, Title: "the requests of " + client + " other than watches"}
		ls = append(ls, pending{l: l, res: res, ns: ns, order: 1 << 62})
	}
	slices.SortStableFunc(ls, func(p, q pending) int {
		return cmp.Or(cmp.Compare(b2i(p.res == ""), b2i(q.res == "")), strings.Compare(p.res, q.res), strings.Compare(p.ns, q.ns), cmp.Compare(p.order, q.order))
	})
	gi := map[string]int{}
	for _, p := range ls {
		gk := p.res + "\x00" + p.ns
		g, ok := gi[gk]
		if !ok {
			g = len(b.s.Groups)
			gi[gk] = g
			title := p.res
			switch {
			case p.res == "":
				title = "discovery and other paths"
			case p.ns != "":
				title += " -n " + p.ns
			}
			b.s.Groups = append(b.s.Groups, group{Resource: p.res, Namespace: p.ns, Title: title, Lanes: []int{}})
		}
		p.l.Group = g
		li := len(b.s.Lanes)
		b.s.Groups[g].Lanes = append(b.s.Groups[g].Lanes, li)
		b.s.Lanes = append(b.s.Lanes, p.l)
		if p.x != nil {
			b.exLane[p.x.Request.Exchange] = li
		} else {
			b.laneOf[p.l.key] = li
		}
	}
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if isWatch(x) {
			continue
		}
		res, ns, _, _ := resourceOf(x.Request.Target)
		client, _, _ := b.clientOf(x)
		b.exLane[x.Request.Exchange] = b.laneOf[res+"\x00"+ns+"\x00"+client]
	}
}

// records reads the session's records once, in file order.
func (b *builder) records() error {
	var err error
	lost := func(d *formats.DamageError) {
		b.s.Anomalies = append(b.s.Anomalies, mark{Lane: -1, T: b.us(b.lastT), Kind: "damage", Text: d.Error()})
	}
	for r, rerr := range b.f.Records().Intact(lost) {
		if rerr != nil {
			err = rerr
			break
		}
		switch r := r.(type) {
		case *formats.Frame:
			b.lastT = max(b.lastT, r.Time)
			b.frame(r)
		case *formats.Body:
			b.lastT = max(b.lastT, r.Time)
			b.body(r)
		case *formats.End:
			b.lastT = max(b.lastT, r.Time)
			b.end(r)
		}
	}
	// Bodies of exchanges the file ended in.
	for k := range b.bodies {
		b.flushBody(k[0], formats.Direction(k[1]))
	}
	if b.st.err != nil {
		return b.st.err
	}
	return err
}

func (b *builder) frame(fr *formats.Frame) {
	li, ok := b.exLane[fr.Exchange]
	if !ok {
		return
	}
	x := b.f.Exchange(fr.Exchange)
	format := frame.Unknown
	if x != nil && x.Response != nil {
		format = x.Response.Events
	}
	e := ev{lane: int32(li), t: fr.Time, seq: fr.Seq, typ: typeOther}
	m, err := peek(format, fr.Data)
	if err == nil {
		if c, ok := typeCodes[m.Type]; ok {
			e.typ = c
		}
		e.rv, _ = strconv.ParseUint(m.ResourceVersion, 10, 64)
		if m.Name != "" || m.Namespace != "" {
			e.name = b.name(m.Namespace, m.Name)
		} else {
			e.name = -1
		}
	} else {
		e.name = -1
	}
	if len(fr.Redacted) > 0 {
		e.flags |= evRedacted
	}
	if b.budget(fr.Exchange, int64(len(fr.Data))) {
		p := fr.Data
		if len(p) > b.opts.maxBodySize() {
			p = p[:b.opts.maxBodySize()]
			e.flags |= evCut
		}
		e.item = int32(b.st.add(p)) + 1
		b.st.in += int64(len(p))
		if format != frame.JSON && e.flags&evCut == 0 {
			if j := eventJSON(b.json, format, m.Type, fr.Data); j != nil {
				e.jitem = int32(b.st.add(j)) + 1
			}
		}
	} else {
		e.flags |= evLeft
		b.st.left += int64(len(fr.Data))
	}
	b.events = append(b.events, e)
	b.perSec[(fr.Time-b.start)/1e9]++
}

// peek reads an event's metadata as frame.Peek does, through
// frame.PeekEvent's one walk for JSON (a third of Peek's time on a long
// session): a Table's, whose row PeekEvent does not read, through Peek.
func peek(format frame.Format, data []byte) (frame.Meta, error) {
	if format != frame.JSON {
		return frame.Peek(format, data)
	}
	m, _, err := frame.PeekEvent(format, data)
	if err != nil || m.Kind == "Table" {
		return frame.Peek(format, data)
	}
	return m, nil
}

// budget says whether n more bytes of exchange ex are embedded: while what
// it embedded stays within its share of what it holds so far.
func (b *builder) budget(ex int64, n int64) bool {
	b.seen[ex] += n
	if b.ratio >= 1 {
		return true
	}
	if float64(b.embedded[ex]+n) <= b.ratio*float64(b.seen[ex])+1024 {
		b.embedded[ex] += n
		return true
	}
	return false
}

func (b *builder) name(ns, name string) int32 {
	k := name
	if ns != "" {
		k = ns + "/" + name
	}
	id, ok := b.names[k]
	if !ok {
		id = int32(len(b.s.Names))
		b.names[k] = id
		b.s.Names = append(b.s.Names, k)
	}
	return id
}

func (b *builder) body(r *formats.Body) {
	k := [2]int64{r.Exchange, int64(r.Dir)}
	bb := b.bodies[k]
	if bb == nil {
		bb = &bodyBuf{keep: b.opts.maxBodySize()}
		b.bodies[k] = bb
	}
	bb.size += int64(len(r.Data))
	b.hold(bb, r.Data)
	if r.Dir == formats.ServerToClient {
		if x := b.f.Exchange(r.Exchange); x != nil && apipath.IsWrite(x.Request.Method) {
			pb := b.peek[r.Exchange]
			if pb == nil {
				pb = &bodyBuf{keep: maxPeek}
				b.peek[r.Exchange] = pb
			}
			b.hold(pb, r.Data)
		}
	}
}

// hold keeps the first bytes of p a body buffer still wants, while the
// bodies held at once stay within maxHeld.
func (b *builder) hold(bb *bodyBuf, p []byte) {
	n := min(bb.keep-bb.buf.Len(), len(p), int(maxHeld-b.held))
	if n > 0 {
		bb.buf.Write(p[:n])
		b.held += int64(n)
	}
}

func (b *builder) end(e *formats.End) {
	b.flushBody(e.Exchange, e.Dir)
	if e.Dir == formats.ServerToClient {
		b.answered(e.Exchange)
	}
}

// flushBody stores what was kept of a body, within the budget.
func (b *builder) flushBody(ex int64, dir formats.Direction) {
	k := [2]int64{ex, int64(dir)}
	bb := b.bodies[k]
	if bb == nil {
		return
	}
	delete(b.bodies, k)
	b.held -= int64(bb.buf.Len())
	ref := &bodyRef{Item: -1, Size: bb.size}
	x := b.f.Exchange(ex)
	if x != nil {
		hs := x.Request.Header
		if dir == formats.ServerToClient && x.Response != nil {
			hs = x.Response.Header
			ref.Encoding = x.Response.Encoding
		}
		for _, h := range hs {
			if strings.EqualFold(h.Name, "Content-Type") {
				ref.Type = h.Value
			}
			if dir == formats.ClientToServer && strings.EqualFold(h.Name, "Content-Encoding") {
				ref.Encoding = h.Value
			}
		}
	}
	p := bb.buf.Bytes()
	if strings.EqualFold(ref.Encoding, "gzip") {
		if d, err := gunzip(p, b.opts.maxBodySize()); err == nil {
			p, ref.Decoded = d, "gzip"
		}
	}
	if b.budget(ex, bb.size) {
		ref.Item = b.st.add(p)
		ref.Shown = len(p)
		b.st.in += int64(len(p))
		if f := bodyFormat(p); f != frame.Unknown && ref.Shown == int(bb.size) && ref.Decoded == "" {
			if j := bodyJSON(b.json, f, p); j != nil {
				ref.JSON = b.st.add(j) + 1
			}
		}
	} else {
		b.st.left += bb.size
	}
	b.refs[k] = ref
}

// bodyFormat tells a whole protobuf body (the "k8s\x00" envelope) or CBOR
// one (the self-described tag) from others (frame.Unknown).
func bodyFormat(p []byte) frame.Format {
	switch {
	case bytes.HasPrefix(p, []byte("k8s\x00")):
		return frame.Protobuf
	case bytes.HasPrefix(p, []byte{0xd9, 0xd9, 0xf7}):
		return frame.CBOR
	}
	return frame.Unknown
}

// gunzip decodes the first max bytes of a gzip'd body (cut bodies decode
// as far as they go).
func gunzip(p []byte, max int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, io.LimitReader(zr, int64(max)))
	if out.Len() > 0 {
		return out.Bytes(), nil
	}
	return nil, err
}

// answered notes a write's answer: the object it changed, and the
// resourceVersion of the object the answer holds.
func (b *builder) answered(ex int64) {
	x := b.f.Exchange(ex)
	pb := b.peek[ex]
	delete(b.peek, ex)
	if pb != nil {
		b.held -= int64(pb.buf.Len())
	}
	if x == nil || x.Request.Missing || !apipath.IsWrite(x.Request.Method) || x.Response == nil || x.Response.Status/100 != 2 {
		return
	}
	res, ns, name, _ := resourceOf(x.Request.Target)
	w := write{t: x.Request.Time, delete: x.Request.Method == "DELETE"}
	if pb != nil {
		body := pb.buf.Bytes()
		if strings.EqualFold(x.Response.Encoding, "gzip") {
			body, _ = gunzip(body, maxPeek)
		}
		format := bodyFormat(body)
		if format == frame.Unknown {
			format = frame.JSON
		}
		if m, err := peekBody(format, body); err == nil {
			w.rv, _ = strconv.ParseUint(m.ResourceVersion, 10, 64)
			if name == "" {
				name = m.Name
			}
			if ns == "" {
				ns = m.Namespace
			}
		}
	}
	w.key = res + "\x00" + ns + "\x00" + name
	client, ua, addr := b.clientOf(x)
	_ = client
	w.tested = b.tested(ua, addr)
	b.writes = append(b.writes, w)
}

// finish sorts the marks, tells the events the client under test caused,
// and fills the columns, anomalies, statistics and details.
func (b *builder) finish() {
	s := b.s
	// Requests: every exchange that is not a watch.
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if isWatch(x) {
			continue
		}
		r := rq{lane: int32(b.exLane[x.Request.Exchange]), ex: x.Request.Exchange, t: cmp.Or(x.Request.Time, x.First), end: x.Last, name: -1}
		if _, ns, name, _ := resourceOf(x.Request.Target); name != "" {
			r.name = b.name(ns, name)
		}
		if x.End != nil {
			r.end = max(r.end, x.End.Time)
		}
		m := x.Request.Method
		if x.Request.Missing {
			m = "?"
		}
		id, ok := b.meth[m]
		if !ok {
			id = int32(len(s.Methods))
			b.meth[m] = id
			s.Methods = append(s.Methods, m)
		}
		r.method = id
		if apipath.IsWrite(m) {
			r.flags |= rqWrite
			s.Stats.Writes++
		}
		if s.Lanes[r.lane].Tested {
			r.flags |= rqTested
			if r.flags&rqWrite != 0 {
				s.Stats.TestedWrite++
			}
		}
		if x.Response != nil {
			r.status = int32(x.Response.Status)
		}
		if r.status == 0 || r.status >= 400 {
			r.flags |= rqFailed
		}
		if x.End == nil || x.End.Status != formats.EndComplete {
			r.flags |= rqCut
		}
		b.reqs = append(b.reqs, r)
	}
	b.caused()

	slices.SortStableFunc(b.events, func(p, q ev) int { return cmp.Or(cmp.Compare(p.lane, q.lane), cmp.Compare(p.t, q.t)) })
	slices.SortStableFunc(b.reqs, func(p, q rq) int { return cmp.Or(cmp.Compare(p.lane, q.lane), cmp.Compare(p.t, q.t)) })
	for i := range s.Lanes {
		s.Lanes[i].FirstEvent, s.Lanes[i].FirstRequest = -1, -1
	}
	n := len(b.events)
	t, typ, flags, name, seq, item, jitem := make([]int64, n), make([]uint8, n), make([]uint8, n), make([]int32, n), make([]int64, n), make([]int32, n), make([]int32, n)
	prevLane, prevT, prevSeq := int32(-1), int64(0), int64(0)
	types := map[string]int{}
	byGroup := map[int]map[string]int{}
	for i, e := range b.events {
		l := s.Lanes[e.lane]
		if e.lane != prevLane {
			prevLane, prevT, prevSeq = e.lane, 0, 0
			l.FirstEvent = i
		}
		l.Events++
		u := b.us(e.t)
		t[i], prevT = u-prevT, u
		seq[i], prevSeq = e.seq-prevSeq, e.seq
		typ[i], flags[i], name[i], item[i], jitem[i] = e.typ, e.flags, e.name, e.item, e.jitem
		tn := typeName(e.typ)
		types[tn]++
		if byGroup[l.Group] == nil {
			byGroup[l.Group] = map[string]int{}
		}
		byGroup[l.Group][tn]++
		if e.flags&evCaused != 0 {
			s.Stats.Caused++
		}
	}
	s.Events = columns{N: n, Cols: map[string]string{"t": varints(t), "type": varints(typ), "flags": varints(flags), "name": varints(name), "seq": varints(seq), "item": varints(item), "json": varints(jitem)}}

	m := len(b.reqs)
	rt, rdur, rex, rmeth, rstat, rflags, rname := make([]int64, m), make([]int64, m), make([]int64, m), make([]int32, m), make([]int32, m), make([]uint8, m), make([]int32, m)
	prevLane, prevT = -1, 0
	byVerb := map[[2]any]int{}
	for i, r := range b.reqs {
		l := s.Lanes[r.lane]
		if r.lane != prevLane {
			prevLane, prevT = r.lane, 0
			l.FirstRequest = i
		}
		l.Requests++
		u := b.us(r.t)
		rt[i], prevT = u-prevT, u
		if r.end > r.t {
			rdur[i] = (r.end - r.t) / 1e3
		}
		rex[i], rmeth[i], rstat[i], rflags[i], rname[i] = r.ex, r.method, r.status, r.flags, r.name
		byVerb[[2]any{s.Methods[r.method], int(r.status)}]++
	}
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if isWatch(x) {
			st := 0
			if x.Response != nil {
				st = x.Response.Status
			}
			m := x.Request.Method
			if x.Request.Missing {
				m = "?"
			}
			byVerb[[2]any{m + " (watch)", st}]++
		}
	}
	s.Requests = columns{N: m, Cols: map[string]string{"t": varints(rt), "dur": varints(rdur), "ex": varints(rex), "method": varints(rmeth), "status": varints(rstat), "flags": varints(rflags), "name": varints(rname)}}

	s.Stats.Conns = len(b.idx.Conns)
	s.Stats.Exchanges = len(b.idx.Exchanges)
	s.Stats.Events = n
	s.Stats.Types = types
	s.Stats.ByVerb = [][3]any{}
	for k, v := range byVerb {
		s.Stats.ByVerb = append(s.Stats.ByVerb, [3]any{k[0], k[1], v})
	}
	sort.Slice(s.Stats.ByVerb, func(i, j int) bool {
		a, c := s.Stats.ByVerb[i], s.Stats.ByVerb[j]
		if a[0].(string) != c[0].(string) {
			return a[0].(string) < c[0].(string)
		}
		return a[1].(int) < c[1].(int)
	})
	s.Stats.ByResource = []resourceCount{}
	for g, ts := range byGroup {
		rc := resourceCount{Group: g, Title: s.Groups[g].Title, Types: ts}
		for _, v := range ts {
			rc.N += v
		}
		s.Stats.ByResource = append(s.Stats.ByResource, rc)
	}
	sort.Slice(s.Stats.ByResource, func(i, j int) bool {
		return cmp.Or(cmp.Compare(s.Stats.ByResource[j].N, s.Stats.ByResource[i].N), cmp.Compare(s.Stats.ByResource[i].Group, s.Stats.ByResource[j].Group)) < 0
	})
	secs := make([][2]int64, 0, len(b.perSec))
	for sec, c := range b.perSec {
		secs = append(secs, [2]int64{sec * 1e6, c})
	}
	sort.Slice(secs, func(i, j int) bool {
		return cmp.Or(cmp.Compare(secs[j][1], secs[i][1]), cmp.Compare(secs[i][0], secs[j][0])) < 0
	})
	s.Stats.Busiest = secs[:min(len(secs), 10)]

	var last int64
	for _, x := range b.idx.Exchanges {
		last = max(last, x.Last)
		if x.End != nil {
			last = max(last, x.End.Time)
		}
	}
	s.Span = b.us(max(last, b.lastT))
	s.Start = export.Time(b.start)
	b.anomalies()
	b.details()
}

// caused flags the events the writes of the client under test caused: the
// event whose object is at the resourceVersion a write answered with, and
// for a DELETE the first DELETED event of its object after it.
func (b *builder) caused() {
	rvs := map[uint64]bool{}
	dels := map[string][]int64{}
	for _, w := range b.writes {
		if !w.tested {
			continue
		}
		if w.rv != 0 && !w.delete {
			rvs[w.rv] = true
		}
		if w.delete {
			dels[w.key] = append(dels[w.key], w.t)
		}
	}
	if len(rvs) == 0 && len(dels) == 0 {
		return
	}
	for k := range dels {
		slices.Sort(dels[k])
	}
	for i := range b.events {
		e := &b.events[i]
		if e.typ == typeCodes["BOOKMARK"] || e.typ == typeCodes["ERROR"] {
			continue
		}
		if e.rv != 0 && rvs[e.rv] {
			e.flags |= evCaused
			continue
		}
		if e.typ == typeCodes["DELETED"] && e.name >= 0 {
			g := b.s.Groups[b.s.Lanes[e.lane].Group]
			nsName := b.s.Names[e.name]
			ns, name, ok := strings.Cut(nsName, "/")
			if !ok {
				ns, name = "", nsName
			}
			ts := dels[g.Resource+"\x00"+ns+"\x00"+name]
			if j := sort.Search(len(ts), func(j int) bool { return ts[j] > e.t }); j > 0 {
				e.flags |= evCaused
			}
		}
	}
}

func typeName(c uint8) string {
	for k, v := range typeCodes {
		if v == c {
			return k
		}
	}
	return "other"
}

// anomalies places what went wrong where it happened: the index's
// anomalies (lost bytes, resyncs, …), cut streams, 410s, stalls.
func (b *builder) anomalies() {
	s := b.s
	connLane := map[uint64]int{}
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if _, ok := connLane[x.Request.Conn]; !ok {
			connLane[x.Request.Conn] = b.exLane[x.Request.Exchange]
		}
	}
	for _, a := range b.idx.Anomalies {
		m := mark{Lane: -1, T: b.us(a.Time), Kind: a.Kind.String(), Text: a.Kind.String() + ": " + a.Message}
		if a.Bytes > 0 {
			m.Text += fmt.Sprintf(" (%d bytes)", a.Bytes)
		}
		if a.Exchange != formats.NoExchange {
			x := a.Exchange
			m.Exchange = &x
			if l, ok := b.exLane[x]; ok {
				m.Lane = l
			}
		} else if l, ok := connLane[a.Conn]; ok {
			m.Lane = l
		}
		s.Anomalies = append(s.Anomalies, m)
	}
	stall := b.opts.stallAfter()
	for i := range b.exs {
		x := &b.exs[i]
		li, ok := b.exLane[x.Exchange]
		if !ok {
			continue
		}
		ex := x.Exchange
		info := b.f.Exchange(ex)
		if info == nil {
			continue
		}
		watch := isWatch(info)
		if x.Response != nil && x.Response.Status == 410 {
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(info.Response.Time), Kind: "410", Text: "410 Gone: " + x.Request.Method + " " + x.Request.Target, Exchange: &ex})
		}
		for _, e := range x.Errors {
			kind := "error"
			if e.Code == 410 {
				kind = "410"
			}
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(parseTime(e.Time)), Kind: kind,
				Text: fmt.Sprintf("ERROR event %d: %d %s %s", e.Seq, e.Code, e.Reason, e.Message), Exchange: &ex})
		}
		if !watch {
			continue
		}
		l := s.Lanes[li]
		if sl := x.LongestSilence; sl != nil {
			from, to := b.us(parseTime(sl.From)), b.us(parseTime(sl.To))
			l.Silence = []int64{from, to}
			if stall > 0 && sl.Seconds >= stall.Seconds() {
				s.Anomalies = append(s.Anomalies, mark{Lane: li, T: from, Kind: "stall",
					Text: fmt.Sprintf("stall: nothing for %.1f s, until %s", sl.Seconds, sl.Until), Exchange: &ex})
			}
		}
		switch {
		case info.End == nil:
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: l.To, Kind: "cut", Text: "the file ended with the stream open", Exchange: &ex})
		case info.End.Status != formats.EndComplete:
			kind, text := "cut", "stream cut: "+info.End.Status.String()
			if b.lastT-info.End.Time < endSlack && info.End.Status != formats.EndGap && info.End.Status != formats.EndError {
				// The recording stopped with the watch open: not what the
				// server did.
				kind, text = "end", "open when the recording ended: "+info.End.Status.String()
			}
			if info.End.Note != "" {
				text += " (" + info.End.Note + ")"
			}
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(info.End.Time), Kind: kind, Text: text, Exchange: &ex})
		}
	}
	slices.SortStableFunc(s.Anomalies, func(p, q mark) int { return cmp.Compare(p.T, q.T) })
	if len(s.Anomalies) > maxAnomalies {
		s.AnomaliesLeft = len(s.Anomalies) - maxAnomalies
		s.Anomalies = s.Anomalies[:maxAnomalies:maxAnomalies]
	}
}

func parseTime(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// details stores what a click on each exchange shows.
func (b *builder) details() {
	pairs := make([]int64, 0, 2*len(b.exs))
	var spent int64
	for i := range b.exs {
		x := &b.exs[i]
		d := exchangeDetail{Exchange: x, Conn: b.conns[x.ConnID]}
		d.Request = b.refs[[2]int64{x.Exchange, int64(formats.ClientToServer)}]
		if info := b.f.Exchange(x.Exchange); info != nil && !isWatch(info) {
			d.Response = b.refs[[2]int64{x.Exchange, int64(formats.ServerToClient)}]
		}
		p, err := json.Marshal(d)
		if err != nil {
			continue
		}
		// The details of watches and writes always; of the other
		// exchanges while they fit in a budget of their own (as large as
		// the bodies').
		if info := b.f.Exchange(x.Exchange); info != nil && !isWatch(info) && !apipath.IsWrite(info.Request.Method) {
			if spent+int64(len(p)) > b.opts.maxBodyBytes() {
				b.s.DetailsLeft++
				continue
			}
			spent += int64(len(p))
		}
		pairs = append(pairs, x.Exchange, int64(b.st.add(p)))
	}
	b.s.Exchanges = varints(pairs)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
