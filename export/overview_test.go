package export

import "testing"

// TestKubectlWatch: a recorded watch's path as the kubectl command that
// watches the same, read as kube-apiserver reads the path.
func TestKubectlWatch(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=5", "get configmaps -n demo -w"},
		{"/api/v1/pods?watch=1", "get pods -w"},
		{"/apis/apps/v1/namespaces/demo/deployments?watch=true", "get deployments.apps -n demo -w"},
		{"/apis/apps/v1/deployments", "get deployments.apps -w"},
		{"/api/v1/watch/namespaces/demo/configmaps", "get configmaps -n demo -w"}, // the legacy watch segment
		{"/api/v1/namespaces", "get namespaces -w"},
		{"/api/v1/namespaces/demo/configmaps/cm-1?watch=true", ""}, // one object: no list
		{"/apis/apps/v1/namespaces/demo/deployments/web/status", ""},
		{"/version", ""},
		{"/apis/apps/v1", ""},
		{"not a path", ""},
	} {
		if got := KubectlWatch(tc.path); got != tc.want {
			t.Errorf("KubectlWatch(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
