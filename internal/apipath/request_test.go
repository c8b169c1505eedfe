package apipath

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParse: the facts of a request, as kube-apiserver v1.33's
// RequestInfoFactory and handlers read them (the watch decision checked
// against the real one by TestParseAgainstAPIServer).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           Request // Query and Key not compared
	}{
		{"GET", "/api/v1/namespaces/x/configmaps?watch=true&resourceVersion=5&timeoutSeconds=30&labelSelector=a%3Db",
			Request{Method: "GET", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Watch: true, Verb: "watch", ResourceVersion: "5", LabelSelector: "a=b", Timeout: 30 * time.Second}},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=yes",
			Request{Method: "GET", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Watch: true, Verb: "watch"}},
		{"GET", "/api/v1/namespaces/x/configmaps?watch",
			Request{Method: "GET", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Watch: true, Verb: "watch"}},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=FALSE&limit=500&continue=c",
			Request{Method: "GET", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Verb: "list", Continue: "c"}},
		{"GET", "/api/v1/namespaces/x/pods/p?watch=1", // a GET of one object
			Request{Method: "GET", Path: "/api/v1/namespaces/x/pods/p", Resource: Resource{Version: "v1", Resource: "pods", Namespace: "x", Name: "p"},
				IsResource: true, Verb: "get"}},
		{"GET", "/api/v1/watch/namespaces/x/pods/p", // a watch of one object
			Request{Method: "GET", Path: "/api/v1/namespaces/x/pods/p", Resource: Resource{Version: "v1", Resource: "pods", Namespace: "x", Name: "p"},
				IsResource: true, LegacyWatch: true, Watch: true, Verb: "watch"}},
		{"GET", "/apis/apps/v1/%77atch/deployments?sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
			Request{Method: "GET", Path: "/apis/apps/v1/deployments", Resource: Resource{Group: "apps", Version: "v1", Resource: "deployments"},
				IsResource: true, LegacyWatch: true, Watch: true, Verb: "watch", ResourceVersionMatch: "NotOlderThan", SendInitialEvents: true}},
		{"POST", "/api/v1/namespaces/x/configmaps?watch=true&dryRun=All",
			Request{Method: "POST", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Verb: "create", DryRun: true}},
		{"delete", "/api/v1/namespaces/x/configmaps?fieldSelector=metadata.name%3Dy",
			Request{Method: "DELETE", Path: "/api/v1/namespaces/x/configmaps", Resource: Resource{Version: "v1", Resource: "configmaps", Namespace: "x"},
				IsResource: true, Verb: "deletecollection", FieldSelector: "metadata.name=y"}},
		{"PATCH", "/api/v1/namespaces/x/pods/p/status",
			Request{Method: "PATCH", Path: "/api/v1/namespaces/x/pods/p/status", Resource: Resource{Version: "v1", Resource: "pods", Namespace: "x", Name: "p", Subresource: "status"},
				IsResource: true, Verb: "patch"}},
		{"GET", "/api/v1/pods?xwatch=true&timeoutSeconds=99999999999&watch=true%", // a pair that does not decode is left out
			Request{Method: "GET", Path: "/api/v1/pods", Resource: Resource{Version: "v1", Resource: "pods"}, IsResource: true, Verb: "list"}},
		{"GET", "/version?watch=1",
			Request{Method: "GET", Path: "/version", Verb: "get"}},
		{"GET", "http://127.0.0.1:8001/api/v1/pods?watch=0", // absolute-form, through a proxy
			Request{Method: "GET", Path: "/api/v1/pods", Resource: Resource{Version: "v1", Resource: "pods"}, IsResource: true, Verb: "list"}},
	} {
		got, err := Parse(tc.method, tc.target)
		if err != nil {
			t.Errorf("Parse(%q, %q) = %v", tc.method, tc.target, err)
			continue
		}
		if got.Key == "" || got.Query == nil {
			t.Errorf("Parse(%q, %q): no key or query", tc.method, tc.target)
		}
		got.Key, got.Query = "", nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q, %q) = %+v; want %+v", tc.method, tc.target, got, tc.want)
		}
	}
	for _, bad := range []string{"", "nopath", "/" + strings.Repeat("a", MaxTargetLen)} {
		if _, err := Parse("GET", bad); err == nil {
			t.Errorf("Parse(GET, %.20q) = nil error; want one", bad)
		}
	}
}

// FuzzParse: any request-target is read or refused, never a panic; one
// read has a key, a bounded timeout, and a watch only of a GET.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5&timeoutSeconds=30",
		"/api/v1/watch/namespaces/a/configmaps?labelSelector=app%3Dx",
		"/api/v1/pods?watch=false&sendInitialEvents=true&timeoutSeconds=abc",
		"/api/v1/pods?continue=tok&timeoutSeconds=99999999999",
		"/a?%zz",
		"nopath",
	} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		r, err := Parse(method, target)
		if err != nil {
			return
		}
		if len(target) > MaxTargetLen || r.Key == "" || r.Method != strings.ToUpper(method) || r.Timeout < 0 || r.Timeout > maxTimeout ||
			r.Watch && r.Method != "GET" {
			t.Fatalf("Parse(%q, %q) = %+v", method, target, r)
		}
	})
}
