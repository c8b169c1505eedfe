package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
// template generation is the old one, one more when the template changed;
// a CertificateSigningRequest keeps its spec.
func prepareKindUpdate(obj, old runtime.Object) {
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		// Immutable but through its subresources: the request as created.
		csr.Spec = *old.(*certificatesv1.CertificateSigningRequest).Spec.DeepCopy()
		return
	}
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

// validateUpdate is the part of a kind's ValidateUpdate the world models
// (a CRD's and an APIService's: validateServerKindUpdate):
// a Pod's spec immutable but for what ValidatePodUpdate lets change
// (validatePodUpdate);
// a Job's selector is required and immutable, its template immutable
// (ValidateJobUpdate): a PUT that leaves out the generated selector and
// template labels is refused, as the apiserver refuses it.
func validateUpdate(obj, old runtime.Object) error {
	if p, op, typed := pods(obj, old); typed {
		return validatePodUpdate(p, op)
	}
	if handled, err := validateServerKindUpdate(obj, old); handled {
		return err
	}
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return nil
	}
	oj := old.(*batchv1.Job)
	spec := field.NewPath("spec")
	// The job's spec is validated twice (ValidateJob, then the update's
	// own): the causes list these errors twice, the message once.
	var errs field.ErrorList
	mismatch := field.Invalid(spec.Child("template", "metadata", "labels"), goValue{j.Spec.Template.Labels},
		"`selector` does not match template `labels`")
	if j.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""), mismatch)
	} else if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !sel.Matches(labels.Set(j.Spec.Template.Labels)) {
		errs = append(errs, mismatch)
	}
	errs = append(errs, errs...)
	if !apiequality.Semantic.DeepEqual(j.Spec.Selector, oj.Spec.Selector) {
		errs = append(errs, field.Invalid(spec.Child("selector"), selectorText(j.Spec.Selector), "field is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(j.Spec.Template, oj.Spec.Template) {
		errs = append(errs, field.Invalid(spec.Child("template"), goValue{j.Spec.Template}, "field is immutable"))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: batchv1.GroupName, Kind: "Job"}, j.Name, errs)
}

// selectorText is a selector as a field error shows it (its JSON).
func selectorText(s *metav1.LabelSelector) string {
	b, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return string(b)
}

// goValue prints a field error's value as kube-apiserver shows one of its
// internal types (which refuse to encode as JSON): Go syntax.
type goValue struct{ v any }

func (goValue) MarshalJSON() ([]byte, error) { return nil, errors.New("printed with String") }
func (g goValue) String() string             { return fmt.Sprintf("%#v", g.v) }

// asInternalZero sets in an empty object what kube-apiserver's conversion
// of its empty internal object writes in v1, as a streaming list's last
// bookmark shows it: a replica count of 0 where v1 has a pointer and the
// internal type a number; a DaemonSet's template generation 0.
func asInternalZero(obj runtime.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = new(int32)
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = new(int32)
	case *appsv1.StatefulSet:
		o.Spec.Replicas = new(int32)
	case *appsv1.DaemonSet:
		o.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: "0"}
	}
}
