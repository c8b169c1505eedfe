package codec

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The PodDisruptionBudget printer of kube-apiserver v1.33
// (printPodDisruptionBudget).

func init() {
	printers[schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Min Available", "The minimum number of pods that must be available."),
			col("Max Unavailable", "The maximum number of pods that may be unavailable."),
			{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			pdb := o.(*policyv1.PodDisruptionBudget)
			minAvailable, maxUnavailable := "N/A", "N/A"
			if pdb.Spec.MinAvailable != nil {
				minAvailable = pdb.Spec.MinAvailable.String()
			}
			if pdb.Spec.MaxUnavailable != nil {
				maxUnavailable = pdb.Spec.MaxUnavailable.String()
			}
			return []any{pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed), age(pdb.CreationTimestamp, now)}
		},
	}
}
