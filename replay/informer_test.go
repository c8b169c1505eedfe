package replay

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// seen is what an informer's event handler saw: add, update or delete, and
// the object's name and resourceVersion.
type seen struct {
	op, name, rv string
}

func (s seen) String() string { return s.op + " " + s.name + "@" + s.rv }

// handlerLog records an informer's handler calls.
type handlerLog struct {
	mu  sync.Mutex
	evs []seen
	ch  chan struct{} // signalled on every call
}

func newHandlerLog() *handlerLog { return &handlerLog{ch: make(chan struct{}, 1)} }

func (h *handlerLog) add(op string, obj any) {
	if d, ok := obj.(k8scache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := metaOf(obj)
	if err != nil {
		panic(err)
	}
	h.mu.Lock()
	h.evs = append(h.evs, seen{op, m.GetName(), m.GetResourceVersion()})
	h.mu.Unlock()
	select {
	case h.ch <- struct{}{}:
	default:
	}
}

func metaOf(obj any) (metav1.Object, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a metav1.Object", obj)
	}
	return o, nil
}

func (h *handlerLog) handlers() k8scache.ResourceEventHandlerFuncs {
	return k8scache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.add("add", obj) },
		UpdateFunc: func(_, obj any) { h.add("update", obj) },
		DeleteFunc: func(obj any) { h.add("delete", obj) },
	}
}

// waitFor waits until the log holds n calls.
func (h *handlerLog) waitFor(t *testing.T, n int) []seen {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		h.mu.Lock()
		k := len(h.evs)
		evs := append([]seen(nil), h.evs...)
		h.mu.Unlock()
		if k >= n {
			return evs
		}
		select {
		case <-h.ch:
		case <-deadline:
			t.Fatalf("informer handlers saw %d events, want %d:\n%s", k, n, seenList(evs))
		}
	}
}

func seenList(evs []seen) string {
	var b strings.Builder
	for i, e := range evs {
		fmt.Fprintf(&b, "  %3d %s\n", i, e)
	}
	return b.String()
}

// howLog captures the "how" of the server's request log lines.
type howLog struct {
	mu   sync.Mutex
	hows []string // "how target"
	ch   chan struct{}
}

func (l *howLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *howLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *howLog) WithGroup(string) slog.Handler            { return l }
func (l *howLog) Handle(_ context.Context, r slog.Record) error {
	var how, target string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "how":
			how = a.Value.String()
		case "target":
			target = a.Value.String()
		}
		return true
	})
	if how == "" {
		return nil
	}
	l.mu.Lock()
	l.hows = append(l.hows, how+" "+target)
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
	return nil
}

// waitHow waits until a request whose target contains sub was answered
// with how.
func (l *howLog) waitHow(t *testing.T, how, sub string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		hs := append([]string(nil), l.hows...)
		l.mu.Unlock()
		for _, h := range hs {
			if strings.HasPrefix(h, how+" ") && strings.Contains(h, sub) {
				return
			}
		}
		select {
		case <-l.ch:
		case <-deadline:
			if len(hs) > 12 {
				hs = append(hs[:12:12], fmt.Sprintf("… %d more", len(hs)-12))
			}
			t.Fatalf("no request containing %q answered %q; requests:\n  %s", sub, how, strings.Join(hs, "\n  "))
		}
	}
}

func (l *howLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.hows...)
}

// sessionObj is an object as the session shows it.
type sessionObj struct{ name, rv string }

// listObjects returns the items (name, resourceVersion) of a recorded LIST
// and of the pages that followed it through continue tokens.
func listObjects(t *testing.T, f *formats.File, format frame.Format, ids ...int64) []sessionObj {
	t.Helper()
	var out []sessionObj
	for _, id := range ids {
		body := sessionBody(t, f, id)
		l, err := frame.ListItems(format, body)
		if err != nil {
			t.Fatalf("ListItems(exchange %d): %v", id, err)
		}
		for _, item := range l.Items {
			ev := frame.WatchEvent(format, "ADDED", l.APIVersion, strings.TrimSuffix(l.Kind, "List"), item)
			m, err := frame.Peek(format, ev)
			if err != nil {
				t.Fatalf("Peek(item of exchange %d): %v", id, err)
			}
			out = append(out, sessionObj{m.Name, m.ResourceVersion})
		}
	}
	return out
}

// expectHandlers returns what an informer's handlers must see for an
// initial state (in any order) followed by watch events (in order): the
// initial objects as adds, then per event an add, update or delete
// depending on whether the object is in the informer's store.
func expectHandlers(initial []sessionObj, events []recordedEvent) (first, rest []seen) {
	store := map[string]bool{}
	for _, o := range initial {
		first = append(first, seen{"add", o.name, o.rv})
		store[o.name] = true
	}
	for _, e := range events {
		m := e.meta
		switch m.Type {
		case "ADDED", "MODIFIED":
			op := "add"
			if store[m.Name] {
				op = "update"
			}
			store[m.Name] = true
			rest = append(rest, seen{op, m.Name, m.ResourceVersion})
		case "DELETED":
			delete(store, m.Name)
			rest = append(rest, seen{"delete", m.Name, m.ResourceVersion})
		}
	}
	return first, rest
}

// initialEvents splits a recorded streaming list's events at its
// initial-events-end bookmark.
func initialEvents(evs []recordedEvent) (initial []sessionObj, live []recordedEvent) {
	for i, e := range evs {
		if e.meta.Type == "BOOKMARK" && e.meta.InitialEventsEnd {
			return initial, evs[i+1:]
		}
		if e.meta.Type == "ADDED" {
			initial = append(initial, sessionObj{e.meta.Name, e.meta.ResourceVersion})
		}
	}
	return nil, evs
}

// after returns the events that follow the last one carrying
// resourceVersion rv (none if rv is not there).
func after(evs []recordedEvent, rv string) []recordedEvent {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].meta.ResourceVersion == rv {
			return evs[i+1:]
		}
	}
	return nil
}

// checkHandlers compares what handlers saw with first (any order) then rest
// (in order).
func checkHandlers(t *testing.T, got, first, rest []seen) {
	t.Helper()
	if len(got) != len(first)+len(rest) {
		t.Fatalf("handlers saw %d events, want %d (%d initial + %d watch):\n%s", len(got), len(first)+len(rest), len(first), len(rest), seenList(got))
	}
	a := append([]seen(nil), got[:len(first)]...)
	b := append([]seen(nil), first...)
	less := func(s []seen) func(i, j int) bool {
		return func(i, j int) bool { return s[i].String() < s[j].String() }
	}
	sort.Slice(a, less(a))
	sort.Slice(b, less(b))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("initial events differ at %d (sorted): got %s, want %s\ngot:\n%s", i, a[i], b[i], seenList(got))
		}
	}
	for i, w := range rest {
		if g := got[len(first)+i]; g != w {
			t.Fatalf("watch event %d: handlers saw %s, want %s\ngot:\n%s", i, g, w, seenList(got))
		}
	}
}

// startInformer runs a typed informer of resource ("configmaps",
// "namespaces", "secrets") against url until the test ends.
func startInformer(t *testing.T, url, resource, namespace, selector string, contentType ...string) *handlerLog {
	t.Helper()
	cfg := &rest.Config{Host: url}
	if len(contentType) > 0 {
		cfg.ContentType = contentType[0]
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	})}
	if namespace != "" {
		opts = append(opts, informers.WithNamespace(namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, opts...)
	var inf k8scache.SharedIndexInformer
	switch resource {
	case "configmaps":
		inf = factory.Core().V1().ConfigMaps().Informer()
	case "namespaces":
		inf = factory.Core().V1().Namespaces().Informer()
	case "secrets":
		inf = factory.Core().V1().Secrets().Informer()
	case "services":
		inf = factory.Core().V1().Services().Informer()
	default:
		t.Fatalf("no informer for %s", resource)
	}
	h := newHandlerLog()
	if _, err := inf.AddEventHandler(h.handlers()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return h
}

// TestInformerBasicJSON: a typed configmaps informer against the basic-json
// session sees the recorded LIST, then every recorded watch event in order,
// with client-go's streaming list (WatchList) off and on.
func TestInformerBasicJSON(t *testing.T) {
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	list := exchangeByTarget(t, f, "GET", "/configmaps")
	watch := exchangeByTarget(t, f, "GET", "watch=true")
	first, rest := expectHandlers(listObjects(t, f, frame.JSON, list), sessionEvents(t, f, watch))

	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("WatchList=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			hl := &howLog{ch: make(chan struct{}, 1)}
			srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
			h := startInformer(t, srv.URL, "configmaps", "corpus-basic", "")
			got := h.waitFor(t, len(first)+len(rest))
			hl.waitHow(t, howAfterLast, "watch")
			wantHow := howRecorded
			if watchList {
				wantHow = howWatchList
			}
			hl.waitHow(t, wantHow, "/configmaps")
			checkHandlers(t, h.waitFor(t, len(got)), first, rest)
			t.Logf("requests: %q", hl.all())
		})
	}
}

// TestInformerMultiWatch: informers on the resources of the multi-watch
// session: namespaces (recorded LIST + WATCH, label selector), configmaps
// (a recorded streaming list, and a recorded paginated LIST + WATCH) and
// secrets (a paginated LIST + WATCH), WatchList off and on.
func TestInformerMultiWatch(t *testing.T) {
	path := corpusSession(t, "multi-watch")
	f := openSession(t, path)
	nsList := exchangeByTarget(t, f, "GET", "/api/v1/namespaces?labelSelector=corpus%3Dmulti")
	nsWatch := exchangeByTarget(t, f, "GET", "/api/v1/namespaces?labelSelector=corpus%3Dmulti&watch=true")
	cmStream := exchangeByTarget(t, f, "GET", "configmaps?watch=1&sendInitialEvents=true")
	cmList := exchangeByTarget(t, f, "GET", "configmaps?limit=4")
	cmWatch := exchangeByTarget(t, f, "GET", "configmaps?watch=true&resourceVersion=")
	secList := exchangeByTarget(t, f, "GET", "secrets?limit=4")
	secPage2 := exchangeByTarget(t, f, "GET", "secrets?limit=4&continue=")
	secWatch := exchangeByTarget(t, f, "GET", "secrets?watch=true&resourceVersion=")

	type informerCase struct {
		name, resource, namespace, selector string
		watchList                           bool
		first, rest                         []seen
		how                                 string
	}
	nsFirst, nsRest := expectHandlers(listObjects(t, f, frame.JSON, nsList), sessionEvents(t, f, nsWatch))
	cmInit, cmLive := initialEvents(sessionEvents(t, f, cmStream))
	cmsFirst, cmsRest := expectHandlers(cmInit, cmLive)
	// The recorded configmaps WATCH (10 s) ends long before the streaming
	// list (35 s): the informer's next watch, from the last
	// resourceVersion it saw, resumes in the streaming list's live events.
	cmEvents := sessionEvents(t, f, cmWatch)
	cmEvents = append(cmEvents, after(cmLive, cmEvents[len(cmEvents)-1].meta.ResourceVersion)...)
	cmFirst, cmRest := expectHandlers(listObjects(t, f, frame.JSON, cmList), cmEvents)
	secFirst, secRest := expectHandlers(listObjects(t, f, frame.JSON, secList, secPage2), sessionEvents(t, f, secWatch))
	cases := []informerCase{
		{"namespaces/list+watch", "namespaces", "", "corpus=multi", false, nsFirst, nsRest, howRecorded},
		{"namespaces/synthesized-watch-list", "namespaces", "", "corpus=multi", true, nsFirst, nsRest, howWatchList},
		{"configmaps/recorded-watch-list", "configmaps", "corpus-multi", "", true, cmsFirst, cmsRest, howRecorded},
		{"configmaps/list+watch", "configmaps", "corpus-multi", "", false, cmFirst, cmRest, howRecorded},
		{"secrets/paginated-list+watch", "secrets", "corpus-multi", "", false, secFirst, secRest, howRecorded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, c.watchList)
			hl := &howLog{ch: make(chan struct{}, 1)}
			srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
			h := startInformer(t, srv.URL, c.resource, c.namespace, c.selector)
			got := h.waitFor(t, len(c.first)+len(c.rest))
			hl.waitHow(t, howAfterLast, "watch")
			checkHandlers(t, h.waitFor(t, len(got)), c.first, c.rest)
			t.Logf("requests: %q", hl.all())
		})
	}
}

// TestInformerProtobuf: informers against the protobuf session, asking for
// protobuf or JSON (client-go decodes what the Content-Type says), with
// WatchList off and on (the streaming list is then built in protobuf).
func TestInformerProtobuf(t *testing.T) {
	path := corpusSession(t, "protobuf")
	f := openSession(t, path)
	list := exchangeByTarget(t, f, "GET", "/configmaps")
	watch := exchangeByTarget(t, f, "GET", "allowWatchBookmarks=true")
	first, rest := expectHandlers(listObjects(t, f, frame.Protobuf, list), sessionEvents(t, f, watch))
	for _, c := range []struct {
		watchList   bool
		contentType string
	}{{false, "application/vnd.kubernetes.protobuf"}, {true, "application/vnd.kubernetes.protobuf"}, {false, ""}, {true, ""}} {
		t.Run(fmt.Sprintf("WatchList=%v,ContentType=%q", c.watchList, c.contentType), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, c.watchList)
			hl := &howLog{ch: make(chan struct{}, 1)}
			srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
			h := startInformer(t, srv.URL, "configmaps", "corpus-proto", "", c.contentType)
			got := h.waitFor(t, len(first)+len(rest))
			hl.waitHow(t, howAfterLast, "watch")
			checkHandlers(t, h.waitFor(t, len(got)), first, rest)
			t.Logf("requests: %q", hl.all())
		})
	}
}

// TestInformerListFromStreamingList: a LIST + WATCH informer (WatchList
// off) against a session that recorded only a streaming list gets a LIST
// built from its initial events, then a WATCH from the initial-events-end
// bookmark's resourceVersion that carries the live events.
func TestInformerListFromStreamingList(t *testing.T) {
	full := corpusSession(t, "multi-watch")
	f := openSession(t, full)
	stream := exchangeByTarget(t, f, "GET", "configmaps?watch=1&sendInitialEvents=true")
	path := subSession(t, full, stream)
	initial, live := initialEvents(sessionEvents(t, f, stream))
	first, rest := expectHandlers(initial, live)

	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	hl := &howLog{ch: make(chan struct{}, 1)}
	srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
	h := startInformer(t, srv.URL, "configmaps", "corpus-multi", "")
	got := h.waitFor(t, len(first)+len(rest))
	hl.waitHow(t, howAfterLast, "watch")
	hl.waitHow(t, howList, "/configmaps")
	hl.waitHow(t, howResumed, "watch")
	checkHandlers(t, h.waitFor(t, len(got)), first, rest)
	t.Logf("requests: %q", hl.all())
}

// TestInformerRecordedOverHTTP2: the tls-h2 session was recorded over TLS
// and HTTP/2 (DATA frames as chunks, lower-case header names); an informer
// replayed over HTTP/1.1 sees its LIST and JSON WATCH.
func TestInformerRecordedOverHTTP2(t *testing.T) {
	path := corpusSession(t, "tls-h2")
	f := openSession(t, path)
	list := exchangeByTarget(t, f, "GET", "/api/v1/namespaces/corpus-tls/configmaps")
	watch := exchangeByTarget(t, f, "GET", "configmaps?watch=true&resourceVersion=1064")
	first, rest := expectHandlers(listObjects(t, f, frame.JSON, list), sessionEvents(t, f, watch))
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("WatchList=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			hl := &howLog{ch: make(chan struct{}, 1)}
			srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
			h := startInformer(t, srv.URL, "configmaps", "corpus-tls", "")
			got := h.waitFor(t, len(first)+len(rest))
			hl.waitHow(t, howAfterLast, "watch")
			checkHandlers(t, h.waitFor(t, len(got)), first, rest)
			t.Logf("requests: %q", hl.all())
		})
	}
}
