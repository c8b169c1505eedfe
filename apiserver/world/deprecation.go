package world

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// servedMajor and servedMinor are the version of kube-apiserver the world
// answers as (its deprecation warnings name what that version deprecates).
const servedMajor, servedMinor = 1, 33

// The API lifecycle of a kind, as k8s.io/api's types declare it
// (zz_generated.prerelease-lifecycle.go, lifecycle.go).
type (
	deprecatedIn interface{ APILifecycleDeprecated() (major, minor int) }
	removedIn    interface{ APILifecycleRemoved() (major, minor int) }
	replacedBy   interface {
		APILifecycleReplacement() schema.GroupVersionKind
	}
)

// deprecationWarning is the warning kube-apiserver v1.33 adds to every
// answer about a resource whose kind it deprecates
// (k8s.io/apiserver/pkg/endpoints/deprecation): "v1 Endpoints is
// deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice". "" for
// one it does not.
func deprecationWarning(info Info) string {
	obj, err := codec.Scheme().New(info.GVK())
	if err != nil {
		return ""
	}
	d, ok := obj.(deprecatedIn)
	if !ok {
		return ""
	}
	major, minor := d.APILifecycleDeprecated()
	if major == 0 || major > servedMajor || major == servedMajor && minor > servedMinor {
		return ""
	}
	w := fmt.Sprintf("%s %s is deprecated in v%d.%d+", info.APIVersion(), info.Kind, major, minor)
	if r, ok := obj.(removedIn); ok {
		if rmaj, rmin := r.APILifecycleRemoved(); rmaj > 0 {
			w += fmt.Sprintf(", unavailable in v%d.%d+", rmaj, rmin)
		}
	}
	if r, ok := obj.(replacedBy); ok {
		if gvk := r.APILifecycleReplacement(); !gvk.Empty() {
			w += fmt.Sprintf("; use %s %s", gvk.GroupVersion().String(), gvk.Kind)
		}
	}
	return w
}
