package edit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/edit"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// store is what an informer holds: "namespace/name" → resourceVersion and
// data.
type store map[string]string

func (s store) String() string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		lines = append(lines, k+" "+s[k])
	}
	return strings.Join(lines, "\n")
}

func (s store) only(ns string) store {
	out := store{}
	for k, v := range s {
		if strings.HasPrefix(k, ns+"/") {
			out[k] = v
		}
	}
	return out
}

func cmValue(cm *corev1.ConfigMap) string {
	b, _ := json.Marshal(cm.Data)
	return cm.ResourceVersion + " " + string(b)
}

// informer is a configmaps informer of every namespace.
type informer struct {
	inf k8scache.SharedIndexInformer
}

func startInformer(t *testing.T, cfg *rest.Config) *informer {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().ConfigMaps().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return &informer{inf: inf}
}

func (i *informer) store() store {
	s := store{}
	for _, o := range i.inf.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		s[cm.Namespace+"/"+cm.Name] = cmValue(cm)
	}
	return s
}

// settle waits until the informer synced and its store stopped changing
// for a second, and returns it.
func (i *informer) settle(t *testing.T) store {
	t.Helper()
	wttest.WaitFor(t, time.Minute, i.inf.HasSynced, "the informer to sync")
	last, since := i.store().String(), time.Now()
	wttest.WaitFor(t, time.Minute, func() bool {
		if s := i.store().String(); s != last {
			last, since = s, time.Now()
		}
		return time.Since(since) > time.Second
	}, "the informer's store to settle")
	return i.store()
}

// replayed is the store of an informer of every namespace (WatchList as
// asked) after a replay of f as fast as it reads.
func replayed(t *testing.T, f *formats.File, watchList bool) store {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
	srv, err := replay.New(f, replay.Options{Speed: 0, Writes: replay.WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	inf := startInformer(t, &rest.Config{Host: srv.URL})
	return inf.settle(t)
}

// longRecording records, through the recording proxy in front of a real
// kube-apiserver, three phases of changes to ConfigMaps of namespaces "a"
// and "b" while a streaming-list informer of every namespace and a LIST +
// WATCH of namespace "a" (from the LIST's resourceVersion) watch through
// the proxy. It returns the session, the ends of the first two phases, and
// the world (every ConfigMap) at those ends and at the end.
func longRecording(t *testing.T) (session string, t1, t2 int64, at1, at2, end store) {
	c := k8stest.Start(t)
	do := func(method, path, body string, want int) {
		t.Helper()
		hdr := http.Header{"Content-Type": {"application/json"}}
		if method == "PATCH" {
			hdr = http.Header{"Content-Type": {"application/merge-patch+json"}}
		}
		if resp, b := c.Do(method, path, hdr, []byte(body)); resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	world := func() store {
		t.Helper()
		resp, b := c.Do("GET", "/api/v1/configmaps", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("LIST: %d %s", resp.StatusCode, b)
		}
		var l corev1.ConfigMapList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		s := store{}
		for i := range l.Items {
			s[l.Items[i].Namespace+"/"+l.Items[i].Name] = cmValue(&l.Items[i])
		}
		return s
	}
	for _, ns := range []string{"a", "b"} {
		do("POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`, 201)
		for i := range 4 {
			do("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"v":"0"}}`, i), 201)
		}
	}

	session = filepath.Join(t.TempDir(), "long.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: session}})

	// The streaming list of every namespace.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	inf := startInformer(t, &rest.Config{Host: px.URL})
	// LIST, then WATCH from its resourceVersion, of namespace a.
	raw := rawWatch(t, px.URL+"/api/v1/namespaces/a/configmaps")

	caughtUp := func() store {
		t.Helper()
		w := world()
		wttest.WaitFor(t, time.Minute, func() bool { return inf.store().String() == w.String() },
			"the recorded informer to catch up with the world:\n%s", w)
		wttest.WaitFor(t, time.Minute, func() bool { return raw.store().String() == w.only("a").String() },
			"the recorded watch of namespace a to catch up with the world")
		time.Sleep(200 * time.Millisecond)
		return w
	}
	phase := func(n int) {
		for i := range 6 {
			for _, ns := range []string{"a", "b"} {
				cm := fmt.Sprintf("cm-%d", i%4)
				switch i {
				case 4:
					do("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"new-%d"},"data":{"v":"%d"}}`, n, n), 201)
				case 5:
					if n > 0 {
						do("DELETE", "/api/v1/namespaces/"+ns+"/configmaps/new-"+fmt.Sprint(n-1), "", 200)
					}
				default:
					do("PATCH", "/api/v1/namespaces/"+ns+"/configmaps/"+cm, fmt.Sprintf(`{"data":{"v":"%d-%d"}}`, n, i), 200)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	caughtUp()
	phase(0)
	at1 = caughtUp()
	t1 = time.Now().UnixNano()
	time.Sleep(200 * time.Millisecond)
	phase(1)
	at2 = caughtUp()
	t2 = time.Now().UnixNano()
	time.Sleep(200 * time.Millisecond)
	phase(2)
	end = caughtUp()
	raw.close()
	px.Stop()
	return session, t1, t2, at1, at2, end
}

// watcher is a LIST then a WATCH from its resourceVersion, over plain
// HTTP, keeping a store of what it saw.
type watcher struct {
	mu     sync.Mutex
	s      store
	cancel context.CancelFunc
	done   chan struct{}
}

func rawWatch(t *testing.T, url string) *watcher {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var l corev1.ConfigMapList
	err = json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{s: store{}, done: make(chan struct{})}
	for i := range l.Items {
		w.s[l.Items[i].Namespace+"/"+l.Items[i].Name] = cmValue(&l.Items[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"?watch=true&allowWatchBookmarks=true&resourceVersion="+l.ResourceVersion, nil)
	wresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		defer wresp.Body.Close()
		sc := bufio.NewScanner(wresp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string
				Object corev1.ConfigMap
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			k := ev.Object.Namespace + "/" + ev.Object.Name
			w.mu.Lock()
			switch ev.Type {
			case "ADDED", "MODIFIED":
				w.s[k] = cmValue(&ev.Object)
			case "DELETED":
				delete(w.s, k)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *watcher) store() store {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.s)
}

func (w *watcher) close() {
	w.cancel()
	<-w.done
}

func slice(t *testing.T, in string, opts edit.SliceOptions) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "slice.wt")
	opts.Output = formats.FileSinkOptions{Path: out}
	res, err := edit.Slice(context.Background(), in, opts)
	if err != nil {
		t.Fatalf("Slice: %v", err)
	}
	if len(res.Notes) > 0 || len(res.Damage) > 0 {
		t.Fatalf("Slice: notes %q, damage %v", res.Notes, res.Damage)
	}
	t.Logf("slice from %d to %d of %q: %d records, %d exchanges, %d watches cut, %d LISTs synthesized", opts.From, opts.To, opts.Namespaces, res.Records, res.Exchanges, res.Cut, res.Synthesized)
	return out
}

// TestSliceOfALongRecording: a recording through the proxy in front of a
// real kube-apiserver (three phases of changes, a streaming-list informer
// of every namespace and a LIST + WATCH of one namespace recorded), sliced
// in the middle, replayed to a client-go informer (WatchList off and on):
//   - the slice from the end of phase 1 to the end: the informer ends with
//     the store it ends with after a replay of the whole session, which is
//     the world at the end of the recording;
//   - the slice of phase 2 alone: the world at the end of phase 2;
//   - the slice of namespace a (from the end of phase 1): nothing of
//     namespace b anywhere in the file, and the informer ends with the
//     world of namespace a;
//   - replay --from (edit.Seek) at the end of phase 1: the same store as
//     the slice's.
func TestSliceOfALongRecording(t *testing.T) {
	session, t1, t2, at1, at2, end := longRecording(t)
	if at1.String() == at2.String() || at2.String() == end.String() {
		t.Fatal("the phases changed nothing")
	}
	whole := wttest.OpenSession(t, session)
	full := replayed(t, whole, false)
	if full.String() != end.String() {
		t.Fatalf("the whole session replayed:\n%s\nthe world at the end:\n%s", full, end)
	}
	tail := slice(t, session, edit.SliceOptions{From: t1})
	middle := slice(t, session, edit.SliceOptions{From: t1, To: t2})
	nsA := slice(t, session, edit.SliceOptions{From: t1, Namespaces: []string{"a"}})
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("WatchList=%v", watchList), func(t *testing.T) {
			if got := replayed(t, wttest.OpenSession(t, tail), watchList); got.String() != full.String() {
				t.Errorf("the slice from the end of phase 1 replayed:\n%s\nthe whole session replayed:\n%s", got, full)
			}
			if got := replayed(t, wttest.OpenSession(t, middle), watchList); got.String() != at2.String() {
				t.Errorf("the slice of phase 2 replayed:\n%s\nthe world at the end of phase 2:\n%s", got, at2)
			}
			if got := replayed(t, wttest.OpenSession(t, nsA), watchList); got.String() != full.only("a").String() {
				t.Errorf("the slice of namespace a replayed:\n%s\nwant:\n%s", got, full.only("a"))
			}
		})
	}
	checkOnlyNamespace(t, nsA, "a")

	sk, err := edit.Seek(context.Background(), session, t.TempDir(), edit.SliceOptions{From: t1})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	if got := replayed(t, sk.File, false); got.String() != full.String() {
		t.Errorf("replay --from the end of phase 1:\n%s\nthe slice replayed:\n%s", got, full)
	}
}

// checkOnlyNamespace fails unless every object of session path (events,
// LIST items, request targets) is of namespace ns.
func checkOnlyNamespace(t *testing.T, path, ns string) {
	t.Helper()
	f := wttest.OpenSession(t, path)
	var events, items int
	for _, x := range f.Index().Exchanges {
		if strings.Contains(x.Request.Target, "/namespaces/") && !strings.Contains(x.Request.Target, "/namespaces/"+ns+"/") {
			t.Errorf("exchange %d: %s", x.Request.Exchange, x.Request.Target)
		}
	}
	bodies := map[int64][]byte{}
	for rec, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		switch r := rec.(type) {
		case *formats.Frame:
			x := f.Exchange(r.Exchange)
			m, err := frame.Peek(frame.Format(x.Response.Events), r.Data)
			if err != nil {
				t.Fatal(err)
			}
			if m.Type != "BOOKMARK" && m.Namespace != ns {
				t.Errorf("exchange %d: event %s %s/%s", r.Exchange, m.Type, m.Namespace, m.Name)
			}
			events++
		case *formats.Body:
			if r.Dir == formats.ServerToClient {
				bodies[r.Exchange] = append(bodies[r.Exchange], r.Data...)
			}
		}
	}
	for id, b := range bodies {
		x := f.Exchange(id)
		var l metav1.List
		if json.Unmarshal(b, &l) != nil || !strings.HasSuffix(l.Kind, "List") {
			continue
		}
		for _, it := range l.Items {
			var m metav1.PartialObjectMetadata
			if err := json.Unmarshal(it.Raw, &m); err != nil {
				t.Fatal(err)
			}
			if m.Namespace != ns {
				t.Errorf("exchange %d (%s): item %s/%s", id, x.Request.Target, m.Namespace, m.Name)
			}
			items++
		}
	}
	if events == 0 || items == 0 {
		t.Errorf("the slice of namespace %s holds %d events and %d LIST items", ns, events, items)
	}
}
