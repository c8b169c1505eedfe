package codec

import (
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The ControllerRevision printer of kube-apiserver v1.33
// (printControllerRevision); apps' other kinds are in table.go.

func init() {
	printers[schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Controller", "Controller of the object"),
			col("Revision", appsv1beta1.ControllerRevision{}.SwaggerDoc()["revision"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			cr := o.(*appsv1.ControllerRevision)
			return []any{cr.Name, controllerName(cr), cr.Revision, age(cr.CreationTimestamp, now)}
		},
	}
}

// controllerName is "kind.group/name" of obj's controller, lower case,
// or "<none>".
func controllerName(obj metav1.Object) string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return "<none>"
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "<none>"
	}
	gk := gv.WithKind(ref.Kind).GroupKind()
	if gk.Empty() {
		return ref.Name
	}
	return strings.ToLower(gk.String()) + "/" + ref.Name
}
