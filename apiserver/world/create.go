package world

import (
	"net/http"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// create answers POST to a collection.
func (s *Store) create(c *call) *Response {
	in, err := readWrite(c, "CreateOptions", c.info.GVK())
	if err != nil {
		return s.fail(c, err)
	}
	if err := checkNamespace(in.m, c.t, c.info); err != nil {
		return s.fail(c, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(c.t.Resource)
	return withWarnings(s.createLocked(c, h, in.obj, in.p), in.warnings)
}

// createLocked creates obj (the lock is held).
func (s *Store) createLocked(c *call, h *history, obj runtime.Object, p writeParams) *Response {
	info, pol := c.info, c.pol
	m, _ := meta.Accessor(obj)
	gr := info.Resource.GroupResource()
	// Admission comes before the registry, which generates the name.
	named := m.GetName()
	if named == "" {
		named = m.GetGenerateName()
	}
	if err := s.admitNamespace(info, m.GetNamespace(), named); err != nil {
		return s.fail(c, err)
	}
	// The decoder's defaults come before the name is generated (a
	// Namespace's name label is not a default then).
	defaultObject(obj)
	obj = asStored(info, obj)
	m, _ = meta.Accessor(obj)
	if m.GetName() == "" && m.GetGenerateName() != "" && info.Resource.GroupResource() == ipAddresses.GroupResource() {
		// The IPAddress strategy's name generator gives back the base.
		m.SetName(m.GetGenerateName())
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		base := m.GetGenerateName()
		if len(base) > 58 {
			base = base[:58]
		}
		for {
			name := base + utilrand.String(5)
			if s.current(h, Key{m.GetNamespace(), name}) == nil {
				m.SetName(name)
				break
			}
		}
	}
	if m.GetName() == "" {
		return s.fail(c, apierrors.NewInvalid(storageKind(info), "", field.ErrorList{
			field.Required(field.NewPath("metadata", "name"), "name or generateName is required")}))
	}
	key := Key{m.GetNamespace(), m.GetName()}
	if s.current(h, key) != nil {
		return s.fail(c, apierrors.NewAlreadyExists(gr, m.GetName()))
	}
	now := s.timeNow()
	m.SetUID(typesUID(s.newUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	if pol.generation {
		m.SetGeneration(1)
	}
	s.prepareNew(obj, info, pol)
	mgr, err := fieldManager(info.GVK(), "")
	if err != nil {
		return s.fail(c, err)
	}
	live := newObject(info.GVK())
	obj = mgr.UpdateNoErrors(live, obj, p.manager)
	if err := s.admit(obj); err != nil {
		return s.fail(c, err)
	}
	// After the field manager, which does not count these fields as the
	// client's.
	prepareNamespace(obj)
	ips, err := s.allocate(obj)
	if err != nil {
		return s.fail(c, err)
	}
	fixManagedTimes(live, obj, now)
	obj.GetObjectKind().SetGroupVersionKind(info.GVK())
	resp := s.commit(c, h, key, obj, Added, http.StatusCreated, p.dryRun)
	if resp.Changed {
		s.created(info.Resource, obj, ips)
	}
	return resp
}

// allocate makes what the registry allocates to a new object (the lock
// is held): a Service's cluster IP and node ports. It returns the IPs
// taken, for created.
func (s *Store) allocate(obj runtime.Object) ([]string, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		return s.allocateService(svc)
	}
	return nil, nil
}

// created follows a new object stored (the lock is held): the objects of
// the IPs it took, its pairing with the recording's.
func (s *Store) created(r Resource, obj runtime.Object, ips []string) {
	if svc, ok := obj.(*corev1.Service); ok && len(ips) > 0 {
		s.recordIPs(svc, ips)
	}
	s.pairCreated(r, obj)
}

// prepareNew is the strategies' PrepareForCreate of a new object, by
// every path that creates one (a POST, an apply, a PUT that creates):
// prepareCreate's rules, then a CSR's requestor (the lock is held).
func (s *Store) prepareNew(obj runtime.Object, info Info, pol policy) {
	prepareCreate(obj, info, pol)
	s.prepareCSR(obj)
}

// prepareCreate does what the registry's strategies do to every new
// object of a kind: status starts empty where a status subresource owns
// it, a Namespace starts Active with its finalizer and name label, a Pod
// starts Pending.
func prepareCreate(obj runtime.Object, info Info, pol policy) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return // after the field manager (createLocked)
	case *corev1.Pod:
		o.Status = corev1.PodStatus{} // Pending after the field manager (admitPod)
		return
	case *unstructured.Unstructured:
		if pol.status {
			unstructured.RemoveNestedField(o.Object, "status")
		}
		return
	}
	if pol.status {
		clearStatus(obj)
	}
}

// clearStatus sets a typed object's Status field to its zero value.
func clearStatus(obj runtime.Object) {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	f := v.FieldByName("Status")
	if f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// prepareNamespace is the namespace strategy's PrepareForCreate for a
// Namespace being created: phase Active, and the kubernetes finalizer
// unless the client named finalizers. Other objects are left as they are.
func prepareNamespace(obj runtime.Object) {
	if o, ok := obj.(*corev1.Namespace); ok {
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		}
	}
}
