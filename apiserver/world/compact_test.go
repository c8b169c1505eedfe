package world_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestCompaction: a store that takes thousands of writes forgets old
// versions as the apiserver compacts: its memory stays bounded by the live
// objects plus the window (no write is ever refused for memory while the
// live objects fit), a watch from a forgotten resourceVersion is 410
// Expired, one from the window's start gets every change since, and a
// watch left behind by compaction ends with a 410 ERROR event.
func TestCompaction(t *testing.T) {
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	path := wttest.RecordCorpus(t, "basic-json", false)
	f := wttest.OpenSession(t, path)
	const limit = 4 << 20
	st, err := world.Load(f, world.Options{MaxBytes: limit, HistoryWindow: 50, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	big := strings.Repeat("x", 4000)
	if r := do(t, st, "POST", cms, "", http.Header{"Content-Type": {"application/json"}}, `{"metadata":{"name":"hot"}}`); r.Code != 201 {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	first := st.LastRV()
	// A left-behind watch: from the first write, never read.
	lagging, refused := st.Watch(&world.Request{Method: "GET", Path: cms, Query: q("watch=true&resourceVersion=" + fmt.Sprint(first)), Header: http.Header{}})
	if refused != nil {
		t.Fatalf("watch: %d %s", refused.Code, refused.Body)
	}
	// 3,000 writes of 4 KB each: 12 MB of versions through a 4 MB store.
	for i := range 3000 {
		body := fmt.Sprintf(`{"data":{"v":"%d","big":"%s"}}`, i, big)
		if r := do(t, st, "PATCH", cms+"/hot", "", http.Header{"Content-Type": {"application/merge-patch+json"}}, body); r.Code != 200 {
			t.Fatalf("write %d: %d %s", i, r.Code, r.Body)
		}
	}
	last := st.LastRV()
	// From a forgotten resourceVersion: 410 Expired at once.
	old, refused := st.Watch(&world.Request{Method: "GET", Path: cms, Query: q("watch=true&resourceVersion=" + fmt.Sprint(first)), Header: http.Header{}})
	if refused != nil || !old.Expired() {
		t.Fatalf("watch from the forgotten %d: refused %v, expired %v; want one ERROR event", first, refused, old != nil && old.Expired())
	}
	// From within the window: every change since.
	from := last - 20
	recent, refused := st.Watch(&world.Request{Method: "GET", Path: cms, Query: q("watch=true&resourceVersion=" + fmt.Sprint(from)), Header: http.Header{}})
	if refused != nil || recent.Expired() {
		t.Fatalf("watch from %d in the window: refused %v", from, refused)
	}
	if n := len(takeAll(t, recent)); n != 20 {
		t.Errorf("watch from %d: %d events; want the 20 writes since", from, n)
	}
	// The left-behind watch: one ERROR event, then nothing.
	ev, ok := lagging.Next()
	if !ok || !ev.Expired {
		t.Fatalf("the left-behind watch's next: %v %v; want its 410", ev, ok)
	}
	b, err := lagging.Take(ev)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := frame.Peek(frame.JSON, b[strings.IndexByte(string(b), '{'):]); err != nil || m.Type != "ERROR" {
		t.Errorf("the left-behind watch's last event: %.200s (%v); want an ERROR", b, err)
	}
	if _, ok := lagging.Next(); ok {
		t.Error("the left-behind watch goes on after its 410")
	}
	// The current object is whole.
	if r := do(t, st, "GET", cms+"/hot", "", http.Header{}, ""); r.Code != 200 || !strings.Contains(string(r.Body), `"v":"2999"`) {
		t.Errorf("GET hot: %d %.200s", r.Code, r.Body)
	}
}

// TestWatchBeforeSession: a watch from a resourceVersion older than the
// session is 410 Expired where kube-apiserver serves watches from its
// watch cache, but every change since for Events, whose watches it serves
// from etcd — until the store compacts, as etcd does.
func TestWatchBeforeSession(t *testing.T) {
	f := wttest.OpenSession(t, wttest.RecordCorpus(t, "basic-json", false))
	st, err := world.Load(f, world.Options{HistoryWindow: 5})
	if err != nil {
		t.Fatal(err)
	}
	js := http.Header{"Content-Type": {"application/json"}}
	if r := do(t, st, "POST", "/api/v1/namespaces", "", js, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ev"}}`); r.Code != 201 {
		t.Fatalf("namespace: %d %s", r.Code, r.Body)
	}
	const evs = "/api/v1/namespaces/ev/events"
	for _, n := range []string{"a", "b"} {
		if r := do(t, st, "POST", evs, "", js, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"`+n+`"},"involvedObject":{"kind":"Pod","namespace":"ev","name":"p"},"reason":"R","message":"m"}`); r.Code != 201 {
			t.Fatalf("event %s: %d %s", n, r.Code, r.Body)
		}
	}
	watch := func(path string) *world.Watch {
		t.Helper()
		w, refused := st.Watch(&world.Request{Method: "GET", Path: path, Query: url.Values{"watch": {"true"}, "resourceVersion": {"1"}}, Header: http.Header{}})
		if refused != nil {
			t.Fatalf("watch %s: %d %s", path, refused.Code, refused.Body)
		}
		return w
	}
	if w := watch("/api/v1/namespaces/ev/configmaps"); !w.Expired() {
		t.Error("configmaps from resourceVersion 1: not 410 Expired")
	}
	w := watch(evs)
	if w.Expired() {
		t.Fatal("events from resourceVersion 1: 410 Expired; want every change since")
	}
	var got []string
	for _, b := range takeAll(t, w) {
		got = append(got, strings.SplitN(string(b), `"`, 5)[3])
	}
	if strings.Join(got, ",") != "ADDED,ADDED" {
		t.Errorf("events from resourceVersion 1: %v; want the 2 creates", got)
	}
	// Compacted (past twice the window): what etcd forgot is gone there too.
	for i := range 100 {
		if r := do(t, st, "PATCH", evs+"/a", "", http.Header{"Content-Type": {"application/merge-patch+json"}}, fmt.Sprintf(`{"message":"%d"}`, i)); r.Code != 200 {
			t.Fatalf("write %d: %d %s", i, r.Code, r.Body)
		}
	}
	if w := watch(evs); !w.Expired() {
		t.Error("events from resourceVersion 1 after compaction: not 410 Expired")
	}
}

// takeAll takes every event a watch has now, framed.
func takeAll(t *testing.T, w *world.Watch) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		ev, ok := w.Next()
		if !ok {
			return out
		}
		b, err := w.Take(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
}
