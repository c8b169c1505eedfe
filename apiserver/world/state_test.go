package world_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// recordedEvent is one watch event of a corpus session.
type recordedEvent struct {
	exchange int64
	typ      string
	ns, name string
	rv       string
	obj      codec.Object
}

// load records a corpus scenario and loads it into a Store with a fixed
// clock and numbered uids.
func load(t testing.TB, scenario string) (*world.Store, *formats.File) {
	t.Helper()
	path := wttest.RecordCorpus(t, scenario, false)
	f := wttest.OpenSession(t, path)
	n := 0
	st, err := world.Load(f, world.Options{
		Now:    func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) },
		NewUID: func() string { n++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, f
}

// watchEvents returns the events of the first recorded watch whose target
// contains sub.
func watchEvents(t testing.TB, f *formats.File, sub string) []recordedEvent {
	t.Helper()
	var out []recordedEvent
	idx := f.Index()
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		if x.Response == nil || x.Response.Events == frame.Unknown || !strings.Contains(x.Request.Target, sub) || len(out) > 0 {
			continue
		}
		ff := frame.Format(x.Response.Events)
		sc := f.ExchangeRecords(x.Request.Exchange)
		for {
			rec, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			fr, ok := rec.(*formats.Frame)
			if !ok {
				continue
			}
			m, err := frame.Peek(ff, fr.Data)
			if err != nil {
				t.Fatal(err)
			}
			e := recordedEvent{exchange: x.Request.Exchange, typ: m.Type, ns: m.Namespace, name: m.Name, rv: m.ResourceVersion}
			if m.Type != "BOOKMARK" && m.Type != "ERROR" {
				av, kind, raw, err := frame.EventObject(ff, fr.Data)
				if err != nil {
					t.Fatal(err)
				}
				e.obj = codec.Object{Format: ff, APIVersion: av, Kind: kind, Raw: raw}
			}
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no recorded watch of %q", sub)
	}
	return out
}

func do(t testing.TB, st *world.Store, method, path, query string, h http.Header, body string) *world.Response {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		h = http.Header{}
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", "controller/v0.0.0 (linux/amd64)")
	}
	r, ok := st.Serve(&world.Request{Method: method, Path: path, Query: q, Header: h, Body: []byte(body)})
	if !ok {
		t.Fatalf("%s %s: not served", method, path)
	}
	return r
}

// TestHistoryFollowsRecording walks the recorded watch of each scenario:
// after each event is served (Observe), a GET of its object answers the
// event's object byte for byte in the recorded format (404 after a
// DELETED), transcoded in the other; at the end a LIST holds what the
// recorded events leave.
func TestHistoryFollowsRecording(t *testing.T) {
	for _, tc := range []struct{ scenario, watch, path string }{
		{"basic-json", "watch=true", "/api/v1/namespaces/corpus-basic/configmaps"},
		{"protobuf", "watch=true", "/api/v1/namespaces/corpus-proto/configmaps"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			st, f := load(t, tc.scenario)
			evs := watchEvents(t, f, tc.watch)
			live := map[string]bool{}
			for i, e := range evs {
				if e.typ == "BOOKMARK" {
					continue
				}
				if served, changed := st.Observe(e.rv); changed || served != e.rv {
					t.Fatalf("event %d: Observe(%s) = %s, %v", i, e.rv, served, changed)
				}
				own := http.Header{"Accept": {codec.MediaJSON}}
				other := http.Header{"Accept": {codec.MediaProtobuf}}
				if e.obj.Format == frame.Protobuf {
					own, other = other, own
				}
				r := do(t, st, "GET", tc.path+"/"+e.name, "", own, "")
				if e.typ == "DELETED" {
					delete(live, e.name)
					if r.Code != 404 {
						t.Fatalf("event %d: GET of %s deleted at %s = %d", i, e.name, e.rv, r.Code)
					}
					continue
				}
				live[e.name] = true
				if r.Code != 200 || !bytes.Equal(r.Body, codec.Body(e.obj)) || r.Transcoded {
					t.Fatalf("event %d (%s %s): GET = %d transcoded=%v\n%s\nwant\n%s", i, e.typ, e.name, r.Code, r.Transcoded, clip(r.Body), clip(codec.Body(e.obj)))
				}
				r = do(t, st, "GET", tc.path+"/"+e.name, "", other, "")
				if r.Code != 200 || !r.Transcoded {
					t.Fatalf("event %d: GET in the other format = %d, transcoded=%v", i, r.Code, r.Transcoded)
				}
				o, err := codec.FromBody(frame.FormatOf(r.ContentType+";stream=watch", true), r.Body)
				if err != nil {
					t.Fatal(err)
				}
				got, err := codec.Decode(o)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := codec.Decode(e.obj)
				if !equalJSON(t, got, want) {
					t.Fatalf("event %d: the transcoded object differs", i)
				}
			}
			r := do(t, st, "GET", tc.path, "", http.Header{"Accept": {codec.MediaJSON}}, "")
			var l corev1.ConfigMapList
			if err := json.Unmarshal(r.Body, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != len(live) {
				t.Fatalf("LIST at the end: %d items; the recorded events leave %d", len(l.Items), len(live))
			}
			for _, it := range l.Items {
				if !live[it.Name] {
					t.Errorf("LIST holds %s, deleted in the recording", it.Name)
				}
			}
			if l.ResourceVersion != evs[len(evs)-1].rv && evs[len(evs)-1].typ != "BOOKMARK" {
				t.Errorf("LIST resourceVersion %s; the last event's is %s", l.ResourceVersion, evs[len(evs)-1].rv)
			}
		})
	}
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func equalJSON(t testing.TB, a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(ja, jb)
}

func rvOf(t testing.TB, b []byte) string {
	t.Helper()
	var o struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return o.Metadata.ResourceVersion
}

// TestResourceVersionsIncrease interleaves a client's writes with the
// recorded events of basic-json, whose resourceVersions leave no gap:
// every resourceVersion the client sees (write answers, recorded events as
// served) is above the one before, the shifted ones map back to the
// recorded ones, and GETs see the recorded history move on.
func TestResourceVersionsIncrease(t *testing.T) {
	st, f := load(t, "basic-json")
	evs := watchEvents(t, f, "watch=true")
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	last := uint64(0)
	see := func(what, rv string) {
		t.Helper()
		var n uint64
		if _, err := fmt.Sscan(rv, &n); err != nil || n <= last {
			t.Fatalf("%s: resourceVersion %s after %d", what, rv, last)
		}
		last = n
	}
	list := do(t, st, "GET", path, "", nil, "")
	see("LIST", rvOf(t, list.Body))
	shifted := 0
	for i, e := range evs {
		if i%10 == 3 {
			r := do(t, st, "POST", path, "", http.Header{"Content-Type": {"application/json"}},
				fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mine-%d"}}`, i))
			if r.Code != 201 {
				t.Fatalf("create: %d %s", r.Code, r.Body)
			}
			see("create", rvOf(t, r.Body))
		}
		served, changed := st.Observe(e.rv)
		see("event "+e.rv, served)
		if changed {
			shifted++
			if back, ok := st.Recorded(served); !ok || back != e.rv {
				t.Fatalf("Recorded(%s) = %s, %v; want %s", served, back, ok, e.rv)
			}
		}
		if e.typ == "DELETED" {
			continue
		}
		r := do(t, st, "GET", path+"/"+e.name, "", nil, "")
		if r.Code != 200 || rvOf(t, r.Body) != served {
			t.Fatalf("GET %s after event %d: %d, resourceVersion %s; want %s", e.name, i, r.Code, rvOf(t, r.Body), served)
		}
		if changed && !r.Transcoded {
			t.Fatalf("GET with a shifted resourceVersion not marked transcoded")
		}
	}
	if shifted == 0 {
		t.Fatal("no recorded resourceVersion was shifted: the test does not exercise the clock")
	}
	r := do(t, st, "GET", path, "", nil, "")
	var l corev1.ConfigMapList
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, it := range l.Items {
		if strings.HasPrefix(it.Name, "mine-") {
			mine++
		}
	}
	if mine != 20 {
		t.Errorf("LIST holds %d of the client's 20 objects", mine)
	}
}

// TestWatchResume resumes a watch the store serves from every
// resourceVersion a client saw — written or recorded, shifted or not —
// and checks that it continues with exactly the changes after it.
func TestWatchResume(t *testing.T) {
	st, f := load(t, "basic-json")
	evs := watchEvents(t, f, "watch=true")
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	var seen []string // every resourceVersion served, in order
	for i, e := range evs[:60] {
		if i%7 == 0 {
			r := do(t, st, "PUT", path+"/"+e.name, "", http.Header{"Content-Type": {"application/json"}},
				fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"mine":"%d"}}`, e.name, i))
			if r.Code == 200 {
				seen = append(seen, rvOf(t, r.Body))
			}
		}
		served, _ := st.Observe(e.rv)
		seen = append(seen, served)
	}
	for k := 0; k < len(seen); k += 5 {
		from := seen[k]
		w, refused := st.Watch(&world.Request{Method: "GET", Path: path, Query: url.Values{"watch": {"1"}, "resourceVersion": {from}}, Header: http.Header{}})
		if refused != nil {
			t.Fatalf("watch from %s refused: %d %s", from, refused.Code, refused.Body)
		}
		var got []string
		for len(got) < len(seen)-k-1 {
			ev, ok := w.Next()
			if !ok {
				break
			}
			b, err := w.Take(ev)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rvOf(t, bytes.TrimSpace(objectOf(t, b))))
		}
		if want := seen[k+1:]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("watch from %s: resourceVersions\n%v\nwant\n%v", from, got, want)
		}
	}
}

// objectOf returns the object of a framed JSON event.
func objectOf(t testing.TB, ev []byte) []byte {
	_, _, o, err := frame.EventObject(frame.JSON, bytes.TrimSpace(ev))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestWriteSemantics checks, without an apiserver, what
// TestAgainstAPIServer compares with one: the answers a controller relies
// on, against basic-json.
func TestWriteSemantics(t *testing.T) {
	st, f := load(t, "basic-json")
	evs := watchEvents(t, f, "watch=true")
	for _, e := range evs {
		st.Observe(e.rv)
	}
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	var existing corev1.ConfigMapList
	if err := json.Unmarshal(do(t, st, "GET", path, "", nil, "").Body, &existing); err != nil || len(existing.Items) == 0 {
		t.Fatalf("LIST: %v, %d items", err, len(existing.Items))
	}
	js := http.Header{"Content-Type": {"application/json"}}
	created := do(t, st, "POST", path, "", js, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","finalizers":["example.com/f"]},"data":{"a":"1"}}`)
	var cm corev1.ConfigMap
	if err := json.Unmarshal(created.Body, &cm); err != nil || created.Code != 201 || !created.Changed {
		t.Fatalf("create: %d %s", created.Code, created.Body)
	}
	if cm.UID != "00000000-0000-4000-8000-000000000001" || !cm.CreationTimestamp.Time.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) ||
		len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != "controller" {
		t.Fatalf("created object: %s", created.Body)
	}
	steps := []struct {
		name, method, path, query, ct, body string
		code                                int
		reason                              metav1.StatusReason
		check                               func(t *testing.T, b []byte)
	}{
		{name: "second create", method: "POST", path: path, ct: "application/json", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, code: 409, reason: metav1.StatusReasonAlreadyExists},
		{name: "stale update", method: "PUT", path: path + "/x", ct: "application/json", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"100"}}`, code: 409, reason: metav1.StatusReasonConflict},
		{name: "dry run", method: "PATCH", path: path + "/x", query: "dryRun=All", ct: "application/merge-patch+json", body: `{"data":{"a":"2"}}`, code: 200,
			check: func(t *testing.T, b []byte) {
				if rvOf(t, b) != cm.ResourceVersion || !bytes.Contains(b, []byte(`"a":"2"`)) {
					t.Fatalf("dry run answer: %s", b)
				}
			}},
		{name: "dry run changed nothing", method: "GET", path: path + "/x", code: 200,
			check: func(t *testing.T, b []byte) {
				if !bytes.Contains(b, []byte(`"a":"1"`)) || rvOf(t, b) != cm.ResourceVersion {
					t.Fatalf("after a dry run: %s", b)
				}
			}},
		{name: "strategic patch", method: "PATCH", path: path + "/x", ct: "application/strategic-merge-patch+json", body: `{"metadata":{"labels":{"l":"v"}}}`, code: 200},
		{name: "json patch", method: "PATCH", path: path + "/x", ct: "application/json-patch+json", body: `[{"op":"replace","path":"/data/a","value":"3"}]`, code: 200},
		{name: "apply", method: "PATCH", path: path + "/x", query: "fieldManager=ctl", ct: "application/apply-patch+yaml", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  b: applied\n", code: 200,
			check: func(t *testing.T, b []byte) {
				var o corev1.ConfigMap
				json.Unmarshal(b, &o)
				applied := false
				for _, mf := range o.ManagedFields {
					applied = applied || mf.Manager == "ctl" && mf.Operation == metav1.ManagedFieldsOperationApply
				}
				if o.Data["b"] != "applied" || o.Data["a"] != "3" || !applied {
					t.Fatalf("apply: %s", b)
				}
			}},
		{name: "delete with finalizer", method: "DELETE", path: path + "/x", code: 200,
			check: func(t *testing.T, b []byte) {
				var o corev1.ConfigMap
				json.Unmarshal(b, &o)
				if o.DeletionTimestamp == nil || len(o.Finalizers) != 1 {
					t.Fatalf("delete of an object with a finalizer: %s", b)
				}
			}},
		{name: "still there", method: "GET", path: path + "/x", code: 200},
		{name: "remove finalizer", method: "PATCH", path: path + "/x", ct: "application/merge-patch+json", body: `{"metadata":{"finalizers":null}}`, code: 200},
		{name: "gone", method: "GET", path: path + "/x", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "patch of a deleted object", method: "PATCH", path: path + "/x", ct: "application/merge-patch+json", body: `{}`, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "update of a recorded object", method: "PATCH", path: path + "/" + existing.Items[0].Name, ct: "application/merge-patch+json", body: `{"metadata":{"annotations":{"seen":"yes"}}}`, code: 200},
	}
	for _, s := range steps {
		h := http.Header{}
		if s.ct != "" {
			h.Set("Content-Type", s.ct)
		}
		r := do(t, st, s.method, s.path, s.query, h, s.body)
		if r.Code != s.code {
			t.Fatalf("%s: %d %s; want %d", s.name, r.Code, r.Body, s.code)
		}
		if s.reason != "" {
			var stt metav1.Status
			if err := json.Unmarshal(r.Body, &stt); err != nil || stt.Reason != s.reason {
				t.Fatalf("%s: %s; want reason %s", s.name, r.Body, s.reason)
			}
		}
		if s.check != nil {
			s.check(t, r.Body)
		}
	}
}

// TestPaginatedList: multi-watch's client F listed secrets in two pages;
// once the world reaches that LIST the store holds every one of them, and a LIST with a label selector the
// session never recorded is answered from them.
func TestPaginatedList(t *testing.T) {
	st, _ := load(t, "multi-watch")
	// The replay serves the pages (recorded at 541): the world gets there.
	st.Observe("541")
	r := do(t, st, "GET", "/api/v1/namespaces/corpus-multi/secrets", "", nil, "")
	var l corev1.SecretList
	if err := json.Unmarshal(r.Body, &l); err != nil || r.Code != 200 {
		t.Fatalf("LIST: %d %s", r.Code, r.Body)
	}
	if len(l.Items) < 5 {
		t.Fatalf("LIST of secrets: %d items; the recorded pages held more than 4", len(l.Items))
	}
	r = do(t, st, "GET", "/api/v1/namespaces/corpus-multi/secrets", "labelSelector=app%3Dtracked", nil, "")
	var sel corev1.SecretList
	if err := json.Unmarshal(r.Body, &sel); err != nil {
		t.Fatal(err)
	}
	for _, s := range sel.Items {
		if s.Labels["app"] != "tracked" {
			t.Errorf("selector app=tracked answered %s with labels %v", s.Name, s.Labels)
		}
	}
	if len(sel.Items) == 0 || len(sel.Items) == len(l.Items) {
		t.Errorf("selector app=tracked: %d of %d secrets", len(sel.Items), len(l.Items))
	}
}

// TestClock drives the store's numbering with random interleavings of
// served events and writes on basic-json (a recording without gaps):
// everything served is strictly increasing, a served number never
// changes, and Recorded inverts it.
func TestClock(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 20; trial++ {
		st, f := load(t, "basic-json")
		evs := watchEvents(t, f, "watch=true")
		served := map[string]string{}
		last := uint64(0)
		check := func(rv string) {
			var n uint64
			fmt.Sscan(rv, &n)
			if n <= last {
				t.Fatalf("trial %d: %s after %d", trial, rv, last)
			}
			last = n
		}
		for _, e := range evs {
			for rng.Intn(3) == 0 {
				r := do(t, st, "POST", "/api/v1/namespaces/corpus-basic/configmaps", "", http.Header{"Content-Type": {"application/json"}},
					`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"r-"}}`)
				check(rvOf(t, r.Body))
			}
			s, _ := st.Observe(e.rv)
			if prev, ok := served[e.rv]; ok && prev != s {
				t.Fatalf("trial %d: %s served as %s, then %s", trial, e.rv, prev, s)
			}
			if _, ok := served[e.rv]; !ok {
				check(s)
			}
			served[e.rv] = s
			if back, ok := st.Recorded(s); !ok || back != e.rv {
				t.Fatalf("trial %d: Recorded(%s) = %s, %v; want %s", trial, s, back, ok, e.rv)
			}
		}
	}
}

// TestServeRecorded: after a client's write made room below them, recorded
// events, objects and lists go out with their shifted resourceVersions —
// a JSON event with only that string changed, a protobuf event encoded
// again — and untouched while nothing is shifted.
func TestServeRecorded(t *testing.T) {
	for _, sc := range []struct{ scenario, path string }{
		{"basic-json", "/api/v1/namespaces/corpus-basic/configmaps"},
		{"protobuf", "/api/v1/namespaces/corpus-proto/configmaps"},
	} {
		t.Run(sc.scenario, func(t *testing.T) {
			st, f := load(t, sc.scenario)
			evs := watchEvents(t, f, "watch=true")
			ff := evs[0].obj.Format
			ev0 := frame.WatchEvent(ff, evs[0].typ, evs[0].obj.APIVersion, evs[0].obj.Kind, evs[0].obj.Raw)
			out, rewritten, err := st.ServeEvent(ff, ev0)
			if err != nil || rewritten || !bytes.Equal(out, ev0) {
				t.Fatalf("first event: rewritten=%v err=%v", rewritten, err)
			}
			r := do(t, st, "POST", sc.path, "", http.Header{"Content-Type": {"application/json"}}, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mine"}}`)
			if r.Code != 201 {
				t.Fatalf("create: %d %s", r.Code, r.Body)
			}
			var items [][]byte
			for _, e := range evs[1:4] {
				if e.typ == "DELETED" || e.typ == "BOOKMARK" {
					continue
				}
				items = append(items, e.obj.Raw)
			}
			e := evs[1]
			ev := frame.WatchEvent(ff, e.typ, e.obj.APIVersion, e.obj.Kind, e.obj.Raw)
			out, rewritten, err = st.ServeEvent(ff, ev)
			if err != nil || !rewritten {
				t.Fatalf("second event: rewritten=%v err=%v", rewritten, err)
			}
			m, err := frame.Peek(ff, out)
			if err != nil {
				t.Fatal(err)
			}
			if served, _ := st.Recorded(m.ResourceVersion); served != e.rv || m.ResourceVersion == e.rv {
				t.Fatalf("served %s for recorded %s", m.ResourceVersion, e.rv)
			}
			if ff == frame.JSON {
				want := bytes.Replace(ev, []byte(`"resourceVersion":"`+e.rv+`"`), []byte(`"resourceVersion":"`+m.ResourceVersion+`"`), 1)
				if !bytes.Equal(out, want) {
					t.Fatalf("JSON event: more than the resourceVersion changed:\n%s\n%s", clip(out), clip(want))
				}
			}
			// A LIST recorded at the last of these events, items shifted.
			last := evs[3].rv
			body := frame.BuildList(ff, "v1", "ConfigMapList", last, items)
			out, rewritten, err = st.ServeList(ff, body)
			if err != nil || !rewritten {
				t.Fatalf("LIST: rewritten=%v err=%v", rewritten, err)
			}
			l, err := frame.ListItems(ff, out)
			if err != nil {
				t.Fatal(err)
			}
			if back, _ := st.Recorded(l.ResourceVersion); back != last || len(l.Items) != len(items) {
				t.Fatalf("LIST at %s (recorded %s), %d items", l.ResourceVersion, back, len(l.Items))
			}
		})
	}
}

// TestFollow: the writes of a recorded watch's scope come back as the
// events the apiserver would have sent, placed among the recorded ones.
func TestFollow(t *testing.T) {
	st, f := load(t, "basic-json")
	evs := watchEvents(t, f, "watch=true")
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	w, err := st.Follow(path, url.Values{"labelSelector": {"mine=yes"}}, codec.JSON, "205")
	if err != nil || w == nil {
		t.Fatal(w, err)
	}
	next := func(limit string) (string, string) {
		t.Helper()
		ev, ok := w.NextBefore(limit)
		if !ok {
			return "", ""
		}
		b, err := w.Take(ev)
		if err != nil {
			t.Fatal(err)
		}
		m, err := frame.Peek(frame.JSON, bytes.TrimSpace(b))
		if err != nil {
			t.Fatal(err)
		}
		return m.Type, m.Name
	}
	js := http.Header{"Content-Type": {"application/json"}}
	mp := http.Header{"Content-Type": {"application/merge-patch+json"}}
	do(t, st, "POST", path, "", js, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	if typ, _ := next(""); typ != "" {
		t.Fatalf("a write outside the scope came back as %s", typ)
	}
	do(t, st, "PATCH", path+"/a", "", mp, `{"metadata":{"labels":{"mine":"yes"}}}`)
	s1, _ := st.Observe(evs[0].rv) // the recording moves on past the write
	if typ, name := next(s1); typ != "ADDED" || name != "a" {
		t.Fatalf("entering the scope: %s %s; want ADDED a", typ, name)
	}
	w.Advance(s1)
	do(t, st, "PATCH", path+"/a", "", mp, `{"data":{"k":"v"}}`)
	if typ, _ := next(s1); typ != "" {
		t.Fatalf("a write after the recorded event came before it: %s", typ)
	}
	if typ, name := next(""); typ != "MODIFIED" || name != "a" {
		t.Fatalf("update: %s %s; want MODIFIED a", typ, name)
	}
	do(t, st, "PATCH", path+"/a", "", mp, `{"metadata":{"labels":{"mine":"no"}}}`)
	if typ, _ := next(""); typ != "DELETED" {
		t.Fatalf("leaving the scope: %s; want DELETED", typ)
	}
}

// TestStoreWatch: watches the store serves itself — a streaming list in
// protobuf with its initial-events-end bookmark, a Table watch, a watch
// from a resourceVersion older than the session (410 in an ERROR event).
func TestStoreWatch(t *testing.T) {
	st, f := load(t, "basic-json")
	evs := watchEvents(t, f, "watch=true")
	for _, e := range evs[:20] {
		st.Observe(e.rv)
	}
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	open := func(q url.Values, accept string) *world.Watch {
		t.Helper()
		q.Set("watch", "true")
		w, refused := st.Watch(&world.Request{Method: "GET", Path: path, Query: q, Header: http.Header{"Accept": {accept}}})
		if refused != nil || w == nil {
			t.Fatalf("watch %v refused: %+v", q, refused)
		}
		return w
	}
	w := open(url.Values{"sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersionMatch": {"NotOlderThan"}},
		"application/vnd.kubernetes.protobuf;stream=watch")
	init := w.Initial()
	if len(init) < 2 || w.ContentType() != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Fatalf("streaming list: %d initial events, %s", len(init), w.ContentType())
	}
	last := init[len(init)-1]
	m, err := frame.Peek(frame.Protobuf, last[4:])
	if err != nil || m.Type != "BOOKMARK" || !m.InitialEventsEnd {
		t.Fatalf("last initial event: %+v, %v", m, err)
	}
	for _, ev := range init[:len(init)-1] {
		if m, _ := frame.Peek(frame.Protobuf, ev[4:]); m.Type != "ADDED" {
			t.Fatalf("initial event %+v", m)
		}
	}
	tw := open(url.Values{"resourceVersion": {evs[0].rv}}, "application/json;as=Table;v=v1;g=meta.k8s.io")
	n := 0
	for {
		ev, ok := tw.Next()
		if !ok {
			break
		}
		b, err := tw.Take(ev)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Type   string
			Object metav1.Table
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if (n == 0) != (e.Object.ColumnDefinitions != nil) || len(e.Object.Rows) != 1 {
			t.Fatalf("table event %d: %s", n, b)
		}
		n++
	}
	// The store's watch goes on past the world's point: the recording's
	// later changes are its future, paced by the caller.
	if n != len(evs)-1 {
		t.Fatalf("table watch from the first event: %d events; want the %d after it", n, len(evs)-1)
	}
	// Watches of one scope and plain encoding share each event's bytes
	// (encoded once); a Table is the watch's own (its first event carries
	// the columns), and so is a scope's view of a change.
	a := open(url.Values{"resourceVersion": {evs[0].rv}}, "application/json")
	b := open(url.Values{"resourceVersion": {evs[0].rv}}, "application/json")
	tw2 := open(url.Values{"resourceVersion": {evs[0].rv}}, "application/json;as=Table;v=v1;g=meta.k8s.io")
	for i := 0; ; i++ {
		ea, oka := a.Next()
		eb, okb := b.Next()
		if oka != okb {
			t.Fatalf("event %d: one watch has it, the other not", i)
		}
		if !oka {
			break
		}
		ba, err := a.Take(ea)
		if err != nil {
			t.Fatal(err)
		}
		bb, err := b.Take(eb)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba, bb) || &ba[0] != &bb[0] {
			t.Fatalf("event %d: the two watches' bytes are not one shared encoding", i)
		}
		if i == 0 {
			ev, _ := tw2.Next()
			tb, err := tw2.Take(ev)
			if err != nil || !bytes.Contains(tb, []byte(`"columnDefinitions":[{`)) {
				t.Fatalf("a second Table watch's first event lacks the columns: %s, %v", tb, err)
			}
		}
	}
	ew := open(url.Values{"resourceVersion": {"3"}}, "application/json")
	if !ew.Expired() || len(ew.Initial()) != 1 || !bytes.Contains(ew.Initial()[0], []byte(`"code":410`)) {
		t.Fatalf("watch from 3: expired=%v %q", ew.Expired(), ew.Initial())
	}
}

// TestMaxBytes: a store refuses to hold more than its limit, and a write
// beyond it is answered with a Status, not stored.
func TestMaxBytes(t *testing.T) {
	path := wttest.RecordCorpus(t, "basic-json", false)
	f := wttest.OpenSession(t, path)
	if _, err := world.Load(f, world.Options{MaxBytes: 10000}); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("Load with a 10 kB limit: %v", err)
	}
	st, err := world.Load(f, world.Options{MaxBytes: 450 << 10})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 100<<10)
	codes := map[int]int{}
	for i := 0; i < 20; i++ {
		r := do(t, st, "POST", "/api/v1/namespaces/corpus-basic/configmaps", "", http.Header{"Content-Type": {"application/json"}},
			fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big-%d"},"data":{"x":%q}}`, i, big))
		codes[r.Code]++
	}
	if codes[201] == 0 || codes[500] == 0 {
		t.Fatalf("answers %v: want some creates, then refusals", codes)
	}
}

func TestParseClients(t *testing.T) {
	for _, tc := range []struct {
		sel  []string
		n    int
		none bool
		err  bool
	}{
		{nil, 0, false, false},
		{[]string{"none"}, 0, true, false},
		{[]string{"user-agent=kcm", "addr=10.0.0.1"}, 2, false, false},
		{[]string{"none", "addr=10.0.0.1"}, 0, false, true},
		{[]string{"bogus=1"}, 0, false, true},
	} {
		cs, none, err := world.ParseClients(tc.sel)
		if (err != nil) != tc.err || len(cs) != tc.n || none != tc.none {
			t.Errorf("ParseClients(%q) = %d clients, none %v, %v", tc.sel, len(cs), none, err)
		}
	}
}
