package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/internal/ident"
)

// A Live store (Options.Live) is the world of a replay to a client under
// test. The recording holds two kinds of change, kept apart at Load:
//
//   - the behaviour of the clients under test (Options.Clients): their
//     successful writes and the versions of objects those writes made —
//     what a regression run is compared with, never replayed;
//   - the environment: every other change the recording shows (kubectl,
//     other controllers, the scheduler, kubelets), in resourceVersion
//     order with its capture time — the input of the run, applied to the
//     world one by one by ApplyNext as the caller paces them.
//
// The store starts at the session's first view of the world (its first
// LIST or watch): the objects as they were then. Every read — GET, LIST,
// WATCH — is answered from what has been applied so far plus the run's
// own writes, as one apiserver would.

// Client picks the requests of one client under test in a recording: those
// whose User-Agent matches UserAgent and whose connection comes from Addr.
// The zero Client matches every request.
type Client struct {
	UserAgent *regexp.Regexp // nil: any
	// Addr is the client's address as the session records it: an IP
	// (any port) or IP:port. "" means any.
	Addr string
}

// Matches reports whether a request with User-Agent ua, made on a
// connection from addr (IP:port), is the client's.
func (c Client) Matches(ua, addr string) bool {
	if c.UserAgent != nil && !c.UserAgent.MatchString(ua) {
		return false
	}
	if c.Addr == "" {
		return true
	}
	if c.Addr == addr {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host == strings.Trim(c.Addr, "[]")
}

// String is the selector ParseClient reads back.
func (c Client) String() string {
	var parts []string
	if c.UserAgent != nil {
		parts = append(parts, "user-agent="+c.UserAgent.String())
	}
	if c.Addr != "" {
		parts = append(parts, "addr="+c.Addr)
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, ",")
}

// ParseClients reads a list of ParseClient selectors, where "none" (alone)
// says that no client is under test: the selectors, and whether it was
// "none".
func ParseClients(sel []string) (cs []Client, none bool, err error) {
	for _, s := range sel {
		if s == "none" {
			none = true
			continue
		}
		c, err := ParseClient(s)
		if err != nil {
			return nil, false, err
		}
		cs = append(cs, c)
	}
	if none && len(cs) > 0 {
		return nil, false, errors.New("world: client selector none excludes the others")
	}
	return cs, none, nil
}

// ParseClient reads a client selector (wtrace replay --client):
// "user-agent=REGEXP", "addr=IP" or "addr=IP:PORT", or both separated by a
// comma (a request must match both); "all" matches every request. The
// regular expression is unanchored (RE2 syntax): "kube-controller-manager"
// matches client-go's "kube-controller-manager/v1.33.13 (linux/amd64)…".
func ParseClient(s string) (Client, error) {
	var c Client
	if s == "all" {
		return c, nil
	}
	if strings.TrimSpace(s) == "" {
		return c, errors.New(`world: empty client selector: want user-agent=REGEXP, addr=IP[:PORT], both, or "all"`)
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return c, fmt.Errorf("world: client selector %q: want user-agent=REGEXP or addr=IP[:PORT]", part)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "user-agent", "ua":
			re, err := regexp.Compile(v)
			if err != nil {
				return c, fmt.Errorf("world: client selector %q: %w", part, err)
			}
			c.UserAgent = re
		case "addr", "address":
			if net.ParseIP(strings.Trim(v, "[]")) == nil {
				if _, _, err := net.SplitHostPort(v); err != nil {
					return c, fmt.Errorf("world: client selector %q: not an IP or IP:port", part)
				}
			}
			c.Addr = v
		default:
			return c, fmt.Errorf("world: client selector %q: unknown key %q (want user-agent or addr)", part, k)
		}
	}
	return c, nil
}

// Change is one change of the environment: a version of an object that
// the recording shows and no client under test made.
type Change struct {
	// Time is the capture time (Unix ns) at which the recording first
	// showed the change.
	Time     int64
	Resource Resource
	Key      Key // as recorded
	Type     EventType
	// RV is the recorded resourceVersion of the change.
	RV string

	writes int    // how many of the clients' recorded writes came before it (follow.go)
	e      *entry // the version
	prev   *entry // the version before it in the recording (any author), nil for the first
}

// Environment is what a Live store replays: the changes of the
// environment, and what it left out as the behaviour of the clients under
// test.
type Environment struct {
	// Start is the capture time the environment's timeline starts at: the
	// first watch of a client under test — when it began to follow the
	// world, as a controller does once its informers start (after it won
	// its leader election, say) — or its first request when it watched
	// nothing, or the session's first request when no client is picked.
	// A change is due (Time − Start) / speed after the run's clients
	// begin alike; those before Start are due at once.
	Start int64
	// Watches says that the clients under test watched: the run's
	// timeline starts at its clients' first watch too.
	Watches bool
	// End is the capture time of the last write of a client under test
	// (0 without one): how long after the environment's last change the
	// recorded clients were still at work — a controller that acts on a
	// delay (the namespace controller waits seconds) did so then.
	End int64
	// Changes are the environment's changes in resourceVersion order.
	Changes []Change
	// Clients describes the clients under test ("all", selectors, or
	// "none").
	Clients string
	// Requests counts the recorded requests of the clients under test;
	// Writes their successful writes; Behaviour the versions of objects
	// those writes made, left out of the environment.
	Requests, Writes, Behaviour int
	// Created counts the objects the clients under test created: their
	// later changes by the environment follow the run's corresponding
	// objects (see ApplyNext).
	Created int
	// WriteLatency is the median time the recorded apiserver took to
	// answer the successful writes of the clients under test (0 without
	// any): how long a write took then.
	WriteLatency time.Duration
}

// clientSet decides which recorded requests are the clients under test's.
type clientSet struct {
	all     bool
	clients []Client
	conns   map[uint64]string // connection id → client address
}

func (cs *clientSet) matches(x *formats.ExchangeInfo) bool {
	if cs.all {
		return true
	}
	if len(cs.clients) == 0 {
		return false
	}
	ua := ""
	for _, h := range x.Request.Header {
		if strings.EqualFold(h.Name, "User-Agent") {
			ua = h.Value
			break
		}
	}
	addr := cs.conns[x.Request.Conn]
	for _, c := range cs.clients {
		if c.Matches(ua, addr) {
			return true
		}
	}
	return false
}

// describe says which clients are under test, for Environment.Clients.
func (cs *clientSet) describe() string {
	if cs.all {
		return "all"
	}
	if len(cs.clients) == 0 {
		return "none"
	}
	var s []string
	for _, c := range cs.clients {
		s = append(s, c.String())
	}
	return strings.Join(s, " or ")
}

// newClientSet picks the clients under test of session f.
func newClientSet(f *formats.File, opts Options) *clientSet {
	cs := &clientSet{conns: map[uint64]string{}}
	idx := f.Index()
	for _, c := range idx.Conns {
		cs.conns[c.Conn.ID] = c.Conn.Client
	}
	switch {
	case opts.NoClients:
	case opts.Clients != nil:
		cs.clients = opts.Clients
		for _, c := range opts.Clients {
			if c.UserAgent == nil && c.Addr == "" {
				cs.all = true
			}
		}
	default:
		// A recording through the proxy (or of a replay's run) holds the
		// one client that was pointed at it; a capture holds everyone.
		if m := idx.Meta; m != nil && (m.Source == formats.SourceProxy || m.Source == formats.SourceReplay) {
			cs.all = true
		}
	}
	return cs
}

// effect is a change an exchange of a client under test made to one
// object: at a known resourceVersion (rv), or else the first version of
// the object the recording shows after the request (time).
type effect struct {
	res  Resource
	key  Key
	rv   uint64 // 0: by time
	time int64
	// until, for a deletion, is when its answer came: every version of
	// the object from time on is the deletion's, up to its removal (a Pod
	// first gets its deletionTimestamp, then goes).
	until int64
	// creates says that the write may have created the object (a PUT or
	// an apply answered 201 Created): only then can its version be the
	// object's ADDED. Any other write (an update, a subresource — a
	// binding —, a deletion) succeeded on an object that existed before
	// it, so an ADDED the recording stamped after its request (on another
	// connection, a few hundred nanoseconds later) is someone else's.
	creates bool
}

// recCreate is an object a client under test created in the recording.
type recCreate struct {
	res          Resource
	key          Key
	generateName string
	uid          string
	owners       []string // uids of its owner references
	// identity is what the controller made it for, when its name does
	// not say (package internal/ident: a DaemonSet's Pod's node).
	identity string
	answered int64 // the exchange of its create
	run      *runObject
}

// runObject is the object of the run paired with a recorded one.
type runObject struct {
	key Key
	uid string
}

// envBuilder collects, while a Live store loads, what the clients under
// test did.
type envBuilder struct {
	cs       *clientSet
	watch    int64   // first watch of a client under test
	latency  []int64 // answer time of each successful write of a client under test
	end      int64   // answer of the last write of a client under test
	start    int64   // first request of a client under test
	first    int64   // first request of the session
	requests int
	writes   int
	effects  []effect
	created  []*recCreate
	// recWrites are the clients' successful writes (follow.go).
	recWrites []recWrite
}

// observe notes what exchange x of a client under test did (the loader
// calls it for every exchange).
func (b *envBuilder) observe(l *loader, x *formats.ExchangeInfo) {
	if x.Request.Missing {
		return
	}
	if t := x.Request.Time; t != 0 && (b.first == 0 || t < b.first) {
		b.first = t
	}
	if !b.cs.matches(x) {
		return
	}
	b.requests++
	if t := x.Request.Time; t != 0 && (b.start == 0 || t < b.start) {
		b.start = t
	}
	method := x.Request.Method
	if !apipath.IsWrite(method) {
		if apipath.IsWatch(method, x.Request.Target) && (b.watch == 0 || x.Request.Time < b.watch) {
			b.watch = x.Request.Time
		}
		return
	}
	if x.Response != nil && x.Response.Time > b.end {
		b.end = x.Response.Time
	}
	if x.Response == nil || x.Response.Status < 200 || x.Response.Status > 299 {
		return // a failed attempt changed nothing
	}
	if d := x.Response.Time - x.Request.Time; d > 0 {
		b.latency = append(b.latency, d)
	}
	req, err := apipath.Parse(method, x.Request.Target)
	if err != nil {
		return
	}
	t, ok := TargetOf(req)
	if !ok || req.DryRun {
		return
	}
	b.writes++
	until := x.Response.Time
	if x.End != nil && x.End.Time > until {
		until = x.End.Time
	}
	if t.Collection() {
		if method == http.MethodPost {
			b.createdBy(l, x, t)
			if n := len(b.created); n > 0 && b.created[n-1].answered == x.Request.Exchange {
				b.noteWrite(x.Response.Time, t, b.created[n-1].key)
			}
			return
		}
		// A delete-collection: the deletions of its scope that follow.
		b.effects = append(b.effects, effect{res: t.Resource, key: Key{t.Namespace, ""}, time: x.Request.Time, until: until})
		return
	}
	key := Key{t.Namespace, t.Name}
	b.noteWrite(x.Response.Time, t, key)
	e := effect{res: t.Resource, key: key, time: x.Request.Time,
		creates: t.Subresource == "" && method != http.MethodDelete && x.Response.Status == http.StatusCreated}
	if method == http.MethodDelete && t.Subresource == "" {
		e.until = until
		b.effects = append(b.effects, e)
		return
	}
	if obj, err := answerObject(l, x); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			if rv, ok := parseRV(m.GetResourceVersion()); ok {
				e.rv = rv
			}
			if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 && !namespaceFinalizers(obj) {
				// The update removed what the deletion waited for: the
				// object's removal that follows is its doing.
				b.effects = append(b.effects, effect{res: t.Resource, key: key, time: x.Request.Time, until: until})
			}
		}
	}
	b.effects = append(b.effects, e)
}

// createdBy notes an object a client under test created (a POST to a
// collection answered 2xx): its version, and what pairs it with the run's.
func (b *envBuilder) createdBy(l *loader, x *formats.ExchangeInfo, t Target) {
	obj, err := answerObject(l, x)
	if err != nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetName() == "" {
		return
	}
	key := Key{m.GetNamespace(), m.GetName()}
	if rv, ok := parseRV(m.GetResourceVersion()); ok {
		b.effects = append(b.effects, effect{res: t.Resource, key: key, rv: rv, time: x.Request.Time})
	}
	rc := &recCreate{res: t.Resource, key: key, generateName: m.GetGenerateName(), uid: string(m.GetUID()), identity: identityOf(obj),
		answered: x.Request.Exchange}
	for _, o := range m.GetOwnerReferences() {
		rc.owners = append(rc.owners, string(o.UID))
	}
	b.created = append(b.created, rc)
}

// identityOf is what identifies obj among the objects its controller made
// alike (ident.Of), for the kinds that have one.
func identityOf(obj runtime.Object) string {
	if _, ok := obj.(*corev1.Pod); !ok {
		return ""
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return ""
	}
	return ident.Of(b)
}

// answerObject decodes the object a write was answered with.
func answerObject(l *loader, x *formats.ExchangeInfo) (runtime.Object, error) {
	f := bodyFormat(x.Response.Header)
	if f == 0 {
		return nil, errors.New("world: no object in the answer")
	}
	body, err := l.body(x)
	if err != nil {
		return nil, err
	}
	o, err := codec.FromBody(f, body)
	if err != nil {
		return nil, err
	}
	if o.Kind == "Status" {
		return nil, errors.New("world: a Status")
	}
	return codec.Decode(o)
}

// answerRV is the resourceVersion of the object a write was answered with
// (a Scale answers with its object's).
func answerRV(l *loader, x *formats.ExchangeInfo) (uint64, bool) {
	obj, err := answerObject(l, x)
	if err != nil {
		return 0, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0, false
	}
	return parseRV(m.GetResourceVersion())
}

// namespaceFinalizers reports whether obj is a Namespace whose spec still
// names finalizers (its deletion waits for them too).
func namespaceFinalizers(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// split moves what the recording shows after the store's start out of
// its history: the versions the clients under test made are their
// behaviour, the others the environment's changes (the lock is not
// needed: Load owns the store).
func (b *envBuilder) split(s *Store, start uint64, firstWatch map[Resource]int64) (*Environment, uint64) {
	env := &Environment{Start: b.start, End: b.end, Clients: b.cs.describe(), Requests: b.requests, Writes: b.writes,
		Created: len(b.created)}
	if b.watch != 0 {
		env.Start, env.Watches = b.watch, true
	}
	if env.Start == 0 {
		env.Start = b.first
	}
	if n := len(b.latency); n > 0 {
		slices.Sort(b.latency)
		env.WriteLatency = time.Duration(b.latency[n/2])
	}
	byRV := map[Resource]map[Key]map[uint64]bool{}
	var byTime []effect
	for _, e := range b.effects {
		if e.rv == 0 {
			byTime = append(byTime, e)
			continue
		}
		if byRV[e.res] == nil {
			byRV[e.res] = map[Key]map[uint64]bool{}
		}
		if byRV[e.res][e.key] == nil {
			byRV[e.res][e.key] = map[uint64]bool{}
		}
		byRV[e.res][e.key][e.rv] = true
	}
	sort.Slice(byTime, func(i, j int) bool { return byTime[i].time < byTime[j].time })
	behaviour := map[*entry]bool{}
	for _, e := range byTime {
		h := s.res[storageOf(e.res)]
		if h == nil {
			continue
		}
		mark := func(es []*entry) {
			for _, v := range es {
				if v.rv <= start || v.time < e.time || behaviour[v] || byRV[e.res][v.key][v.rv] {
					continue
				}
				if v.typ == Added && !e.creates {
					continue // made by whoever created the object: the write needed it
				}
				if e.until == 0 {
					behaviour[v] = true
					return
				}
				// A deletion: the object's versions until it is gone,
				// the last of them seen at most a second after the
				// answer (a watch event may lag it).
				if v.time > e.until+int64(time.Second) {
					return
				}
				behaviour[v] = true
				if v.typ == Deleted {
					return
				}
			}
		}
		if e.key.Name == "" { // a delete-collection: every object of its scope
			for k, es := range h.objs {
				if e.key.Namespace == "" || k.Namespace == e.key.Namespace {
					mark(es)
				}
			}
			continue
		}
		mark(h.objs[e.key])
	}
	// The world as the session first shows it: every version at or
	// below the start, and every version no watch showed changing that
	// the session showed before the resource's first watch (what the
	// clients' first LISTs held, whatever its resourceVersion) or as one
	// of that watch's initial events (a streaming list's, until its
	// initial-events-end bookmark).
	initial := func(r Resource, e *entry) bool {
		if behaviour[e] || byRV[r][e.key][e.rv] {
			return false // the clients made it: never the world's to begin with
		}
		if e.rv <= start {
			return true
		}
		if e.watched {
			return false
		}
		if e.first {
			return true // the initial events of its first watch, however late
		}
		fw, ok := firstWatch[r]
		return !ok || e.time <= fw+initialBurst
	}
	top := start
	for r, h := range s.res {
		for _, e := range h.rec {
			if initial(r, e) && e.rv > top {
				top = e.rv
			}
		}
	}
	for r, h := range s.res {
		s.divide(env, r, h, initial, func(e *entry) bool { return behaviour[e] || byRV[r][e.key][e.rv] })
	}
	sort.SliceStable(env.Changes, func(i, j int) bool { return env.Changes[i].e.rv < env.Changes[j].e.rv })
	// Times only grow along the timeline: a change the recording showed
	// late (in a LIST, after later changes were watched) happened before
	// them, and is due with the first of them.
	for i := len(env.Changes) - 2; i >= 0; i-- {
		if env.Changes[i].Time > env.Changes[i+1].Time {
			env.Changes[i].Time = env.Changes[i+1].Time
		}
	}
	writesBefore(env.Changes, b.recWrites)
	return env, top
}

// divide keeps in history h of r the versions of the world as the session
// first shows it (initial) and moves the others out: the clients' own
// (theirs) counted as behaviour, the rest appended to env's changes.
func (s *Store) divide(env *Environment, r Resource, h *history, initial func(Resource, *entry) bool, theirs func(*entry) bool) {
	for k, es := range h.objs {
		var keep []*entry
		var prev *entry
		for i, e := range es {
			switch {
			case initial(r, e):
				keep = append(keep, e)
			case theirs(e):
				env.Behaviour++
			case e.typ == Deleted && e.inScope && s.leftScope(es, i):
				// It only left a selector's scope: the session shows
				// it again later.
			default:
				env.Changes = append(env.Changes, Change{Time: e.time, Resource: r, Key: k, Type: e.typ,
					RV: formatRV(e.rv), e: e, prev: prev})
			}
			prev = e
		}
		if len(keep) == 0 {
			delete(h.objs, k)
		} else {
			h.objs[k] = keep
		}
	}
	rec := h.rec[:0]
	for _, e := range h.rec {
		if initial(r, e) {
			rec = append(rec, e)
		}
	}
	h.rec = rec
}

// leftScope reports whether deletion es[i], seen only through a label or
// field selector's watch (or a selector's LIST leaving the object out),
// was the object leaving that scope rather than its deletion.
// kube-apiserver sends both as a DELETED with the object as it last was
// in scope (at the event's resourceVersion), so the event cannot tell;
// the rest of the session can: a later version of the same object (its
// uid) shows it still there. One never shown again, or shown again with
// another uid (recreated), was deleted.
func (s *Store) leftScope(es []*entry, i int) bool {
	uid := s.entryUID(es[i])
	for _, e := range es[i+1:] {
		if e.typ == Deleted && e.inScope {
			continue
		}
		if u := s.entryUID(e); uid == "" || u == "" || u == uid {
			return true
		}
		return false // recreated: the one before was deleted
	}
	return false
}

// entryUID is the uid of an entry's object ("" when it cannot be read).
func (s *Store) entryUID(e *entry) string {
	obj, err := codec.Decode(e.obj)
	if err != nil {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return string(m.GetUID())
}
