package world_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/apiserver/world"
)

// FuzzServe sends arbitrary requests — method, path, query, content type,
// body: a client's bytes — to a store holding basic-json: nothing panics,
// every answer has a status code and a body, and watches start or are
// refused.
func FuzzServe(f *testing.F) {
	seeds := []struct{ method, path, query, ct, body string }{
		{"GET", "/api/v1/namespaces/corpus-basic/configmaps", "labelSelector=app%3Dcorpus", "", ""},
		{"POST", "/api/v1/namespaces/corpus-basic/configmaps", "", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"x-"}}`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", "", "application/json-patch+json", `[{"op":"add","path":"/data/x","value":"y"}]`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/cm-0001", "", "application/strategic-merge-patch+json", `{"metadata":{"finalizers":["a"]}}`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/s", "fieldManager=f", "application/apply-patch+yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n"},
		{"DELETE", "/api/v1/namespaces/corpus-basic/configmaps", "fieldSelector=metadata.name%3Dcm-0002", "", ""},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", "", "application/json", `{"spec":{"replicas":3}}`},
		{"GET", "/api/v1/namespaces/corpus-basic/configmaps", "watch=1&resourceVersion=206", "", ""},
		{"GET", "/api/v1/namespaces/corpus-basic/configmaps", "limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjA2LCJzdGFydCI6Ii9jbS0wMDAxXHUwMDAwIn0", "", ""},
		{"POST", "/api/v1/namespaces/corpus-basic/pods/p/binding", "", "application/json", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"name":"n"}}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.ct, []byte(s.body))
	}
	st, _ := load(f, "basic-json")
	f.Fuzz(func(t *testing.T, method, path, query, ct string, body []byte) {
		q, err := url.ParseQuery(query)
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		h := http.Header{"Content-Type": {ct}, "Accept": {"application/json, */*"}}
		r := &world.Request{Method: method, Path: path, Query: q, Header: h, Body: body}
		if q.Get("watch") != "" {
			w, refused := st.Watch(r)
			if w != nil {
				for i := 0; i < 3; i++ {
					ev, ok := w.Next()
					if !ok {
						break
					}
					if _, err := w.Take(ev); err != nil {
						t.Fatalf("Take: %v", err)
					}
				}
			} else if refused != nil && refused.Code < 400 {
				t.Fatalf("watch refused with %d", refused.Code)
			}
			return
		}
		resp, ok := st.Serve(r)
		if ok && (resp.Code < 200 || len(resp.Body) == 0 || resp.ContentType == "") {
			t.Fatalf("%s %s: %+v", method, path, resp)
		}
	})
}
