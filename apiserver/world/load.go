package world

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// maxBody bounds one opaque body (a LIST, a GET) read to learn the
// objects it holds: the apiserver's own responses stay far below it.
const maxBody = 512 << 20

// snapshot is what a recorded LIST showed: every object of its scope at
// one resourceVersion (all pages of a paginated LIST together).
type snapshot struct {
	res      Resource
	ns       string
	selector string // labelSelector
	fields   string // fieldSelector
	rv       uint64
	time     int64
	keys     map[Key]bool
}

// loader builds a Store from a session.
type loader struct {
	f      *formats.File
	s      *Store
	seen   map[Resource]map[Key]map[uint64]*entry
	rvs    []uint64
	starts []startRV
	snaps  []*snapshot
	pages  map[string][]*page // LIST pages by path and selectors
	env    *envBuilder        // Options.Live: what the clients under test did
	// watched is set while the loader reads a watch event that is a
	// change (not one of a watch's initial events): the entries it makes
	// or meets were seen changing (entry.watched).
	watched bool
	// first is set while the loader reads one of the initial events of a
	// resource's first watch (entry.first).
	first bool
	// firstWatch is, per resource, the request time of its first watch.
	firstWatch map[Resource]int64
	// watches are the watches whose events the loader reads, in one
	// pass over the session's records, once every exchange is known
	// (readWatches): a block shared by many watches is read once.
	watches  map[int64]*watchRead
	watchIDs []int64
	mids     map[int64]string // MidstreamTargets
	pre      *bodyPrefetch    // bodies read ahead (nil: none)
	// cache holds the blocks the load decompresses, for the load alone:
	// dropped with the loader, it leaves the File's own cache to what
	// the replay serves.
	cache *formats.BlockCache
}

// watchRead is one watch whose events the loader reads.
type watchRead struct {
	x       *formats.ExchangeInfo
	t       Target
	format  frame.Format
	scoped  bool
	initial int // noInitial, initialAdded, initialUntilBookmark
	done    bool
}

type startRV struct {
	time int64
	rv   uint64
}

// page is one recorded LIST response.
type page struct {
	id            int64
	time          int64
	t             Target
	selector      string
	fields        string
	cont, nextCnt string // the request's continue token; the response's
	rv            uint64
	keys          []Key
}

// Load reads every object of session f (recorded LIST and GET bodies,
// watch events, answers to writes) into a new Store. Exchanges whose
// bodies cannot be read are skipped; a session whose objects exceed
// Options.MaxBytes fails with ErrTooLarge. The Store does not keep f.
func Load(f *formats.File, opts Options) (*Store, error) {
	s := &Store{opts: opts, now: opts.Now, res: map[Resource]*history{}, changed: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	l := &loader{f: f, s: s, seen: map[Resource]map[Key]map[uint64]*entry{}, pages: map[string][]*page{},
		firstWatch: map[Resource]int64{}, watches: map[int64]*watchRead{}, cache: formats.NewBlockCache(32<<20, 0)}
	if opts.Live {
		l.env = &envBuilder{cs: newClientSet(f, opts)}
		go warmFieldManagers()
	}
	if l.mids = opts.Midstream; l.mids == nil {
		l.mids = MidstreamTargets(f)
	}
	idx := f.Index()
	l.pre = startPrefetch(f, l.cache, idx, opts.Until)
	defer func() {
		if l.pre != nil { // an early return
			l.pre.close()
		}
	}()
	for i := range idx.Exchanges {
		if err := l.exchange(&idx.Exchanges[i]); err != nil {
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			continue // an exchange that cannot be read adds nothing
		}
	}
	if l.pre != nil {
		l.pre.close()
		l.pre = nil
	}
	if err := l.readWatches(); err != nil {
		return nil, err
	}
	l.assemblePages()
	l.finish()
	if l.env != nil {
		l.goLive()
	}
	return s, nil
}

// goLive splits a Live store's history at its start: the world as it was
// then stays, what came after becomes the environment (or is left out as
// the clients' behaviour).
func (l *loader) goLive() {
	s := l.s
	env, top := l.env.split(s, s.clk.point, l.firstWatch)
	s.env = env
	s.live = newLiveState(l.env.created, l.env.recWrites)
	var rvs []uint64
	for _, h := range s.res {
		for _, e := range h.rec {
			rvs = append(rvs, e.rv)
		}
	}
	s.clk = newClock(rvs, top)
	s.oldest = min(s.oldest, top)
	s.publish()
}

func (l *loader) exchange(x *formats.ExchangeInfo) error {
	if l.env != nil {
		l.env.observe(l, x)
	}
	if x.Response == nil {
		return nil
	}
	if u := l.s.opts.Until; u != 0 && (x.Request.Time >= u || x.Response.Time >= u) {
		return nil
	}
	method, target := x.Request.Method, x.Request.Target
	if x.Request.Missing {
		// Captured from its middle: the watch its events show.
		var ok bool
		if target, ok = l.mids[x.Request.Exchange]; !ok {
			return nil
		}
		method = http.MethodGet
	} else if x.Response.Status < 200 || x.Response.Status > 299 {
		return nil
	}
	req, err := apipath.Parse(method, target)
	if err != nil {
		return err
	}
	t, ok := TargetOf(req)
	if !ok {
		return nil
	}
	q := req.Query
	if n, ok := parseRV(q.Get("resourceVersion")); ok && n > 0 {
		l.rvs = append(l.rvs, n)
		if method == http.MethodGet && t.Collection() {
			l.starts = append(l.starts, startRV{x.Response.Time, n})
		}
	}
	if x.Response.Events != frame.Unknown {
		if method != http.MethodGet || t.Subresource != "" {
			return nil
		}
		if ft, ok := l.firstWatch[t.Resource]; !ok || x.Request.Time < ft {
			l.firstWatch[t.Resource] = x.Request.Time
		}
		initial := initialEvents(q.Get("resourceVersion"), q.Get("sendInitialEvents"), x.Request.Missing)
		l.addWatch(x, t, q.Get("labelSelector") != "" || q.Get("fieldSelector") != "", initial)
		return nil
	}
	if t.Subresource != "" && t.Subresource != "status" {
		return nil
	}
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil
	}
	if u := l.s.opts.Until; u != 0 && (x.End == nil || x.End.Time >= u) {
		return nil
	}
	body, err := l.body(x)
	if err != nil {
		return err
	}
	f := bodyFormat(x.Response.Header)
	if f == frame.Unknown {
		return nil
	}
	if method == http.MethodGet && t.Collection() {
		return l.list(x, t, q, f, body)
	}
	o, err := codec.FromBody(f, body)
	if err != nil {
		return err
	}
	if o.Kind == "Status" || o.Kind == "Table" || strings.HasPrefix(o.Kind, "PartialObjectMetadata") {
		return nil
	}
	return l.object(t.Resource, o, Modified, x.Response.Time)
}

// bodyFormat is the format of an opaque body, from its Content-Type.
func bodyFormat(h []formats.Header) frame.Format {
	for _, hd := range h {
		if strings.EqualFold(hd.Name, "Content-Type") {
			mt, _, _ := strings.Cut(strings.ToLower(hd.Value), ";")
			switch strings.TrimSpace(mt) {
			case codec.MediaJSON:
				return frame.JSON
			case codec.MediaProtobuf:
				return frame.Protobuf
			case codec.MediaCBOR:
				return frame.CBOR
			}
			return frame.Unknown
		}
	}
	return frame.Unknown
}

// body reads an exchange's whole response body, decoded if gzip'd: read
// ahead by the prefetch when it could be.
func (l *loader) body(x *formats.ExchangeInfo) ([]byte, error) {
	if l.pre != nil {
		if b, err, ok := l.pre.take(x); ok {
			return b, err
		}
	}
	return readBody(l.f, l.cache, x)
}

// readBody reads exchange x's whole response body from f, decoded if
// gzip'd, through cache (see formats.Scanner.WithCache).
func readBody(f *formats.File, cache *formats.BlockCache, x *formats.ExchangeInfo) ([]byte, error) {
	if x.BodyBytes > maxBody {
		return nil, fmt.Errorf("state: exchange %d: %d bytes (limit %d)", x.Request.Exchange, x.BodyBytes, maxBody)
	}
	sc := f.ExchangeRecords(x.Request.Exchange).WithCache(cache)
	var b []byte
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if bd, ok := rec.(*formats.Body); ok && bd.Dir == formats.ServerToClient {
			b = append(b, bd.Data...)
		}
	}
	if x.End == nil || x.End.Status != formats.EndComplete {
		return nil, fmt.Errorf("state: exchange %d: body incomplete", x.Request.Exchange)
	}
	if strings.EqualFold(x.Response.Encoding, "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		d, err := io.ReadAll(io.LimitReader(zr, maxBody+1))
		if err != nil {
			return nil, err
		}
		if len(d) > maxBody {
			return nil, fmt.Errorf("state: exchange %d decodes to more than %d bytes", x.Request.Exchange, maxBody)
		}
		b = d
	} else if x.Response.Encoding != "" {
		return nil, fmt.Errorf("state: exchange %d: content encoding %q", x.Request.Exchange, x.Response.Encoding)
	}
	return b, nil
}

// initialEvents says how a watch of these parameters begins: with the
// current state as ADDED events (a watch from "" or "0", until they stop
// coming), with a streaming list (until its initial-events-end bookmark),
// or with changes only (a watch from a resourceVersion, or one captured
// from its middle).
func initialEvents(rv, sie string, midstream bool) int {
	switch {
	case midstream:
		return noInitial
	case sie == "true" || sie == "1":
		return initialUntilBookmark
	case rv == "" || rv == "0":
		return initialAdded
	}
	return noInitial
}

const (
	noInitial = iota
	initialAdded
	initialUntilBookmark
)

// initialBurst is how long after its response's head a watch from "" or
// "0" may still be sending the current state.
const initialBurst = int64(50 * time.Millisecond)

// addWatch registers a watch whose events readWatches reads. scoped says
// that it has a label or field selector; initial how it begins.
func (l *loader) addWatch(x *formats.ExchangeInfo, t Target, scoped bool, initial int) {
	f := frame.Format(x.Response.Events)
	if f != frame.JSON && f != frame.Protobuf && f != frame.CBOR {
		return
	}
	id := x.Request.Exchange
	if l.watches[id] != nil {
		return
	}
	l.watches[id] = &watchRead{x: x, t: t, format: f, scoped: scoped, initial: initial}
	l.watchIDs = append(l.watchIDs, id)
}

// readWatches reads the events of every registered watch in one pass
// over the blocks that hold them, in file order: one goroutine reads and
// decompresses the blocks while this one reads the events (the two take
// about as long). Damaged blocks are passed over; a read error ends the
// pass with what was read (the exchanges beyond it add nothing, as an
// unreadable exchange does).
func (l *loader) readWatches() error {
	if len(l.watchIDs) == 0 {
		return nil
	}
	// The reader decompresses the blocks into batches of frames; workers
	// peek the batches' events (frame.PeekEvent: most of the load's
	// CPU), and this goroutine applies them in file order.
	ordered := make(chan *peekBatch, 8)
	jobs := make(chan *peekBatch, 8)
	stop := make(chan struct{})
	stopReader := sync.OnceFunc(func() { close(stop) })
	defer stopReader()
	var workers sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for b := range jobs {
				l.peekBatch(b)
				close(b.done)
			}
		}()
	}
	defer workers.Wait()
	go func() {
		defer close(ordered)
		defer close(jobs)
		sc := l.f.ExchangeRecords(l.watchIDs...).WithCache(l.cache)
		b := &peekBatch{done: make(chan struct{})}
		send := func(b *peekBatch) bool {
			select {
			case ordered <- b:
			case <-stop:
				return false
			}
			jobs <- b // never blocks long: workers drain jobs until it closes
			return true
		}
		for {
			rec, err := sc.NextIntact(nil)
			if err != nil {
				break // io.EOF, or what cannot be read
			}
			if fr, ok := rec.(*formats.Frame); ok {
				b.frames = append(b.frames, fr)
			}
			if len(b.frames) == readBatch {
				if !send(b) {
					return
				}
				b = &peekBatch{frames: make([]*formats.Frame, 0, readBatch), done: make(chan struct{})}
			}
		}
		if len(b.frames) > 0 {
			send(b)
		}
	}()
	for b := range ordered {
		<-b.done
		for i, fr := range b.frames {
			w := l.watches[fr.Exchange]
			if w == nil || w.done {
				continue
			}
			p := &b.peeks[i]
			if err := l.watchEvent(w, fr, p.m, p.raw, p.err); err != nil {
				stopReader()
				for range ordered { // until the reader ends
				}
				return err
			}
		}
	}
	return nil
}

// peekBatch is a batch of frames readWatches reads, with their events
// peeked by a worker (done closed then).
type peekBatch struct {
	frames []*formats.Frame
	peeks  []peeked
	done   chan struct{}
}

// peeked is frame.PeekEvent's answer for one frame.
type peeked struct {
	m   frame.Meta
	raw []byte
	err error
}

// peekBatch peeks the events of b's frames that belong to a registered
// watch (l.watches is only read while readWatches runs).
func (l *loader) peekBatch(b *peekBatch) {
	b.peeks = make([]peeked, len(b.frames))
	for i, fr := range b.frames {
		if w := l.watches[fr.Exchange]; w != nil {
			p := &b.peeks[i]
			p.m, p.raw, p.err = frame.PeekEvent(w.format, fr.Data)
		}
	}
}

// readBatch is how many events readWatches hands over at a time.
const readBatch = 256

// watchEvent adds what one event of watch w shows.
func (l *loader) watchEvent(w *watchRead, fr *formats.Frame, m frame.Meta, raw []byte, err error) error {
	defer func() { l.watched, l.first = false, false }()
	if u := l.s.opts.Until; u != 0 && fr.Time >= u {
		w.done = true
		return nil
	}
	f := w.format
	if err != nil {
		return nil
	}
	var typ EventType
	switch m.Type {
	case "ADDED":
		typ = Added
	case "MODIFIED":
		typ = Modified
	case "DELETED":
		typ = Deleted
	case "BOOKMARK":
		if n, ok := parseRV(m.ResourceVersion); ok {
			l.rvs = append(l.rvs, n)
		}
		if w.initial == initialUntilBookmark && bytes.Contains(fr.Data, []byte("k8s.io/initial-events-end")) {
			w.initial = noInitial
			if n, ok := parseRV(m.ResourceVersion); ok {
				// The state the streaming list sent: the session's view
				// of the world when the watch began, as a LIST's.
				l.starts = append(l.starts, startRV{w.x.Response.Time, n})
			}
		}
		return nil
	default:
		return nil
	}
	if m.Kind == "Table" {
		return nil // kubectl get -w: rows, not objects
	}
	o := codec.Object{Format: f, APIVersion: m.APIVersion, Kind: m.Kind, Raw: raw}
	if w.initial == initialAdded && (typ != Added || fr.Time > w.x.Response.Time+initialBurst) {
		w.initial = noInitial
	}
	l.watched = w.initial == noInitial
	l.first = !l.watched && w.x.Request.Time <= l.firstWatch[w.t.Resource]+initialBurst
	return l.objectMeta(w.t.Resource, o, typ, fr.Time, m.Namespace, m.Name, m.ResourceVersion, w.scoped)
}

func (l *loader) list(x *formats.ExchangeInfo, t Target, q url.Values, f frame.Format, body []byte) error {
	lst, err := frame.ListItems(f, body)
	if err != nil {
		return err
	}
	kind := strings.TrimSuffix(lst.Kind, "List")
	if kind == "Table" || strings.HasPrefix(kind, "PartialObjectMetadata") || kind == lst.Kind {
		return nil
	}
	// The resource's kind, even when the list is empty (a custom
	// resource the session shows no object of is still served).
	if h := l.history(t.Resource, codec.Object{Kind: kind}); t.Namespace != "" {
		h.info.Namespaced = true
	}
	rv, ok := parseRV(lst.ResourceVersion)
	if !ok {
		return nil
	}
	l.rvs = append(l.rvs, rv)
	l.starts = append(l.starts, startRV{x.Response.Time, rv})
	p := &page{id: x.Request.Exchange, time: x.Response.Time, t: t, selector: q.Get("labelSelector"),
		fields: q.Get("fieldSelector"), cont: q.Get("continue"), nextCnt: lst.Continue, rv: rv}
	for _, item := range lst.Items {
		o := codec.Object{Format: f, APIVersion: lst.APIVersion, Kind: kind, Raw: item}
		m, err := frame.PeekObject(f, o.APIVersion, o.Kind, o.Raw)
		if err != nil {
			return err
		}
		if err := l.objectMeta(t.Resource, o, Modified, x.Response.Time, m.Namespace, m.Name, m.ResourceVersion, false); err != nil {
			return err
		}
		p.keys = append(p.keys, Key{m.Namespace, m.Name})
	}
	k := t.Path() + "?" + p.selector + "&" + p.fields
	l.pages[k] = append(l.pages[k], p)
	return nil
}

// object adds a whole object (a GET's or a write's answer).
func (l *loader) object(r Resource, o codec.Object, typ EventType, t int64) error {
	m, err := frame.PeekObject(o.Format, o.APIVersion, o.Kind, o.Raw)
	if err != nil {
		return err
	}
	return l.objectMeta(r, o, typ, t, m.Namespace, m.Name, m.ResourceVersion, false)
}

// objectMeta adds one version of one object, once per resourceVersion
// (keeping the other format too when the session holds both).
//
// scoped says that o comes from a watch with a label or field selector,
// whose DELETED events may be the object leaving its scope: such a
// deletion gives way to another source's version of the same
// resourceVersion.
func (l *loader) objectMeta(r Resource, o codec.Object, typ EventType, t int64, ns, name, rvs string, scoped bool) error {
	rv, ok := parseRV(rvs)
	if !ok || name == "" {
		return nil
	}
	// The versions of one storage share its history: a LIST of each
	// shows the same objects once.
	r = storageOf(r)
	h := l.history(r, o)
	if ns != "" {
		h.info.Namespaced = true
	}
	k := Key{internNS(ns), name}
	byKey := l.seen[r]
	if byKey == nil {
		byKey = map[Key]map[uint64]*entry{}
		l.seen[r] = byKey
	}
	byRV := byKey[k]
	if byRV == nil {
		byRV = map[uint64]*entry{}
		byKey[k] = byRV
	}
	if e := byRV[rv]; e != nil {
		e.watched = e.watched || l.watched
		e.first = e.first || l.first
		switch {
		case typ == Deleted && scoped && e.typ != Deleted:
			// A selector's watch saw it leave its scope; another view
			// of the same version shows it is still there.
		case typ == Deleted:
			e.typ, e.inScope = Deleted, scoped
		case e.typ == Deleted && e.inScope:
			// It only left a selector's scope: it is still there.
			e.typ, e.inScope = typ, false
			if e.obj.Format == o.Format {
				l.s.bytes += int64(len(o.Raw) - len(e.obj.Raw))
				e.obj, e.attrs = o, nil
			}
		}
		if t < e.time {
			e.time = t
		}
		switch op, ep := partial(o), partial(e.obj); {
		case op && !ep:
			return nil // a metadata-only view of a version known whole
		case ep && !op:
			// The whole object of a version a metadata informer saw
			// first: it takes the partial view's place.
			l.s.bytes += int64(len(o.Raw) - len(e.obj.Raw) - len(e.alt.Raw))
			e.obj, e.alt, e.attrs = o, codec.Object{}, nil
			return l.checkSize()
		}
		if e.obj.APIVersion != o.APIVersion && !partial(o) {
			// The other version of its storage (versions.go).
			if e.other == nil {
				other := o // (not &o: o would escape on every call)
				e.other = &other
				l.s.bytes += int64(len(o.Raw))
			}
			return l.checkSize()
		}
		if e.obj.Format != o.Format && e.alt.Raw == nil {
			e.alt = o
			l.s.bytes += int64(len(o.Raw))
		}
		return l.checkSize()
	}
	e := &entry{rv: rv, time: t, typ: typ, key: k, obj: o, size: int64(len(o.Raw)) + 128, inScope: typ == Deleted && scoped,
		watched: l.watched, first: l.first}
	byRV[rv] = e
	h.rec = append(h.rec, e)
	h.objs[k] = append(h.objs[k], e)
	l.rvs = append(l.rvs, rv)
	l.s.bytes += e.size
	return l.checkSize()
}

func (l *loader) checkSize() error {
	if l.s.bytes > l.s.maxBytes() {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.s.maxBytes())
	}
	return nil
}

// history returns r's history, learning its kind from o.
func (l *loader) history(r Resource, o codec.Object) *history {
	r = storageOf(r)
	h := l.s.res[r]
	if h == nil {
		info, ok := schemeInfo(r)
		if !ok {
			// A custom resource: namespaced once a path or an object of
			// it shows a namespace (objectMeta, list).
			info = Info{Resource: r}
		}
		h = newHistory(info)
		l.s.res[r] = h
	}
	if o.Kind != "" && (h.info.Kind == "" || partial(codec.Object{Kind: h.info.Kind}) && !partial(o)) {
		h.info.Kind = o.Kind
	}
	return h
}

// partial reports whether o is a metadata-only view (a metadata
// informer's PartialObjectMetadata), which a whole object of the same
// version always replaces.
func partial(o codec.Object) bool { return strings.HasPrefix(o.Kind, "PartialObjectMetadata") }

// assemblePages joins the pages of each paginated LIST into snapshots; a
// LIST whose client did not fetch every page shows no complete scope.
func (l *loader) assemblePages() {
	for _, ps := range l.pages {
		byToken := map[string]*page{}
		for _, p := range ps {
			if p.cont != "" {
				byToken[p.cont] = p
			}
		}
		for _, p := range ps {
			if p.cont != "" {
				continue
			}
			sn := &snapshot{res: p.t.Resource, ns: p.t.Namespace, selector: p.selector, fields: p.fields, rv: p.rv, time: p.time, keys: map[Key]bool{}}
			complete := true
			for cur, n := p, 0; ; n++ {
				for _, k := range cur.keys {
					sn.keys[k] = true
				}
				if cur.nextCnt == "" {
					break
				}
				next := byToken[cur.nextCnt]
				if next == nil || n > len(ps) {
					complete = false
					break
				}
				cur = next
			}
			if complete {
				l.snaps = append(l.snaps, sn)
			}
		}
	}
	sort.Slice(l.snaps, func(i, j int) bool { return l.snaps[i].rv < l.snaps[j].rv })
}

// finish orders every history, infers deletions from what complete LISTs
// no longer show, and starts the clock at the session's first snapshot.
func (l *loader) finish() {
	for _, h := range l.s.res {
		sortEntries(h.rec)
		for k := range h.objs {
			sortEntries(h.objs[k])
		}
	}
	for _, sn := range l.snaps {
		h := l.s.res[storageOf(sn.res)]
		if h == nil {
			continue
		}
		info, ok := schemeInfo(sn.res)
		if !ok {
			info = h.info
		}
		sel, err := newSelector(sn.selector, sn.fields, info)
		if err != nil {
			continue
		}
		for k, es := range h.objs {
			if sn.keys[k] || (sn.ns != "" && k.Namespace != sn.ns) {
				continue
			}
			var last *entry
			for _, e := range es {
				if e.rv <= sn.rv {
					last = e
				}
			}
			if last == nil || last.typ == Deleted || last.rv == sn.rv {
				continue
			}
			if ok, err := sel.matches(last.obj); err != nil || !ok {
				continue
			}
			d := &entry{rv: sn.rv, time: sn.time, typ: Deleted, key: k, obj: last.obj, alt: last.alt, other: last.other,
				size: 128, inScope: !sel.empty(), inferred: true}
			h.rec = append(h.rec, d)
			h.objs[k] = append(h.objs[k], d)
			sortEntries(h.rec)
			sortEntries(h.objs[k])
		}
	}
	start := uint64(0)
	sort.Slice(l.starts, func(i, j int) bool { return l.starts[i].time < l.starts[j].time })
	if len(l.starts) > 0 {
		start = l.starts[0].rv
	} else if len(l.rvs) > 0 {
		start = l.rvs[0]
		for _, r := range l.rvs {
			if r < start {
				start = r
			}
		}
	}
	l.s.clk = newClock(l.rvs, start)
	l.s.oldest = start
	l.s.publish()
}

func sortEntries(es []*entry) {
	sort.SliceStable(es, func(i, j int) bool { return es[i].rv < es[j].rv })
}
