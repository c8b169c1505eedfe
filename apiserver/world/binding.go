package world

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// bindingREST is a Pod's binding subresource (POST
// …/pods/NAME/binding), as kube-apiserver v1.33's BindingREST
// (pkg/registry/core/pod/storage): the scheduler's way to assign a Pod to
// a node. The Pod gets spec.nodeName, the binding's annotations and the
// PodScheduled condition in one new version (no field manager, no new
// generation: the registry updates its storage directly); the answer is a
// Success Status with code 201. A Pod already assigned, being deleted or
// with scheduling gates is a 409 Conflict; a missing Pod 404; the
// binding's uid and resourceVersion are preconditions.
type bindingREST struct{}

func (bindingREST) serves(info Info, _ policy) bool { return isPods(info.Resource) }

func (bindingREST) createNamed(s *Store, c *call) *Response {
	b, p, warnings, err := readBinding(c)
	if err != nil {
		return s.fail(c, err)
	}
	if b.Name != c.t.Name {
		return s.fail(c, apierrors.NewBadRequest("name in URL does not match name in Binding object"))
	}
	return withWarnings(s.bind(c, b, p), warnings)
}

// legacyBindingREST is the deprecated bindings resource (POST
// …/namespaces/NS/bindings, LegacyBindingREST): the binding of the Pod
// its metadata names, its uid and resourceVersion preconditions as for
// the subresource.
type legacyBindingREST struct{}

func (legacyBindingREST) serves(Info, policy) bool { return true }

func (legacyBindingREST) create(s *Store, c *call) *Response {
	b, p, warnings, err := readBinding(c)
	if err != nil {
		return s.fail(c, err)
	}
	pods := *c
	pods.t.Resource.Resource = "pods"
	pods.t.Name = b.Name
	pods.info = Info{Resource: pods.t.Resource, Kind: "Pod", Namespaced: true}
	return withWarnings(s.bind(&pods, b, p), warnings)
}

var bindingGVK = corev1.SchemeGroupVersion.WithKind("Binding")

// readBinding reads the body of a binding: a Binding, its namespace the
// request's.
func readBinding(c *call) (*corev1.Binding, writeParams, []string, error) {
	in, err := readWrite(c, "CreateOptions", bindingGVK)
	if err != nil {
		return nil, writeParams{}, nil, err
	}
	if err := checkNamespace(in.m, c.t, c.info); err != nil {
		return nil, writeParams{}, nil, err
	}
	b, ok := in.obj.(*corev1.Binding)
	if !ok {
		return nil, writeParams{}, nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %T", in.obj))
	}
	return b, in.p, in.warnings, nil
}

// bind assigns the Pod c names to b's target node (BindingREST.Create and
// setPodNodeAndMetadata), b's uid and resourceVersion its preconditions.
func (s *Store) bind(c *call, b *corev1.Binding, p writeParams) *Response {
	if errs := validateBinding(b); len(errs) > 0 {
		// Not an API status: the apiserver answers 500 with its text.
		return s.fail(c, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
			Code: http.StatusInternalServerError, Message: errs.ToAggregate().Error()}})
	}
	if c.t.Name == "" {
		return s.fail(c, apierrors.NewBadRequest("Name parameter required."))
	}
	return s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			return s.fail(c, apierrors.NewNotFound(corev1.Resource("pods"), c.t.Name))
		}
		obj, err := s.decodeEntry(o.cur)
		if err != nil {
			return s.fail(c, err)
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return s.fail(c, apierrors.NewInternalError(fmt.Errorf("unexpected object: %T", obj)))
		}
		if err := podPreconditions(pod, b); err != nil {
			return s.fail(c, err)
		}
		if err := assignable(pod); err != nil {
			return s.fail(c, apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, err))
		}
		pod.Spec.NodeName = b.Target.Name
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for k, v := range b.Annotations {
			pod.Annotations[k] = v
		}
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, metav1.NewTime(s.now()))
		st := &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
		st.SetGroupVersionKind(statusGVK)
		if p.dryRun {
			return s.respondObject(c.r, c.info, http.StatusCreated, st, c.how, false)
		}
		if _, err := s.store(o.h, o.key, pod, Modified); err != nil {
			return s.fail(c, err)
		}
		return s.respondObject(c.r, c.info, http.StatusCreated, st, c.how, true)
	})
}

// validateBinding is ValidatePodBinding.
func validateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}

// podPreconditions checks a binding's uid and resourceVersion against the
// Pod's, as the storage's preconditions do (409 Conflict on pods, with
// the storage's error as its message).
func podPreconditions(pod *corev1.Pod, b *corev1.Binding) error {
	var msg string
	switch {
	case b.UID != "" && b.UID != pod.UID:
		msg = fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID)
	case b.ResourceVersion != "" && b.ResourceVersion != pod.ResourceVersion:
		msg = fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", b.ResourceVersion, pod.ResourceVersion)
	default:
		return nil
	}
	return apierrors.NewConflict(corev1.Resource("pods"), pod.Name, storageInvalid("pods", pod.Namespace, pod.Name, msg))
}

// storageInvalid is the text of the storage's invalid-object error
// (k8s.io/apiserver/pkg/storage.NewInvalidObjError) for an object of a
// built-in resource under etcd's /registry prefix.
func storageInvalid(resource, ns, name, msg string) error {
	key := "/registry/" + resource + "/" + name
	if ns != "" {
		key = "/registry/" + resource + "/" + ns + "/" + name
	}
	return fmt.Errorf("StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: %s", key, msg)
}

// assignable says why a Pod cannot be bound, if it cannot.
func assignable(pod *corev1.Pod) error {
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)
	case pod.Spec.NodeName != "":
		return fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName)
	case len(pod.Spec.SchedulingGates) != 0:
		return fmt.Errorf("pod %v has non-empty .spec.schedulingGates", pod.Name)
	}
	return nil
}

// setPodCondition is podutil.UpdatePodCondition: the condition added, or
// replacing the one of its type (its lastTransitionTime kept when its
// status did not change).
func setPodCondition(st *corev1.PodStatus, cond corev1.PodCondition, now metav1.Time) {
	cond.LastTransitionTime = now
	for i := range st.Conditions {
		if st.Conditions[i].Type != cond.Type {
			continue
		}
		if st.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		st.Conditions[i] = cond
		return
	}
	st.Conditions = append(st.Conditions, cond)
}

// isPods reports whether r is the core Pod resource.
func isPods(r Resource) bool {
	return r.Group == "" && r.Version == "v1" && r.Resource == "pods"
}
