package codec

import (
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The RuntimeClass printer of kube-apiserver v1.33 (printRuntimeClass).

func init() {
	printers[schema.GroupKind{Group: "node.k8s.io", Kind: "RuntimeClass"}] = printer{
		// The apiserver takes the Handler column's description from
		// ObjectMeta's docs, which have no "handler": it is empty.
		columns: []metav1.TableColumnDefinition{colName, col("Handler", objectMetaDoc["handler"]), colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			rc := o.(*nodev1.RuntimeClass)
			return []any{rc.Name, rc.Handler, age(rc.CreationTimestamp, now)}
		},
	}
}
