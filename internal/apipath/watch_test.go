package apipath

import "testing"

// TestIsWatch: each request as kube-apiserver v1.33 serves it (checked
// against the real one by capture/proxy's TestRealAPIServerWatchOrNot).
func TestIsWatch(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           bool
	}{
		{"GET", "/api/v1/namespaces/x/configmaps?watch=true", true},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=1", true},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=yes", true},
		{"GET", "/api/v1/namespaces/x/configmaps?watch", true},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=&limit=5", true},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=false", false},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=False", false},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=0", false},
		{"GET", "/api/v1/namespaces/x/configmaps?watch=0&watch=1", false}, // the first value counts
		{"GET", "/api/v1/namespaces/x/configmaps", false},
		{"GET", "/api/v1/namespaces/x/configmaps?xwatch=true", false},
		{"GET", "/api/v1/namespaces/x/configmaps?a=%zz&watch=true", true}, // a bad pair is left out
		{"GET", "/api/v1/namespaces/x/configmaps?watch=true%", false},     // the watch pair itself does not decode
		{"GET", "/api/v1/namespaces/x/configmaps/cm?watch=true", false},   // a GET of one object
		{"GET", "/api/v1/namespaces/x/pods/p/status?watch=true", false},   // a subresource
		{"GET", "/api/v1/namespaces?watch=true", true},                    // the namespaces
		{"GET", "/api/v1/namespaces/x?watch=true", false},                 // one namespace
		{"GET", "/api/v1/namespaces/x/status?watch=true", false},          // a namespace's subresource
		{"GET", "/api/v1/configmaps?watch=true", true},                    // all namespaces
		{"GET", "/apis/apps/v1/namespaces/x/deployments?watch=1", true},   // a group
		{"GET", "/apis/apps/v1/deployments?watch=1", true},
		{"GET", "/apis/apps/v1?watch=1", false},                   // discovery
		{"GET", "/api/v1/watch/namespaces/x/configmaps", true},    // the legacy watch segment
		{"GET", "/api/v1/watch/namespaces/x/configmaps/cm", true}, // of one object
		{"GET", "/apis/apps/v1/watch/deployments", true},
		{"GET", "/api/v1/%77atch/configmaps", true},                   // decoded, as routed
		{"GET", "/api/v1/namespaces/watch/configmaps?watch=0", false}, // a namespace named watch
		{"GET", "/api/v1/watch", false},
		{"GET", "http://127.0.0.1:8001/api/v1/configmaps?watch=true", true}, // absolute-form
		{"POST", "/api/v1/namespaces/x/configmaps?watch=true", false},
		{"HEAD", "/api/v1/namespaces/x/configmaps?watch=true", false},
		{"GET", "/healthz?watch=true", false},
		{"GET", "*", false},
		{"GET", "", false},
	} {
		if got := IsWatch(tc.method, tc.target); got != tc.want {
			t.Errorf("IsWatch(%q, %q) = %v; want %v", tc.method, tc.target, got, tc.want)
		}
	}
}

func FuzzIsWatch(f *testing.F) {
	for _, s := range []string{"/api/v1/namespaces/x/configmaps?watch=true", "/apis/a/v1/watch/x", "http://h/api/v1/x?watch", "/api//v1"} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		IsWatch(method, target) // never panics
	})
}
