package apipath

import (
	"net/url"
	"reflect"
	"testing"
)

func TestStripWatchSegment(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		watch    bool
	}{
		{"/api/v1/watch/namespaces/x/pods", "/api/v1/namespaces/x/pods", true},
		{"/api/v1/watch/pods", "/api/v1/pods", true},
		{"/apis/apps/v1/watch/namespaces/x/deployments", "/apis/apps/v1/namespaces/x/deployments", true},
		{"/api/v1/namespaces/x/pods", "/api/v1/namespaces/x/pods", false},
		{"/api/v1/namespaces/watch/pods", "/api/v1/namespaces/watch/pods", false}, // a namespace named watch
		{"/apis/apps/watch", "/apis/apps/watch", false},
		{"/healthz", "/healthz", false},
		{"", "", false},
	} {
		got, watch := StripWatchSegment(tc.in)
		if got != tc.want || watch != tc.watch {
			t.Errorf("StripWatchSegment(%q) = %q, %v; want %q, %v", tc.in, got, watch, tc.want, tc.watch)
		}
	}
}

func TestStableParams(t *testing.T) {
	vals := url.Values{
		"watch":           {"true"},
		"resourceVersion": {"12"},
		"labelSelector":   {"b=2", "a=1"},
		"fieldSelector":   {"metadata.name=x"},
		"timeoutSeconds":  {"30"},
	}
	got := StableParams(vals)
	want := []Param{{"fieldSelector", "metadata.name=x"}, {"labelSelector", "a=1"}, {"labelSelector", "b=2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StableParams = %v; want %v", got, want)
	}
	if got := StableParams(url.Values{"limit": {"500"}}); len(got) != 0 {
		t.Errorf("StableParams(limit only) = %v; want none", got)
	}
}

func TestParseResource(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Resource
		ok   bool
	}{
		{"/api/v1/namespaces/x/pods", Resource{Version: "v1", Resource: "pods", Namespace: "x"}, true},
		{"/api/v1/namespaces/x/pods/p/status", Resource{Version: "v1", Resource: "pods", Namespace: "x", Name: "p", Subresource: "status"}, true},
		{"/api/v1/namespaces/x/pods/p/proxy/a/b", Resource{Version: "v1", Resource: "pods", Namespace: "x", Name: "p", Subresource: "proxy/a/b"}, true},
		{"/apis/apps/v1/namespaces/x/deployments/d/scale", Resource{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "x", Name: "d", Subresource: "scale"}, true},
		{"/apis/apps/v1/deployments", Resource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"/api/v1/namespaces", Resource{Version: "v1", Resource: "namespaces"}, true},
		{"/api/v1/namespaces/x", Resource{Version: "v1", Resource: "namespaces", Name: "x"}, true},
		{"/api/v1/namespaces/x/status", Resource{Version: "v1", Resource: "namespaces", Name: "x", Subresource: "status"}, true},
		{"/api/v1/namespaces/x/finalize", Resource{Version: "v1", Resource: "namespaces", Name: "x", Subresource: "finalize"}, true},
		{"/api/v1/nodes/n1", Resource{Version: "v1", Resource: "nodes", Name: "n1"}, true},
		{"/apis/apps/v1", Resource{}, false},
		{"/api/v1", Resource{}, false},
		{"/version", Resource{}, false},
		{"/api/v1/", Resource{}, false},
		{"", Resource{}, false},
	} {
		got, ok := ParseResource(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseResource(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
