package diff

import (
	"testing"

	"github.com/wtrace/wtrace/formats"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		key            string
		watch          bool
		obj            Object
		resource       bool
		scope          string
	}{
		{"GET", "/api/v1/namespaces/demo/configmaps?limit=500&resourceVersion=0", "GET /api/v1/namespaces/demo/configmaps", false,
			Object{Resource: "configmaps", Namespace: "demo"}, true, "watch configmaps -n demo"},
		{"GET", "/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=5&timeoutSeconds=300&allowWatchBookmarks=true", "GET /api/v1/namespaces/demo/configmaps (watch)", true,
			Object{Resource: "configmaps", Namespace: "demo"}, true, "watch configmaps -n demo"},
		{"GET", "/api/v1/watch/namespaces/demo/configmaps?resourceVersion=5", "GET /api/v1/namespaces/demo/configmaps (watch)", true,
			Object{Resource: "configmaps", Namespace: "demo"}, true, "watch configmaps -n demo"},
		{"get", "/apis/apps/v1/deployments?watch=1&labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx", "GET /apis/apps/v1/deployments?fieldSelector=metadata.name=x&labelSelector=app=web (watch)", true,
			Object{Group: "apps", Resource: "deployments"}, true, "watch deployments.apps (all namespaces) labelSelector=app=web fieldSelector=metadata.name=x"},
		{"PUT", "/apis/apps/v1/namespaces/demo/deployments/web/status?fieldManager=ctrl", "PUT /apis/apps/v1/namespaces/demo/deployments/web/status?fieldManager=ctrl", false,
			Object{Group: "apps", Resource: "deployments", Namespace: "demo", Name: "web", Subresource: "status"}, true, ""},
		{"PUT", "/api/v1/namespaces/demo/finalize", "PUT /api/v1/namespaces/demo/finalize", false,
			Object{Resource: "namespaces", Name: "demo", Subresource: "finalize"}, true, ""},
		{"GET", "/api/v1/namespaces/demo", "GET /api/v1/namespaces/demo", false, Object{Resource: "namespaces", Name: "demo"}, true, ""},
		{"GET", "/api/v1/nodes/n1", "GET /api/v1/nodes/n1", false, Object{Resource: "nodes", Name: "n1"}, true, ""},
		{"GET", "/version", "GET /version", false, Object{}, false, "watch /version"},
		{"GET", "/apis/apps/v1", "GET /apis/apps/v1", false, Object{}, false, ""},
		{"GET", "/api/v1", "GET /api/v1", false, Object{}, false, ""},
	} {
		q := parseRequest(&formats.Request{Method: tc.method, Target: tc.target})
		if q.key != tc.key || q.watch != tc.watch || q.obj != tc.obj || q.resource != tc.resource {
			t.Errorf("parseRequest(%s %s) = key %q watch %v obj %+v resource %v; want %q %v %+v %v", tc.method, tc.target, q.key, q.watch, q.obj, q.resource, tc.key, tc.watch, tc.obj, tc.resource)
		}
		if tc.scope != "" && q.scope() != tc.scope {
			t.Errorf("parseRequest(%s %s).scope() = %q; want %q", tc.method, tc.target, q.scope(), tc.scope)
		}
	}
	if q := parseRequest(&formats.Request{Missing: true}); q.key == "" {
		t.Error("a missing request has no key")
	}
	q := parseRequest(&formats.Request{Method: "GET", Target: "/api/v1/pods?watch=1", Header: []formats.Header{{Name: "Accept", Value: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}}})
	if q.as != "Table" || q.key != "GET /api/v1/pods (watch) (as Table)" {
		t.Errorf("a Table watch: as %q key %q", q.as, q.key)
	}
}

func TestObjectString(t *testing.T) {
	for _, tc := range []struct {
		o    Object
		want string
	}{
		{Object{Resource: "configmaps", Namespace: "demo", Name: "cm-1"}, "configmaps demo/cm-1"},
		{Object{Group: "apps", Resource: "deployments", Namespace: "demo", Name: "web", Subresource: "status"}, "deployments.apps demo/web (status)"},
		{Object{Resource: "nodes", Name: "n1"}, "nodes n1"},
		{Object{Resource: "configmaps", Namespace: "demo"}, "configmaps demo (collection)"},
		{Object{Resource: "nodes"}, "nodes (collection)"},
	} {
		if got := tc.o.String(); got != tc.want {
			t.Errorf("%+v.String() = %q; want %q", tc.o, got, tc.want)
		}
	}
}
