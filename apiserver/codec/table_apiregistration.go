package codec

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The APIService columns of kube-aggregator v0.33 (REST.ConvertToTable in
// k8s.io/kube-aggregator/pkg/registry/apiservice/etcd). The kind is not in
// the Scheme: its objects are unstructured.

func init() {
	printers[schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Service", "The reference to the service that hosts this API endpoint."),
			col("Available", "Whether this service is available."),
			colAge},
		cells:        apiServiceCells,
		unstructured: true,
	}
}

func apiServiceCells(o runtime.Object, now time.Time) []any {
	u := o.(*unstructured.Unstructured)
	service := "Local"
	if s, ok, _ := unstructured.NestedMap(u.Object, "spec", "service"); ok && s != nil {
		ns, _, _ := unstructured.NestedString(s, "namespace")
		name, _, _ := unstructured.NestedString(s, "name")
		service = ns + "/" + name
	}
	status := "Unknown"
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if t, _, _ := unstructured.NestedString(c, "type"); t != "Available" {
			continue
		}
		st, _, _ := unstructured.NestedString(c, "status")
		reason, _, _ := unstructured.NestedString(c, "reason")
		status = st
		if st != "True" && reason != "" {
			status = fmt.Sprintf("%s (%s)", st, reason)
		}
		break
	}
	return []any{u.GetName(), service, status, age(u.GetCreationTimestamp(), now)}
}
