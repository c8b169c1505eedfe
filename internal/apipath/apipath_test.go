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

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		watch        bool
		query        string
		want         string
	}{
		{"GET", "/api/v1/pods", false, "", "GET /api/v1/pods"},
		{"GET", "/api/v1/pods", true, "watch=1&resourceVersion=5&timeoutSeconds=30", "GET /api/v1/pods (watch)"},
		{"GET", "/api/v1/pods", false, "labelSelector=b%3D2&fieldSelector=spec.nodeName%3Dn&limit=500", "GET /api/v1/pods?fieldSelector=spec.nodeName=n&labelSelector=b=2"},
		{"POST", "/api/v1/namespaces/a/configmaps", false, "fieldManager=m", "POST /api/v1/namespaces/a/configmaps?fieldManager=m"},
	} {
		vals, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := Key(tc.method, tc.path, tc.watch, vals); got != tc.want {
			t.Errorf("Key(%s %s %v %s) = %q; want %q", tc.method, tc.path, tc.watch, tc.query, got, tc.want)
		}
	}
	// The order of the parameters does not matter.
	a, _ := url.ParseQuery("labelSelector=x&fieldSelector=y")
	b, _ := url.ParseQuery("fieldSelector=y&labelSelector=x")
	if Key("GET", "/p", false, a) != Key("GET", "/p", false, b) {
		t.Error("Key depends on the parameters' order")
	}
}
