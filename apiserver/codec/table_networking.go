package codec

import (
	"fmt"
	"strings"
	"time"

	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The printers of kube-apiserver v1.33 for networking.k8s.io's Ingress,
// IngressClass, IPAddress, NetworkPolicy and ServiceCIDR (printIngress, …).

func init() {
	const group = "networking.k8s.io"
	printers[schema.GroupKind{Group: group, Kind: "Ingress"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Class", "The name of the IngressClass resource that should be used for additional configuration"),
			col("Hosts", "Hosts that incoming requests are matched against before the ingress rule"),
			col("Address", "Address is a list containing ingress points for the load-balancer"),
			col("Ports", "Ports of TLS configurations that open"),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			in := o.(*networkingv1.Ingress)
			class := "<none>"
			if in.Spec.IngressClassName != nil {
				class = *in.Spec.IngressClassName
			}
			ports := "80"
			if len(in.Spec.TLS) != 0 {
				ports = "80, 443"
			}
			// The apiserver prints wide: the address is not clipped.
			addrs := sets.New[string]()
			for _, lb := range in.Status.LoadBalancer.Ingress {
				if lb.IP != "" {
					addrs.Insert(lb.IP)
				} else if lb.Hostname != "" {
					addrs.Insert(lb.Hostname)
				}
			}
			return []any{in.Name, class, ingressHosts(in.Spec.Rules), strings.Join(sets.List(addrs), ","), ports, age(in.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "IngressClass"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Controller", "Controller that is responsible for handling this class"),
			col("Parameters", "A reference to a resource with additional parameters"),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			ic := o.(*networkingv1.IngressClass)
			params := "<none>"
			if p := ic.Spec.Parameters; p != nil {
				params = p.Kind
				if p.APIGroup != nil {
					params += "." + *p.APIGroup
				}
				params += "/" + p.Name
			}
			return []any{ic.Name, ic.Spec.Controller, params, age(ic.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "IPAddress"}] = printer{
		// No Age column, though each row has an age cell (as the apiserver's).
		columns: []metav1.TableColumnDefinition{colName, col("ParentRef", doc133["IPAddressSpec.parentRef"])},
		cells: func(o runtime.Object, now time.Time) []any {
			ip := o.(*networkingv1.IPAddress)
			parent := "<none>"
			if p := ip.Spec.ParentRef; p != nil {
				parent = strings.ToLower(schema.GroupResource{Group: p.Group, Resource: p.Resource}.String())
				if p.Namespace != "" {
					parent += "/" + p.Namespace
				}
				parent += "/" + p.Name
			}
			return []any{ip.Name, parent, age(ip.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "NetworkPolicy"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Pod-Selector", extensionsv1beta1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]), colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			np := o.(*networkingv1.NetworkPolicy)
			return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "ServiceCIDR"}] = printer{
		columns: []metav1.TableColumnDefinition{colName, col("CIDRs", doc133["ServiceCIDRSpec.cidrs"]), colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			sc := o.(*networkingv1.ServiceCIDR)
			return []any{sc.Name, strings.Join(sc.Spec.CIDRs, ","), age(sc.CreationTimestamp, now)}
		},
	}
}

// ingressHosts lists the hosts of the first three rules ("*" for none)
// and how many rules more.
func ingressHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	list := []string{}
	more := false
	for _, r := range rules {
		if len(list) == max {
			more = true
		}
		if !more && r.Host != "" {
			list = append(list, r.Host)
		}
	}
	if len(list) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(list, ","), len(rules)-max)
	}
	return strings.Join(list, ",")
}
