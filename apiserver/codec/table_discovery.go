package codec

import (
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The EndpointSlice printer of kube-apiserver v1.33 (printEndpointSlice,
// formatDiscoveryPorts, formatDiscoveryEndpoints).

func init() {
	doc := discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	printers[schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("AddressType", doc["addressType"]),
			col("Ports", doc["ports"]),
			col("Endpoints", doc["endpoints"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			s := o.(*discoveryv1.EndpointSlice)
			return []any{s.Name, string(s.AddressType), slicePorts(s.Ports), sliceEndpoints(s.Endpoints), age(s.CreationTimestamp, now)}
		},
	}
}

// slicePorts lists the first three ports (their number, else their name,
// else "*").
func slicePorts(ports []discoveryv1.EndpointPort) string {
	const max = 3
	list := []string{}
	for _, p := range ports {
		if len(list) == max {
			break
		}
		n := "*"
		if p.Port != nil {
			n = strconv.Itoa(int(*p.Port))
		} else if p.Name != nil {
			n = *p.Name
		}
		list = append(list, n)
	}
	return listWithMore(list, len(ports) > max, len(ports), max)
}

// sliceEndpoints lists the first three addresses of all endpoints.
func sliceEndpoints(eps []discoveryv1.Endpoint) string {
	const max = 3
	list := []string{}
	count := 0
	for _, e := range eps {
		for _, a := range e.Addresses {
			if len(list) < max {
				list = append(list, a)
			}
			count++
		}
	}
	return listWithMore(list, count > max, count, max)
}
