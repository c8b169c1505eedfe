package world

import (
	"fmt"
	"net/url"
	"sort"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Watch is a watch the store serves from its history: one whose
// parameters (selectors, namespace, encoding) the session did not record,
// or one resumed from a resourceVersion only the store knows. It walks the
// history of one resource in served order from its start: recorded
// changes (each with its capture time, for the caller to pace) and the
// clients' writes (due at once), as the apiserver's watch cache would
// send them for its scope. Not safe for concurrent use; the Store it
// reads is.
type Watch struct {
	// What Next reads at every change, first: with many watches, each
	// one's are a cache miss.
	s       *Store
	h       *history
	cursor  uint64 // served resourceVersion of the last change sent (or of the start)
	ns      string // t.Namespace, interned (see internNS)
	expired bool
	all     bool // sel selects everything: matches need not look
	// beforeSession: a watch from a resourceVersion older than the
	// session, served as etcd serves it (noWatchCache): the versions the
	// session showed only in a LIST come as created.
	beforeSession bool
	// writesOnly: a Follow watch, which skips the recorded changes (the
	// replay sends the recording itself).
	writesOnly bool
	// recordedOnly: a watch that skips the clients' writes.
	recordedOnly bool

	sel    *selector
	t      Target
	info   Info
	w      *codec.Writer
	origin int64 // capture time of the start
	init   [][]byte
	// caught is the served resourceVersion up to which the watch has
	// nothing more to send (set by Next when it finds nothing).
	caught atomic.Uint64
	// bookmarks: the client allows bookmarks (allowWatchBookmarks).
	bookmarks bool
}

// WatchEvent is the next change a Watch has for its client.
type WatchEvent struct {
	// Time is the capture time of a recorded change (Unix ns), 0 for a
	// client's write (due now).
	Time  int64
	Synth bool
	e     *entry
	typ   EventType
	prev  *entry // the version before, for a DELETED that is a scope exit
	// Expired: the store compacted past the watch's position; Take gives
	// the ERROR event with a 410 Expired Status, the watch's last.
	Expired bool
}

// Watch starts a watch for a request with watch=true (or the legacy
// /watch/ path). It returns a Response instead when the request is refused
// (a Status: unknown resource, bad selector, no acceptable encoding), and
// nil, nil when the store does not serve the path.
func (s *Store) Watch(r *Request) (*Watch, *Response) {
	t, ok := ParsePath(r.Path)
	if !ok || t.Subresource != "" || !t.Collection() && !t.Watch {
		return nil, nil
	}
	info, ok := s.Info(t.Resource)
	if !ok {
		return nil, nil
	}
	w, err := s.writer(r, codec.TargetWatch, info)
	if err != nil {
		return nil, s.errorResponse(r, err, HowWatch)
	}
	fs := r.Query.Get("fieldSelector")
	if !t.Collection() {
		// The legacy path's watch of one object: its collection's,
		// through metadata.name (kube-apiserver's ListResource).
		if fs, err = nameSelector(fs, t.Name); err != nil {
			return nil, s.errorResponse(r, err, HowWatch)
		}
		t.Name = ""
	}
	sel, err := newSelector(r.Query.Get("labelSelector"), fs, info)
	if err != nil {
		return nil, s.errorResponse(r, err, HowWatch)
	}
	sie := apipath.BoolParam(r.Query, "sendInitialEvents")
	bookmarks := apipath.BoolParam(r.Query, "allowWatchBookmarks")
	rv := r.Query.Get("resourceVersion")
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	wt := newWatch(s, h, info, t, sel, w)
	wt.recordedOnly = r.RecordedOnly
	wt.bookmarks = bookmarks
	switch {
	case rv == "" || rv == "0" || sie:
		// A streaming list's resourceVersion is a lower bound
		// (NotOlderThan): the current state is never older.
		wt.cursor = s.clk.last
		items, err := s.collectOf(t, info, sel, wt.cursor, w.Media.Format, wt.recordedOnly)
		if err != nil {
			return nil, s.errorResponse(r, err, HowWatch)
		}
		for _, o := range items {
			ev, err := w.Event("ADDED", o)
			if err != nil {
				return nil, s.errorResponse(r, notAcceptableEncoding(err, w.Media), HowWatch)
			}
			wt.init = append(wt.init, w.Frame(ev))
		}
		if sie && bookmarks {
			ev, err := wt.bookmark(formatRV(wt.cursor), true)
			if err != nil {
				return nil, s.errorResponse(r, err, HowWatch)
			}
			wt.init = append(wt.init, w.Frame(ev))
		}
	default:
		n, ok := parseRV(rv)
		if !ok {
			return nil, s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", rv)), HowWatch)
		}
		wt.beforeSession = n < s.oldest
		if s.expired(t.Resource, n) {
			wt.expired = true
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", n, s.oldest)).ErrStatus
			wt.init = [][]byte{w.Frame(codec.StatusEvent(w.Media.Format, &st))}
			return wt, nil
		}
		wt.cursor = min(n, s.clk.last)
	}
	wt.origin = s.timeAt(h, wt.cursor)
	return wt, nil
}

// noWatchCache reports whether kube-apiserver serves r's watches from
// etcd rather than from its watch cache (--watch-cache-sizes: events have
// none by default; nor, as v1.33 answers, CustomResourceDefinitions): a watch from a resourceVersion older than the
// session is then not 410 Expired but every change after it, until etcd
// compacts (the world: until it compacts), which the world answers with
// what it knows of them — the versions the session first showed and every
// later one.
// expired reports whether a watch of r can no longer be served from
// resourceVersion rv (the lock is held): rv is older than what the store
// answers at, and r's watches are not served as etcd serves them from a
// store that has forgotten nothing.
func (s *Store) expired(r Resource, rv uint64) bool {
	return rv < s.oldest && !(noWatchCache(r) && !s.compacted)
}

func noWatchCache(r Resource) bool {
	switch r.Resource {
	case "events":
		return r.Group == "" || r.Group == "events.k8s.io"
	case "customresourcedefinitions":
		// The apiextensions apiserver's, as kube-apiserver v1.33 answers.
		return r.Group == "apiextensions.k8s.io"
	}
	return false
}

// newWatch is a watch of t's scope through sel, encoded by w.
func newWatch(s *Store, h *history, info Info, t Target, sel *selector, w *codec.Writer) *Watch {
	// The namespace interned as the store's entries have theirs (see
	// internNS): change compares it with every entry's.
	return &Watch{s: s, h: h, info: info, t: t, ns: internNS(t.Namespace), sel: sel, all: sel.empty(), w: w}
}

// ContentType is the Content-Type of the watch's response.
func (wt *Watch) ContentType() string { return wt.w.Media.ContentType(codec.TargetWatch) }

// Media is the watch's encoding.
func (wt *Watch) Media() codec.Media { return wt.w.Media }

// Transcoded reports whether the watch sent anything that is not recorded
// bytes as recorded.
func (wt *Watch) Transcoded() bool { return true }

// Initial returns the framed events due at once: the ADDED events of the
// current state (a watch from "" or "0", or a streaming list and its
// initial-events-end bookmark), or the ERROR event of a watch from a
// resourceVersion older than the session. The caller owns them.
func (wt *Watch) Initial() [][]byte { return wt.init }

// Expired reports whether the watch is one ERROR event and nothing else.
func (wt *Watch) Expired() bool { return wt.expired }

// Origin is the capture time of the watch's start: recorded changes are
// due their capture time minus Origin after the watch began (scaled by
// the replay's speed).
func (wt *Watch) Origin() int64 { return wt.origin }

// timeAt is the capture time of the history at served resourceVersion at:
// the newest recorded change at or before it, else the first after it.
func (s *Store) timeAt(h *history, at uint64) int64 {
	i := sort.Search(len(h.rec), func(i int) bool { return s.clk.served(h.rec[i].rv) > at })
	if i > 0 {
		return h.rec[i-1].time
	}
	if len(h.rec) > 0 {
		return h.rec[0].time
	}
	return 0
}

// Next returns the next change of the watch's scope after the last one
// taken, in served order, and false when there is none yet (the caller
// waits for its next one or for Store.Changed). A recorded change is
// returned before its time: the caller paces it, then calls Take. Next
// does not advance the watch.
func (wt *Watch) Next() (WatchEvent, bool) {
	if wt.expired {
		return WatchEvent{}, false
	}
	s := wt.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expired(wt.t.Resource, wt.cursor+1) {
		// Compacted past the watch's position: what it has not sent is
		// gone; the apiserver ends such a watch with 410 Expired.
		wt.expired = true
		return WatchEvent{Expired: true}, true
	}
	h := wt.h
	ri := sort.Search(len(h.rec), func(i int) bool { return s.clk.served(h.rec[i].rv) > wt.cursor })
	si := sort.Search(len(h.syn), func(i int) bool { return h.syn[i].rv > wt.cursor })
	for ri < len(h.rec) || si < len(h.syn) {
		var e *entry
		if si < len(h.syn) && (ri >= len(h.rec) || h.syn[si].rv < s.clk.served(h.rec[ri].rv)) {
			e = h.syn[si]
			si++
		} else {
			e = h.rec[ri]
			ri++
		}
		if wt.writesOnly && !e.synth || wt.recordedOnly && e.synth {
			continue
		}
		if ev, ok := wt.change(e); ok {
			return ev, true
		}
	}
	wt.caught.Store(s.clk.last)
	return WatchEvent{}, false
}

// Warnings are the texts of the Warning headers of the watch's response
// (see WarningHeader): what kube-apiserver v1.33 says of a deprecated
// kind.
func (wt *Watch) Warnings() []string {
	if w := deprecationWarning(wt.info); w != "" {
		return []string{w}
	}
	return nil
}

// Bookmarks reports whether the watch's client allows bookmarks
// (allowWatchBookmarks=true): the apiserver then sends one about every
// minute, and 2 s before the watch's timeout (Bookmark).
func (wt *Watch) Bookmarks() bool { return wt.bookmarks }

// Caught returns the served resourceVersion up to which the watch had
// nothing left to send the last time Next found nothing (0 before).
// Safe to call from any goroutine.
func (wt *Watch) Caught() uint64 { return wt.caught.Load() }

// Follow returns a Watch of the clients' writes alone, for a recorded
// watch the replay serves as recorded (--writes apply): the writes of its
// scope (path and query: namespace, selectors) made after served
// resourceVersion from, each as the event the apiserver would have sent
// among the recorded ones, encoded in media (the recorded stream's
// format). The caller moves it along the recording with Advance and takes
// a write's event when the recording has reached it (NextBefore). nil for
// a path the store does not serve.
func (s *Store) Follow(path string, query url.Values, media codec.Media, from string) (*Watch, error) {
	t, ok := ParsePath(path)
	if !ok || !t.Collection() || t.Subresource != "" {
		return nil, nil
	}
	info, ok := s.Info(t.Resource)
	if !ok {
		return nil, nil
	}
	sel, err := newSelector(query.Get("labelSelector"), query.Get("fieldSelector"), info)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	wt := newWatch(s, h, info, t, sel, codec.NewWriter(media, codec.TableOptions{}, s.now))
	wt.writesOnly = true
	if n, ok := parseRV(from); ok {
		wt.cursor = n
	} else {
		wt.cursor = s.clk.last
	}
	return wt, nil
}

// Advance moves the watch past served resourceVersion rv (a recorded event
// the replay sent): writes before it are no longer due. An rv that is not
// a number, or not past the watch's position, changes nothing.
func (wt *Watch) Advance(rv string) {
	if n, ok := parseRV(rv); ok && n > wt.cursor {
		wt.cursor = n
	}
}

// NextBefore is Next for a Follow watch: the next write of its scope whose
// served resourceVersion is below limit (a served resourceVersion: the
// recorded stream's next event), or with no limit when limit is "".
func (wt *Watch) NextBefore(limit string) (WatchEvent, bool) {
	ev, ok := wt.Next()
	if !ok {
		return ev, false
	}
	if n, isNum := parseRV(limit); isNum && ev.e.rv >= n {
		return WatchEvent{}, false
	}
	return ev, true
}

// change turns one history entry into the event the watch's scope sees,
// if any (the lock is held).
func (wt *Watch) change(e *entry) (WatchEvent, bool) {
	if wt.ns != "" && e.key.Namespace != wt.ns {
		return WatchEvent{}, false
	}
	prev := wt.previous(e)
	prevIn := prev != nil && prev.typ != Deleted && wt.matches(prev)
	ev := WatchEvent{Time: e.time, Synth: e.synth, e: e}
	if e.synth {
		ev.Time = 0
	}
	switch {
	case e.typ == Deleted:
		if !prevIn && prev != nil {
			return WatchEvent{}, false
		}
		if prev == nil && !wt.matches(e) {
			return WatchEvent{}, false
		}
		ev.typ = Deleted
	case wt.matches(e):
		// Entering the watch's view is an ADDED, except for a MODIFIED
		// with no version before it: an object the session never showed
		// earlier (a watch whose LIST it lacks) existed, and its change
		// stays a MODIFIED, as recorded; one a LIST showed, to a watch
		// from before the session, was created since.
		ev.typ = Modified
		if !prevIn && (prev != nil || e.typ != Modified || wt.beforeSession && !e.watched) {
			ev.typ = Added
		}
	case prevIn:
		ev.typ, ev.prev = Deleted, prev
	default:
		return WatchEvent{}, false
	}
	return ev, true
}

// previous returns the version of e's object before e in served order.
func (wt *Watch) previous(e *entry) *entry {
	s := wt.s
	var best *entry
	for _, o := range wt.h.objs[e.key] {
		if o == e || s.order(o) >= s.order(e) || wt.recordedOnly && o.synth {
			continue
		}
		if best == nil || s.order(o) > s.order(best) {
			best = o
		}
	}
	return best
}

func (wt *Watch) matches(e *entry) bool {
	if wt.all {
		return true
	}
	ok, err := wt.sel.matchesEntry(e)
	return err == nil && ok
}

// Take encodes ev (returned by Next) as a framed event and advances the
// watch past it. A recorded change moves the world's point to it
// (Store.Observe), so it goes out with its served resourceVersion. The
// bytes may be shared with other watches that send the same change in
// the same encoding (many clients watching one resource encode it once):
// the caller must not modify them.
func (wt *Watch) Take(ev WatchEvent) ([]byte, error) {
	s := wt.s
	if ev.Expired {
		s.mu.Lock()
		oldest := s.oldest
		s.mu.Unlock()
		st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", wt.cursor, oldest)).ErrStatus
		return wt.w.Frame(codec.StatusEvent(wt.w.Media.Format, &st)), nil
	}
	s.mu.Lock()
	var served uint64
	if ev.e.synth {
		served = ev.e.rv
	} else {
		served = s.clk.observe(ev.e.rv)
		s.publish()
	}
	wt.cursor = served
	// A plain encoding depends on the change, its type and served
	// resourceVersion alone (a Table's rows, on the watch's columns and
	// the time: not shared).
	key := frameKey{e: ev.e, prev: ev.prev, typ: ev.typ, served: served, media: wt.w.Media, gvk: wt.info.GVK()}
	shared := wt.w.Media.Plain()
	if shared {
		if b, ok := s.frames.get(key); ok {
			s.mu.Unlock()
			return b, nil
		}
	}
	src := ev.e
	if ev.prev != nil {
		src = ev.prev
	}
	o, _, err := s.servedAs(src, wt.w.Media.Format, wt.info.GVK())
	if err == nil && (ev.prev != nil || !ev.e.synth && served != ev.e.rv) {
		o, err = setRV(o, formatRV(served))
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b, err := wt.w.Event(ev.typ.String(), o)
	if err != nil {
		return nil, err
	}
	b = wt.w.Frame(b)
	if shared {
		s.mu.Lock()
		s.frames.put(key, b)
		s.mu.Unlock()
	}
	return b, nil
}

// frameKey names one framed watch event: a change as one scope sees it
// (its type; prev, the version before, for a scope exit), at its served
// resourceVersion, in one plain encoding.
type frameKey struct {
	e, prev *entry
	typ     EventType
	served  uint64
	media   codec.Media
	gvk     schema.GroupVersionKind // the watch's kind: one storage serves several
}

// frameCacheSize is how many framed events a Store keeps for watches to
// share: the watchers of a change take it within moments of each other,
// so the last few changes in each encoding are enough.
const frameCacheSize = 64

// frameCache keeps the last frameCacheSize framed events (oldest out
// first). Not safe for concurrent use: the Store's lock guards it.
type frameCache struct {
	m    map[frameKey][]byte
	ring [frameCacheSize]frameKey
	next int
}

func (c *frameCache) get(k frameKey) ([]byte, bool) {
	b, ok := c.m[k]
	return b, ok
}

func (c *frameCache) put(k frameKey, b []byte) {
	if _, ok := c.m[k]; ok {
		return
	}
	if c.m == nil {
		c.m = make(map[frameKey][]byte, frameCacheSize)
	}
	if len(c.m) == frameCacheSize {
		delete(c.m, c.ring[c.next])
	}
	c.ring[c.next] = k
	c.next = (c.next + 1) % frameCacheSize
	c.m[k] = b
}

// Bookmark returns the framed BOOKMARK event the apiserver's watch cache
// sends periodically: the watch's kind with only the resourceVersion up
// to which it has sent every change of its scope (the last one it sent,
// or the world's point when it had nothing more at its last Next).
func (wt *Watch) Bookmark() ([]byte, error) {
	if c := wt.caught.Load(); c > wt.cursor {
		wt.cursor = c
	}
	ev, err := wt.bookmark(formatRV(wt.cursor), false)
	if err != nil {
		return nil, err
	}
	return wt.w.Frame(ev), nil
}

// listBlueprintAnnotation is the annotation kube-apiserver v1.33 puts on a
// streaming list's last bookmark (later versions dropped it).
const listBlueprintAnnotation = "kubernetes.io/initial-events-list-blueprint"

// bookmark builds a BOOKMARK event as the apiserver does: an object of the
// resource's kind carrying only its resourceVersion (and the
// initial-events-end annotation), transformed as the watch's encoding asks.
func (wt *Watch) bookmark(rv string, end bool) ([]byte, error) {
	m := wt.w.Media
	if m.Plain() && !m.YAML && !end {
		return frame.Bookmark(m.Format, wt.info.APIVersion(), wt.info.Kind, rv, false), nil
	}
	obj := newObject(wt.info.GVK())
	om, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	om.SetResourceVersion(rv)
	if end {
		bp, err := wt.w.ListBlueprint(wt.info.GVK())
		if err != nil {
			return nil, err
		}
		asInternalZero(obj)
		a := map[string]string{metav1.InitialEventsAnnotationKey: "true", listBlueprintAnnotation: bp}
		for k, v := range om.GetAnnotations() {
			a[k] = v
		}
		om.SetAnnotations(a)
	}
	return wt.w.RuntimeEvent("BOOKMARK", obj)
}

// nameSelector is field selector fs of a request for the object named
// name, as kube-apiserver's ListResource reads it: metadata.name=name
// when fs is empty; fs when it selects exactly that name; else 400.
func nameSelector(fs, name string) (string, error) {
	if fs == "" {
		return "metadata.name=" + name, nil
	}
	sel, err := fields.ParseSelector(fs)
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	if n, ok := sel.RequiresExactMatch("metadata.name"); !ok || n != name {
		return "", apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
	}
	return fs, nil
}
