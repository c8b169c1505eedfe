package discovery

import "testing"

func TestParseResourcePath(t *testing.T) {
	tests := []struct {
		path string
		want resource
		ok   bool
	}{
		{"/api/v1/namespaces/demo/configmaps", resource{version: "v1", name: "configmaps", namespaced: true, kind: "ConfigMap"}, true},
		{"/api/v1/namespaces/demo/configmaps/cm-1", resource{version: "v1", name: "configmaps", namespaced: true, kind: "ConfigMap"}, true},
		{"/api/v1/namespaces", resource{version: "v1", name: "namespaces", kind: "Namespace"}, true},
		{"/api/v1/namespaces/demo", resource{version: "v1", name: "namespaces", kind: "Namespace"}, true},
		{"/api/v1/nodes", resource{version: "v1", name: "nodes", kind: "Node"}, true},
		{"/api/v1/watch/namespaces/demo/pods", resource{version: "v1", name: "pods", namespaced: true, kind: "Pod"}, true},
		{"/apis/apps/v1/namespaces/demo/deployments", resource{group: "apps", version: "v1", name: "deployments", namespaced: true, kind: "Deployment"}, true},
		// A cluster-wide path of a namespaced resource: its real scope.
		{"/apis/apps/v1/deployments", resource{group: "apps", version: "v1", name: "deployments", namespaced: true, kind: "Deployment"}, true},
		// A custom resource: the scope the path shows.
		{"/apis/example.com/v1/widgets", resource{group: "example.com", version: "v1", name: "widgets"}, true},
		{"/apis/example.com/v1/namespaces/a/widgets/w", resource{group: "example.com", version: "v1", name: "widgets", namespaced: true}, true},
		{"/api/v1", resource{}, false},
		{"/apis/apps", resource{}, false},
		{"/version", resource{}, false},
		{"/", resource{}, false},
	}
	for _, tt := range tests {
		got, ok := parseResourcePath(tt.path)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("parseResourcePath(%q) = %+v, %v; want %+v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/api/v1/namespaces/demo/configmaps", true}, {"/api/v1/namespaces/demo/configmaps/x", false},
		{"/api/v1/namespaces", true}, {"/api/v1/namespaces/demo", false}, {"/apis/apps/v1/deployments", true},
		{"/api/v1/watch/nodes", true}, {"/api", false},
	} {
		if got := IsCollection(c.path); got != c.want {
			t.Errorf("isCollection(%q) = %v; want %v", c.path, got, c.want)
		}
	}
	for in, want := range map[string]string{"widgets": "Widget", "policies": "Policy", "ingressclasses": "Ingressclass", "x": "X"} {
		if got := guessKind(in); got != want {
			t.Errorf("guessKind(%q) = %q; want %q", in, got, want)
		}
	}
}
