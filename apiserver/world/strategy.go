package world

import (
	"encoding/json"
	"reflect"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The registry strategies of kube-apiserver v1.33 that differ from the
// world's general rules (k8s.io/kubernetes/pkg/registry/*/strategy.go).

// generationChanged reports whether an update changes what bumps the
// generation of a kind whose strategy says otherwise than "anything but
// metadata and status" (specChanged): ok false for the other kinds.
func generationChanged(obj, old runtime.Object) (changed, ok bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		// reflect.DeepEqual: an empty list is not a missing one.
		return !reflect.DeepEqual(o.Webhooks, old.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks), true
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return !reflect.DeepEqual(o.Webhooks, old.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks), true
	case *networkingv1.NetworkPolicy:
		return !reflect.DeepEqual(o.Spec, old.(*networkingv1.NetworkPolicy).Spec), true
	case *discoveryv1.EndpointSlice:
		// Anything but the metadata, or the labels.
		a, b := *o, *old.(*discoveryv1.EndpointSlice)
		a.ObjectMeta, b.ObjectMeta = metav1.ObjectMeta{}, metav1.ObjectMeta{}
		return !apiequality.Semantic.DeepEqual(a, b) || !apiequality.Semantic.DeepEqual(o.Labels, old.(*discoveryv1.EndpointSlice).Labels), true
	case *appsv1.Deployment:
		od := old.(*appsv1.Deployment)
		return !apiequality.Semantic.DeepEqual(o.Spec, od.Spec) || !apiequality.Semantic.DeepEqual(o.Annotations, od.Annotations), true
	}
	return false, false
}

// prepareKindUpdate is what a kind's PrepareForUpdate keeps or changes
// besides the world's general rules (prepareUpdate): a DaemonSet's
// template generation is the old one, one more when the template changed.
func prepareKindUpdate(obj, old runtime.Object) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		ods := old.(*appsv1.DaemonSet)
		g, err := strconv.ParseInt(ods.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
		if err != nil {
			return
		}
		if !apiequality.Semantic.DeepEqual(ds.Spec.Template, ods.Spec.Template) {
			g++
		}
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(g, 10)
	}
}

// trackTemplateTimestamp adds to the managed fields of a new
// ReplicationController what kube-apiserver's field manager counts in
// them and the world's does not: the template's null creationTimestamp,
// for each manager of an update that set the template's metadata.
func trackTemplateTimestamp(rc *corev1.ReplicationController) {
	for i := range rc.ManagedFields {
		e := &rc.ManagedFields[i]
		if e.Operation != metav1.ManagedFieldsOperationUpdate || e.FieldsV1 == nil {
			continue
		}
		var fs map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fs) != nil {
			continue
		}
		md, ok := dig(fs, "f:spec", "f:template", "f:metadata")
		if !ok {
			continue
		}
		md["f:creationTimestamp"] = map[string]any{}
		if raw, err := json.Marshal(fs); err == nil {
			e.FieldsV1.Raw = raw
		}
	}
}

// dig returns the map at path in m.
func dig(m map[string]any, path ...string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}
