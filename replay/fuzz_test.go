package replay

import (
	"net/http"
	"testing"
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
	srv, err := Open(path, Options{})
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
		q, err := parseTarget(method, target)
		if err != nil {
			return
		}
		rt := srv.route(requestFor(method, target, ""), q, nil)
		if rt.serve == nil || rt.how == "" || rt.status < 200 {
			t.Fatalf("route(%q) = %+v", line, rt)
		}
	})
}
