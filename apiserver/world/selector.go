package world

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// selector is a LIST's or watch's labelSelector and fieldSelector,
// evaluated as the apiserver does: labels.Parse, and field selectors over
// the fields each kind makes selectable (its GetAttrs in the apiserver's
// registry).
type selector struct {
	labels labels.Selector
	fields fields.Selector
	info   Info
}

// selectable lists each kind's field labels beyond metadata.name and
// metadata.namespace (kube-apiserver v1.33's field label conversions),
// and the message for one it does not know. rename maps the labels of a
// kind served from another's storage to the storage's (events.k8s.io's
// regarding.kind is core's involvedObject.kind: its storage selects on
// core's fields).
var selectable = map[schema.GroupKind]struct {
	fields  []string
	rename  map[string]string
	message func(label string) string
}{
	{Kind: "Pod"}: {fields: []string{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
		"spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
		"status.podIPs", "status.nominatedNodeName"}},
	{Kind: "Node"}:                  {fields: []string{"metadata.name", "spec.unschedulable"}},
	{Kind: "ReplicationController"}: {fields: []string{"metadata.name", "metadata.namespace", "status.replicas"}},
	{Kind: "Event"}: {fields: []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
		"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type", "metadata.namespace", "metadata.name"}},
	{Kind: "Namespace"}: {fields: []string{"status.phase", "metadata.name"}},
	{Kind: "Secret"}:    {fields: []string{"type", "metadata.namespace", "metadata.name"}},
	{Kind: "Service"}:   {fields: []string{"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"}},
	{Group: "batch", Kind: "Job"}: {fields: []string{"metadata.name", "metadata.namespace", "status.successful"},
		message: func(l string) string { return fmt.Sprintf("field label %q not supported for Job", l) }},
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: {fields: []string{"metadata.name", "spec.signerName"},
		message: func(l string) string { return fmt.Sprintf("field label not supported: %s", l) }},
	{Group: "events.k8s.io", Kind: "Event"}: {fields: []string{"reason", "type", "metadata.namespace", "metadata.name"},
		rename: map[string]string{"regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
			"regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
			"regarding.apiVersion": "involvedObject.apiVersion", "regarding.resourceVersion": "involvedObject.resourceVersion",
			"regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent"}},
}

// newSelector parses a labelSelector and a fieldSelector for resource
// info. Errors are 400 BadRequest Statuses with the apiserver's messages.
func newSelector(labelSel, fieldSel string, info Info) (*selector, error) {
	s := &selector{info: info, labels: labels.Everything(), fields: fields.Everything()}
	if labelSel != "" {
		l, err := labels.Parse(labelSel)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		s.labels = l
	}
	if fieldSel != "" {
		f, err := fields.ParseSelector(fieldSel)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		gk := info.GVK().GroupKind()
		sel, known := selectable[gk]
		f, err = f.Transform(func(label, value string) (string, string, error) {
			if !known {
				return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
			}
			if gk == (schema.GroupKind{Kind: "Pod"}) && label == "spec.host" {
				return "spec.nodeName", value, nil
			}
			for _, l := range sel.fields {
				if l == label {
					return label, value, nil
				}
			}
			if to, ok := sel.rename[label]; ok {
				return to, value, nil
			}
			if sel.message != nil {
				return "", "", fmt.Errorf("%s", sel.message(label))
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		})
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		s.fields = f
	}
	return s, nil
}

func (s *selector) empty() bool { return s.labels.Empty() && s.fields.Empty() }

// matches evaluates the selector on a stored object.
func (s *selector) matches(o codec.Object) (bool, error) {
	if s.empty() {
		return true, nil
	}
	obj, err := codec.Decode(o)
	if err != nil {
		return false, err
	}
	return s.matchesObject(obj), nil
}

// matchesEntry evaluates the selector on a stored version (the lock is
// held), decoding its object once for every selector that looks at it:
// a hundred watches with selectors over one resource cost one decoding
// of each change, not a hundred, as the apiserver's watch cache keeps
// each object's labels and fields beside it.
func (s *selector) matchesEntry(e *entry) (bool, error) {
	if s.empty() {
		return true, nil
	}
	if e.attrs == nil {
		obj, err := codec.Decode(e.obj)
		if err != nil {
			return false, err
		}
		e.attrs = attrsOf(obj, s.info.Namespaced)
	}
	return e.attrs.ok && s.labels.Matches(e.attrs.labels) &&
		(s.fields.Empty() || s.fields.Matches(e.attrs.fields)), nil
}

// attrs are what selectors see of an object: its labels and its
// selectable fields; ok is false for an object without metadata, which
// no selector matches.
type attrs struct {
	labels labels.Set
	fields fields.Set
	ok     bool
}

func attrsOf(obj runtime.Object, namespaced bool) *attrs {
	m, err := meta.Accessor(obj)
	if err != nil {
		return &attrs{}
	}
	return &attrs{labels: labels.Set(m.GetLabels()), fields: fieldSet(obj, m, namespaced), ok: true}
}

// matchesObject evaluates the selector on a decoded object.
func (s *selector) matchesObject(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !s.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if s.fields.Empty() {
		return true
	}
	return s.fields.Matches(fieldSet(obj, m, s.info.Namespaced))
}

// fieldSet is an object's selectable fields, with the values its kind's
// GetAttrs gives them.
func fieldSet(obj runtime.Object, m metav1Object, namespaced bool) fields.Set {
	set := fields.Set{"metadata.name": m.GetName()}
	if namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		set["spec.schedulerName"] = o.Spec.SchedulerName
		set["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		set["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		set["status.phase"] = string(o.Status.Phase)
		podIP := ""
		if len(o.Status.PodIPs) > 0 {
			podIP = o.Status.PodIPs[0].IP
		}
		set["status.podIP"] = podIP
		set["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.ReplicationController:
		set["status.replicas"] = strconv.Itoa(int(o.Status.Replicas))
	case *corev1.Event:
		eventFields(set, &o.InvolvedObject, o.Reason, o.ReportingController, o.Source.Component, o.Type)
	case *eventsv1.Event:
		eventFields(set, &o.Regarding, o.Reason, o.ReportingController, o.DeprecatedSource.Component, o.Type)
	case *corev1.Namespace:
		set["status.phase"] = string(o.Status.Phase)
	case *corev1.Secret:
		set["type"] = string(o.Type)
	case *corev1.Service:
		set["spec.clusterIP"] = o.Spec.ClusterIP
		set["spec.type"] = string(o.Spec.Type)
	case *batchv1.Job:
		set["status.successful"] = strconv.Itoa(int(o.Status.Succeeded))
	case *certificatesv1.CertificateSigningRequest:
		set["spec.signerName"] = o.Spec.SignerName
	}
	return set
}

// eventFields sets the selectable fields of an Event, core/v1 or
// events.k8s.io/v1 (whose Regarding is core's involvedObject).
func eventFields(set fields.Set, ref *corev1.ObjectReference, reason, reporting, source, typ string) {
	set["involvedObject.kind"] = ref.Kind
	set["involvedObject.namespace"] = ref.Namespace
	set["involvedObject.name"] = ref.Name
	set["involvedObject.uid"] = string(ref.UID)
	set["involvedObject.apiVersion"] = ref.APIVersion
	set["involvedObject.resourceVersion"] = ref.ResourceVersion
	set["involvedObject.fieldPath"] = ref.FieldPath
	set["reason"] = reason
	set["reportingComponent"] = reporting
	if source == "" {
		source = reporting // ToSelectableFields: the reporting controller stands in
	}
	set["source"] = source
	set["type"] = typ
}

type metav1Object = interface {
	GetName() string
	GetNamespace() string
	GetLabels() map[string]string
}
