package report

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

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
