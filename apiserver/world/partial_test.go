package world_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestMetadataViewsNeverShadow: in a recording of kube-controller-manager
// with its garbage collector, the collector's metadata informers see
// Deployments, ReplicaSets and Pods as PartialObjectMetadata, often before
// the typed informers see the same versions. The world keeps the whole
// objects: a typed LIST answers every item whole (a spec, no
// PartialObjectMetadata), whatever order the session's records come in.
func TestMetadataViewsNeverShadow(t *testing.T) {
	f := wttest.OpenSession(t, filepath.Join("..", "..", "diff", "testdata", "kcm", "gc-1.wt"))
	st, err := world.Load(f, world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.ObserveN(1 << 62) // the world as the session ends
	h := http.Header{"Accept": {"application/json"}}
	for _, path := range []string{"/apis/apps/v1/deployments", "/apis/apps/v1/replicasets", "/api/v1/pods"} {
		r := do(t, st, "GET", path, "", h, "")
		var list struct {
			Items []map[string]json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &list); r.Code != 200 || err != nil || len(list.Items) == 0 {
			t.Fatalf("GET %s: %d %v %.300s", path, r.Code, err, r.Body)
		}
		for _, it := range list.Items {
			if _, ok := it["spec"]; !ok {
				t.Errorf("GET %s: an item without its spec: %.300s", path, it["metadata"])
			}
		}
	}
}

// TestMetadataViewFirst: a metadata informer's watch sees a ConfigMap's
// version before a typed informer's watch sees the same version (its
// event comes first in the session). The typed GET answers the whole
// ConfigMap, and a view of a version the typed watch never saw stays
// the world's only knowledge of it.
func TestMetadataViewFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.wt")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(r formats.Record) {
		t.Helper()
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	const (
		partialCM = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"%s","namespace":"ns","resourceVersion":"%d"}}`
		wholeCM   = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"%s","namespace":"ns","resourceVersion":"%d"},"data":{"k":"v"}}`
	)
	ev := func(typ, obj string) []byte { return []byte(`{"type":"` + typ + `","object":` + obj + "}\n") }
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC).UnixNano()
	must(&formats.Meta{Tool: "wtrace test", Source: "synthetic"})
	for i, accept := range []string{"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "application/json"} {
		id := int64(i)
		must(&formats.Conn{ID: uint64(i), Time: at, Client: "127.0.0.1:50000", Server: "127.0.0.1:6443", Proto: "http/1.1"})
		must(&formats.Request{Exchange: id, Conn: uint64(i), Time: at, Method: "GET", Proto: "HTTP/1.1",
			Target: "/api/v1/namespaces/ns/configmaps?resourceVersion=1&watch=true", Header: []formats.Header{{Name: "Accept", Value: accept}}})
		must(&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: at})
		must(&formats.Response{Exchange: id, Time: at + 1, Proto: "HTTP/1.1", Status: 200, Events: frame.JSON,
			Header: []formats.Header{{Name: "Content-Type", Value: "application/json"}}, Framing: formats.FramingChunked})
	}
	frames := []struct {
		x    int64
		data []byte
	}{
		{0, ev("ADDED", fmt.Sprintf(partialCM, "a", 5))},
		{0, ev("ADDED", fmt.Sprintf(partialCM, "b", 6))}, // only the metadata view
		{1, ev("ADDED", fmt.Sprintf(wholeCM, "a", 5))},
		{0, ev("MODIFIED", fmt.Sprintf(partialCM, "a", 7))},
		{1, ev("MODIFIED", fmt.Sprintf(wholeCM, "a", 7))},
	}
	seq := map[int64]int64{}
	for i, fr := range frames {
		must(&formats.Frame{Exchange: fr.x, Seq: seq[fr.x], Time: at + int64(i+2)*int64(time.Millisecond), Data: fr.data})
		seq[fr.x]++
	}
	must(&formats.Summary{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file.Close()

	st, err := world.Load(wttest.OpenSession(t, path), world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.ObserveN(1 << 62)
	h := http.Header{"Accept": {"application/json"}}
	for _, tc := range []struct{ name, want string }{
		{"a", `"kind":"ConfigMap"`},
		{"b", `"kind":"PartialObjectMetadata"`},
	} {
		r := do(t, st, "GET", "/api/v1/namespaces/ns/configmaps/"+tc.name, "", h, "")
		if r.Code != 200 || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("GET %s: %d %s; want %s", tc.name, r.Code, r.Body, tc.want)
		}
	}
}
