package metrics

import (
	"testing"

	"github.com/wtrace/wtrace/internal/apipath"
)

// TestRequestInfo: verbs and resources as kube-apiserver's
// RequestInfoFactory reads them.
func TestRequestInfo(t *testing.T) {
	for _, c := range []struct {
		method, target string
		want           requestInfo
	}{
		{"GET", "/api/v1/namespaces/demo/configmaps?watch=true", requestInfo{verb: "watch", resource: "configmaps"}},
		{"GET", "/api/v1/watch/namespaces/demo/configmaps", requestInfo{verb: "watch", resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/demo/configmaps", requestInfo{verb: "list", resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/demo/configmaps/cm-1", requestInfo{verb: "get", resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/demo", requestInfo{verb: "get", resource: "namespaces"}},
		{"PUT", "/api/v1/namespaces/demo/finalize", requestInfo{verb: "update", resource: "namespaces", subresource: "finalize"}},
		{"GET", "/apis/apps/v1/deployments", requestInfo{verb: "list", group: "apps", resource: "deployments"}},
		{"PATCH", "/apis/apps/v1/namespaces/x/deployments/d/scale?dryRun=All", requestInfo{verb: "patch", group: "apps", resource: "deployments", subresource: "scale", dryRun: true}},
		{"POST", "/api/v1/namespaces/demo/configmaps", requestInfo{verb: "create", resource: "configmaps"}},
		{"DELETE", "/api/v1/namespaces/demo/configmaps", requestInfo{verb: "deletecollection", resource: "configmaps"}},
		{"DELETE", "/api/v1/namespaces/demo/configmaps/a", requestInfo{verb: "delete", resource: "configmaps"}},
		{"GET", "/apis/apps/v1", requestInfo{verb: "get"}},
		{"GET", "/version", requestInfo{verb: "get"}},
		{"GET", "/", requestInfo{verb: "get"}},
	} {
		r, err := apipath.Parse(c.method, c.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestInfoOf(r); got != c.want {
			t.Errorf("requestInfoOf(Parse(%s, %q)) = %+v; want %+v", c.method, c.target, got, c.want)
		}
	}
}
