package codec

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// The APIService columns of kube-aggregator v0.33 (REST.ConvertToTable in
// k8s.io/kube-aggregator/pkg/registry/apiservice/etcd).

func init() {
	printers[schema.GroupKind{Group: apiregistrationv1.GroupName, Kind: "APIService"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Service", "The reference to the service that hosts this API endpoint."),
			col("Available", "Whether this service is available."),
			colAge},
		cells: apiServiceCells,
	}
}

// apiServiceCells: the service as namespace/name ("Local" without one),
// the Available condition's status (with its reason unless True;
// "Unknown" without one), the age.
func apiServiceCells(o runtime.Object, now time.Time) []any {
	as := o.(*apiregistrationv1.APIService)
	service := "Local"
	if s := as.Spec.Service; s != nil {
		service = s.Namespace + "/" + s.Name
	}
	status := "Unknown"
	for _, c := range as.Status.Conditions {
		if c.Type != apiregistrationv1.Available {
			continue
		}
		status = string(c.Status)
		if c.Status != apiregistrationv1.ConditionTrue && c.Reason != "" {
			status = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
		break
	}
	return []any{as.Name, service, status, age(as.CreationTimestamp, now)}
}
