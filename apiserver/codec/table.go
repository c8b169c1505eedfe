package codec

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TableOptions are the query parameters of a Table request.
type TableOptions struct {
	// IncludeObject is what each row's object holds: "Metadata" (the
	// default: PartialObjectMetadata), "Object" or "None".
	IncludeObject string
}

// ParseTableOptions reads includeObject from a request's query, refusing
// unknown values with the apiserver's 400.
func ParseTableOptions(includeObject string) (TableOptions, error) {
	switch includeObject {
	case "", string(metav1.IncludeMetadata), string(metav1.IncludeObject), string(metav1.IncludeNone):
		return TableOptions{IncludeObject: includeObject}, nil
	}
	return TableOptions{}, NewStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest,
		fmt.Sprintf(`Unable to convert to Table as requested: includeObject: Invalid value: %q: must be 'Metadata', 'Object', 'None', or empty`, includeObject))
}

// printer gives a kind's Table columns and the cells of one object (the
// apiserver prints wide: columns of priority 1 have cells too).
type printer struct {
	columns    []metav1.TableColumnDefinition
	cells      func(obj runtime.Object, now time.Time) []any
	conditions func(obj runtime.Object) []metav1.TableRowCondition // nil: none
	// order, when set, sorts a list's objects in place before their rows
	// are printed, as the kind's list printer does (FlowSchemas by
	// precedence); nil keeps the list's order.
	order func(objs []runtime.Object)
}

var (
	objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()
	colName       = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
	colAge        = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
	colContainers = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	colImages     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

// doc133 holds the swagger docs of k8s.io/api v0.33 (what kube-apiserver
// v1.33 writes as column descriptions) where the k8s.io/api this module
// builds with words them differently or no longer has the type
// (autoscaling/v2beta1), keyed "Type.field".
var doc133 = map[string]string{
	"CSIDriverSpec.attachRequired":                  "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the CSIDriverRegistry feature gate is enabled and the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.",
	"RoleBinding.roleRef":                           "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
	"ClusterRoleBinding.roleRef":                    "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
	"IPAddressSpec.parentRef":                       "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.",
	"ServiceCIDRSpec.cidrs":                         "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.",
	"HorizontalPodAutoscalerSpec.scaleTargetRef":    "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
	"HorizontalPodAutoscalerSpec.metrics":           "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond.",
	"HorizontalPodAutoscalerSpec.minReplicas":       "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
	"HorizontalPodAutoscalerSpec.maxReplicas":       "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
	"HorizontalPodAutoscalerStatus.currentReplicas": "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
}

// col is a column of type string with no format (most of them).
func col(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// orNone is s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// boolPtrCell is the apiserver's printBoolPtr.
func boolPtrCell(b *bool) string {
	switch {
	case b == nil:
		return "<unset>"
	case *b:
		return "True"
	}
	return "False"
}

// derefBool is *b, or def when b is nil.
func derefBool(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// listWithMore joins list, telling how many of count were left out beyond
// max, "<unset>" for none (the apiserver's listWithMoreString).
func listWithMore(list []string, more bool, count, max int) string {
	ret := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", ret, count-max)
	}
	if ret == "" {
		ret = "<unset>"
	}
	return ret
}

// defaultColumns are the apiserver's columns for kinds without printers
// (k8s.io/apiserver/pkg/registry/rest.defaultTableConvertor).
var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]},
	{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
}

// printers holds the kinds whose apiserver printers
// (k8s.io/kubernetes/pkg/printers/internalversion) are reproduced.
var printers = map[schema.GroupKind]printer{
	{Kind: "ConfigMap"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]}, colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			cm := o.(*corev1.ConfigMap)
			return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
		},
	},
	{Kind: "Secret"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
			{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]}, colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			s := o.(*corev1.Secret)
			return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
		},
	},
	{Kind: "Namespace"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Status", Type: "string", Description: "The status of the namespace"}, colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			ns := o.(*corev1.Namespace)
			return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
		},
	},
	{Kind: "Service"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
			{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
			{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
			{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
			colAge,
			{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]}},
		cells: serviceCells,
	},
	{Kind: "Event"}: {
		columns: []metav1.TableColumnDefinition{
			{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
			{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
			{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
			{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
			{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
			{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
			{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
			{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
			{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
			{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: objectMetaDoc["name"]}},
		cells: eventCells,
	},
	{Kind: "PodTemplate"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
			{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."}},
		cells: func(o runtime.Object, now time.Time) []any {
			pt := o.(*corev1.PodTemplate)
			names, images := containerCells(pt.Template.Spec.Containers)
			return []any{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}
		},
	},
	{Group: "apps", Kind: "Deployment"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			{Name: "Up-to-date", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
			{Name: "Available", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
			colAge, colContainers, colImages,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()["selector"]}},
		cells: func(o runtime.Object, now time.Time) []any {
			d := o.(*appsv1.Deployment)
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			return []any{d.Name, fmt.Sprintf("%d/%d", int64(d.Status.ReadyReplicas), int64(replicas(d.Spec.Replicas))),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now),
				names, images, selectorString(d.Spec.Selector)}
		},
	},
	{Group: "apps", Kind: "ReplicaSet"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Desired", Type: "integer", Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
			{Name: "Current", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
			{Name: "Ready", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
			colAge, colContainers, colImages,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["selector"]}},
		cells: func(o runtime.Object, now time.Time) []any {
			rs := o.(*appsv1.ReplicaSet)
			names, images := containerCells(rs.Spec.Template.Spec.Containers)
			return []any{rs.Name, int64(replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				age(rs.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}
		},
	},
	{Group: "apps", Kind: "StatefulSet"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			colAge, colContainers, colImages},
		cells: func(o runtime.Object, now time.Time) []any {
			s := o.(*appsv1.StatefulSet)
			names, images := containerCells(s.Spec.Template.Spec.Containers)
			return []any{s.Name, fmt.Sprintf("%d/%d", int64(s.Status.ReadyReplicas), int64(replicas(s.Spec.Replicas))),
				age(s.CreationTimestamp, now), names, images}
		},
	},
	{Group: "apps", Kind: "DaemonSet"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Desired", Type: "integer", Description: extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]},
			{Name: "Current", Type: "integer", Description: extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]},
			{Name: "Ready", Type: "integer", Description: extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]},
			{Name: "Up-to-date", Type: "integer", Description: extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]},
			{Name: "Available", Type: "integer", Description: extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]},
			{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
			colAge, colContainers, colImages,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()["selector"]}},
		cells: func(o runtime.Object, now time.Time) []any {
			d := o.(*appsv1.DaemonSet)
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			st := d.Status
			return []any{d.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
				int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(d.Spec.Template.Spec.NodeSelector),
				age(d.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(d.Spec.Selector)}
		},
	},
	{Group: "coordination.k8s.io", Kind: "Lease"}: {
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]}, colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			l := o.(*coordinationv1.Lease)
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, age(l.CreationTimestamp, now)}
		},
	},
}

// age is the apiserver's translateTimestampSince against now.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func microAge(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func replicas(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func selectorString(ls *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "<invalid>"
	}
	return sel.String()
}

func containerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func serviceCells(o runtime.Object, now time.Time) []any {
	svc := o.(*corev1.Service)
	internalIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		internalIP = svc.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	portString := strings.Join(ports, ",")
	if portString == "" {
		portString = "<none>"
	}
	return []any{svc.Name, string(svc.Spec.Type), internalIP, serviceExternalIP(svc), portString,
		age(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector)}
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		seen := map[string]bool{}
		var lb []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			v := in.IP
			if v == "" {
				v = in.Hostname
			}
			if v != "" && !seen[v] {
				seen[v] = true
				lb = append(lb, v)
			}
		}
		sort.Strings(lb)
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(append(lb, svc.Spec.ExternalIPs...), ",")
		}
		if len(lb) > 0 {
			return strings.Join(lb, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

func eventCells(o runtime.Object, now time.Time) []any {
	ev := o.(*corev1.Event)
	first := age(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = microAge(ev.EventTime, now)
	}
	last := age(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = microAge(ev.Series.LastObservedTime, now)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	component := firstNonEmpty(ev.Source.Component, ev.ReportingController)
	host := firstNonEmpty(ev.Source.Host, ev.ReportingInstance)
	source := component
	if host != "" {
		source = component + ", " + host
	}
	return []any{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath, source,
		strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// tableRows builds the columns and rows of objs (typed for kinds with
// printers, any object otherwise). Each row's object is set by the caller;
// rows follow objs, which a kind's printer may first reorder in place.
func tableRows(gk schema.GroupKind, objs []runtime.Object, now time.Time) ([]metav1.TableColumnDefinition, []metav1.TableRow, error) {
	p, ok := printers[gk]
	if ok && p.order != nil {
		p.order(objs)
	}
	rows := make([]metav1.TableRow, 0, len(objs))
	for _, o := range objs {
		if ok {
			if _, u := o.(runtime.Unstructured); !u { // an unstructured one gets the default cells
				row := metav1.TableRow{Cells: p.cells(o, now)}
				if p.conditions != nil {
					row.Conditions = p.conditions(o)
				}
				rows = append(rows, row)
				continue
			}
		}
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, metav1.TableRow{Cells: []any{m.GetName(), m.GetCreationTimestamp().Time.UTC().Format(time.RFC3339)}})
	}
	if ok {
		return p.columns, rows, nil
	}
	return defaultColumns, rows, nil
}
