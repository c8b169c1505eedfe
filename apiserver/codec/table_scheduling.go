package codec

import (
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The PriorityClass printer of kube-apiserver v1.33 (printPriorityClass).

func init() {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	printers[schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Value", Type: "integer", Description: doc["value"]},
			{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
			colAge,
			col("PreemptionPolicy", doc["preemptionPolicy"])},
		cells: func(o runtime.Object, now time.Time) []any {
			pc := o.(*schedulingv1.PriorityClass)
			policy := ""
			if pc.PreemptionPolicy != nil {
				policy = string(*pc.PreemptionPolicy)
			}
			return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp, now), policy}
		},
	}
}
