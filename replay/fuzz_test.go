package replay

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/wtrace/wtrace/replay/internal/tape"
)

// FuzzRoute feeds arbitrary request lines to the matcher of a real session:
// parsing, matching, resume lookups and synthesis decisions never panic.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		"GET /api/v1/namespaces/corpus-multi/configmaps?watch=true&resourceVersion=423",
		"GET /api/v1/namespaces/corpus-multi/configmaps?watch=1&sendInitialEvents=true",
		"GET /api/v1/namespaces/corpus-multi/secrets?limit=4&continue=abc",
		"GET /api/v1/watch/namespaces?labelSelector=corpus%3Dmulti&resourceVersion=500",
		"GET /apis/apps/v1/watch/deployments?resourceVersion=18446744073709551616",
		"POST /api/v1/namespaces/corpus-multi/configmaps",
		"GET /api?timeout=32s",
		"GET /api/v1/namespaces/corpus-multi/services?watch=true&resourceVersion=617&watch=false",
		"GET %zz",
	} {
		f.Add(s)
	}
	path := corpusSession(f, "multi-watch")
	srv, err := Open(path, Options{Writes: WritesReject})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, line string) {
		method, target := http.MethodGet, line
		for i := 0; i < len(line); i++ {
			if line[i] == ' ' {
				method, target = line[:i], line[i+1:]
				break
			}
		}
		q, err := tape.ParseTarget(method, target)
		if err != nil {
			return
		}
		rt := srv.route(requestFor(method, target, ""), q, nil)
		if rt.Serve == nil || rt.How == "" || rt.Status < 200 {
			t.Fatalf("route(%q) = %+v", line, rt)
		}
	})
}

// FuzzWrite sends arbitrary writes — method, target, Content-Type, body —
// through ServeHTTP of a replay with the world (proxy-like recorded writes
// compared after normalization, the store's answers, the request log):
// never a panic, always an HTTP status.
func FuzzWrite(f *testing.F) {
	for _, s := range []struct{ method, target, ct, body string }{
		{"POST", "/api/v1/namespaces/corpus-basic/configmaps", "application/json", `{"metadata":{"name":"a"},"data":{"k":"v"}}`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/a", "application/merge-patch+json", `{"data":{"k":null}}`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/a", "application/json-patch+json", `[{"op":"remove","path":"/metadata/finalizers"}]`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/a", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"x":"y"}}}`},
		{"PATCH", "/api/v1/namespaces/corpus-basic/configmaps/a?fieldManager=m", "application/apply-patch+yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"},
		{"PUT", "/api/v1/namespaces/corpus-basic/configmaps/a", "application/vnd.kubernetes.protobuf", "k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x05\n\x03\n\x01a"},
		{"DELETE", "/api/v1/namespaces/corpus-basic/configmaps", "application/json", `{"propagationPolicy":"Foreground"}`},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", "application/json", `{"spec":{"replicas":-1}}`},
	} {
		f.Add(s.method, s.target, s.ct, []byte(s.body))
	}
	srv, err := Open(corpusSession(f, "basic-json"), Options{Writes: WritesReject, MaxRequests: 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, method, target, ct string, body []byte) {
		switch method {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || len(target) > 4096 {
			return
		}
		req, err := http.NewRequest(method, "http://127.0.0.1/", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.URL.Path, req.URL.RawPath, req.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
		req.RequestURI = u.RequestURI()
		req.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("%s %s: status %d", method, target, w.Code)
		}
	})
}
