package world_test

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// BenchmarkLoad reads basic-json (205 objects from a LIST and 200 watch
// events) into a Store.
func BenchmarkLoad(b *testing.B) {
	path := wttest.RecordCorpus(b, "basic-json", false)
	f := wttest.OpenSession(b, path)
	var size int64
	for _, x := range f.Index().Exchanges {
		size += x.BodyBytes
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := world.Load(f, world.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadSoak reads the real 8-minute soak (testdata/soak: 23
// watches, keep-alive LISTs, 16,337 events) into a Store, as a replay
// does before it serves. Its watches share the session's blocks: each
// block is read once for all of them.
func BenchmarkLoadSoak(b *testing.B) {
	path := filepath.Join(b.TempDir(), "soak.wt")
	if _, err := wttest.RecordPcap(filepath.Join("..", "..", "testdata", "soak", "long-soak", "capture.pcap.zst"), path,
		capture.Options{KeepSecrets: true}); err != nil {
		b.Fatal(err)
	}
	f := wttest.OpenSession(b, path)
	var size int64
	for _, x := range f.Index().Exchanges {
		size += x.BodyBytes
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := world.Load(f, world.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchWrite measures one kind of synthesized write against basic-json.
func benchWrite(b *testing.B, method, path, ct string, body func(i int) string) {
	benchWriteQuery(b, method, path, url.Values{}, ct, body)
}

func benchWriteQuery(b *testing.B, method, path string, q url.Values, ct string, body func(i int) string) {
	st, _ := load(b, "basic-json")
	h := http.Header{"Content-Type": {ct}, "User-Agent": {"bench/1.0"}}
	b.SetBytes(int64(len(body(0))))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, ok := st.Serve(&world.Request{Method: method, Path: path, Query: q, Header: h, Body: []byte(body(i))})
		if !ok || r.Code >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, r.Code, r.Body)
		}
		i++
	}
}

// BenchmarkCreate is the cost of a synthesized create: decode, the
// registry's rules, managedFields, a new resourceVersion, the answer.
func BenchmarkCreate(b *testing.B) {
	benchWrite(b, "POST", "/api/v1/namespaces/corpus-basic/configmaps", "application/json", func(int) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"bench-","labels":{"app":"bench"}},"data":{"k":"v"}}`
	})
}

// BenchmarkMergePatch is a JSON merge patch of a recorded object (each one
// changes it).
func BenchmarkMergePatch(b *testing.B) {
	benchWrite(b, "PATCH", "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", "application/merge-patch+json", func(i int) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{"bench":"%d"}}}`, i)
	})
}

// BenchmarkStrategicPatch is a strategic merge patch of a recorded object.
func BenchmarkStrategicPatch(b *testing.B) {
	benchWrite(b, "PATCH", "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", "application/strategic-merge-patch+json", func(i int) string {
		return fmt.Sprintf(`{"data":{"bench":"%d"}}`, i)
	})
}

// BenchmarkApply is server-side apply of a recorded object.
func BenchmarkApply(b *testing.B) {
	benchWriteQuery(b, "PATCH", "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", url.Values{"fieldManager": {"bench"}}, "application/apply-patch+yaml", func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-0001\ndata:\n  bench: \"%d\"\n", i)
	})
}

// BenchmarkGet is an unrecorded GET of one object (served as recorded).
func BenchmarkGet(b *testing.B) {
	st, _ := load(b, "basic-json")
	r := &world.Request{Method: "GET", Path: "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", Query: url.Values{}, Header: http.Header{}}
	resp, _ := st.Serve(r)
	b.SetBytes(int64(len(resp.Body)))
	b.ReportAllocs()
	for b.Loop() {
		st.Serve(r)
	}
}

// BenchmarkListSelector is an unrecorded LIST with a label selector over
// basic-json's objects.
func BenchmarkListSelector(b *testing.B) {
	st, _ := load(b, "basic-json")
	r := &world.Request{Method: "GET", Path: "/api/v1/namespaces/corpus-basic/configmaps", Query: url.Values{"labelSelector": {"app=corpus,gen in (cm)"}}, Header: http.Header{}}
	resp, _ := st.Serve(r)
	b.SetBytes(int64(len(resp.Body)))
	b.ReportAllocs()
	for b.Loop() {
		st.Serve(r)
	}
}

// BenchmarkWatchSelectorFanout is one change seen by 200 watches with a
// label selector (informers of one kind with a selector, as many
// controllers' are): a merge patch of a recorded ConfigMap, then every
// watch's next event. Each version's labels and fields are decoded once
// for every selector that looks at it.
func BenchmarkWatchSelectorFanout(b *testing.B) {
	st, _ := load(b, "basic-json")
	const path = "/api/v1/namespaces/corpus-basic/configmaps"
	q := url.Values{"watch": {"true"}, "labelSelector": {"app=corpus"}}
	var ws []*world.Watch
	for range 200 {
		w, refused := st.Watch(&world.Request{Method: "GET", Path: path, Query: q, Header: http.Header{}})
		if refused != nil {
			b.Fatalf("watch refused: %d %s", refused.Code, refused.Body)
		}
		ws = append(ws, w)
	}
	h := http.Header{"Content-Type": {"application/merge-patch+json"}}
	i, size := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		body := fmt.Sprintf(`{"metadata":{"annotations":{"bench":"%d"}}}`, i)
		i++
		if r, ok := st.Serve(&world.Request{Method: "PATCH", Path: path + "/cm-0001", Query: url.Values{}, Header: h, Body: []byte(body)}); !ok || r.Code != 200 {
			b.Fatalf("PATCH: %d %s", r.Code, r.Body)
		}
		for _, w := range ws {
			ev, ok := w.Next()
			if !ok {
				b.Fatal("a watch saw no event of the patch")
			}
			e, err := w.Take(ev)
			if err != nil {
				b.Fatal(err)
			}
			size = len(e)
		}
	}
	b.SetBytes(int64(size * len(ws)))
}
