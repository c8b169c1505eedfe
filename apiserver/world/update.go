package world

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// put answers PUT of an object, or of its subresource sub (status,
// finalize): the object the registry's update rules make of the body, or
// with createOnUpdate a new object when there is none.
func (s *Store) put(c *call, sub string, createOnUpdate bool) *Response {
	in, err := readPut(c, c.info.GVK())
	if err != nil {
		return s.fail(c, err)
	}
	return s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			if createOnUpdate {
				return withWarnings(s.createLocked(c, o.h, in.obj, in.p), in.warnings)
			}
			return s.fail(c, apierrors.NewNotFound(c.info.Resource.GroupResource(), c.t.Name))
		}
		old, err := s.decodeAs(o.cur, c.info.GVK())
		if err != nil {
			return s.fail(c, err)
		}
		if err := s.checkRV(c.info, c.pol, c.t.Name, in.m.GetResourceVersion(), old); err != nil {
			return s.fail(c, err)
		}
		obj, err := s.managed(c.info, old, in.obj, sub, in.p)
		if err != nil {
			return s.fail(c, err)
		}
		return withWarnings(s.commitUpdate(c, o, old, obj, in.p), in.warnings)
	})
}

// readPut reads the body of a PUT as an object of kind gvk (readWrite),
// its name the URL's, its namespace set or checked.
func readPut(c *call, gvk schema.GroupVersionKind) (*written, error) {
	in, err := readWrite(c, "UpdateOptions", gvk)
	if err != nil {
		return nil, err
	}
	if in.m.GetName() != c.t.Name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", in.m.GetName(), c.t.Name))
	}
	if err := checkNamespace(in.m, c.t, c.info); err != nil {
		return nil, err
	}
	return in, nil
}

// managed applies the registry's update rules to obj (prepareUpdate), then
// records the change in its managedFields, as the apiserver's field
// manager sees it (what the rules reset is not the client's).
func (s *Store) managed(info Info, old, obj runtime.Object, subresource string, p writeParams) (runtime.Object, error) {
	defaultObject(obj)
	obj = asStored(info, obj)
	mgr, err := fieldManager(info.GVK(), subresource)
	if err != nil {
		return nil, err
	}
	if managedAsSent(info, subresource) {
		sent := mgr.UpdateNoErrors(old, obj.DeepCopyObject(), p.manager)
		obj, err = prepareUpdate(obj, old, policyFor(info), subresource)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		sm, _ := meta.Accessor(sent)
		m, _ := meta.Accessor(obj)
		m.SetManagedFields(sm.GetManagedFields())
		return obj, nil
	}
	obj, err = prepareUpdate(obj, old, policyFor(info), subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj = mgr.UpdateNoErrors(old, obj, p.manager)
	if ns, ok := obj.(*corev1.Namespace); ok && subresource == "" {
		// A Namespace's spec.finalizers change through its finalize
		// subresource alone; the strategy puts them back after the field
		// manager, which counts them as the client's.
		ns.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
	}
	return obj, nil
}

// managedAsSent reports whether an update's managed fields are those of
// the object as the client sent it, before the strategy put back what
// it may not change, as kube-apiserver's field manager (which runs
// first) sees them where the strategy's reset fields do not cover it: a
// ServiceCIDR's status strategy puts its labels and annotations back,
// yet the labels a client sent there count as its own.
func managedAsSent(info Info, subresource string) bool {
	return subresource == "status" && info.Resource.Group == networkingv1.GroupName && info.Resource.Resource == "servicecidrs"
}

// checkRV applies an update's resourceVersion precondition: none (when
// the kind allows unconditional updates) or the object's current one.
func (s *Store) checkRV(info Info, pol policy, name, rv string, old runtime.Object) error {
	gr := info.Resource.GroupResource()
	om, _ := meta.Accessor(old)
	if rv == "" {
		if pol.unconditionalUpdate {
			return nil
		}
		return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("resourceVersion"), zeroRV{}, "must be specified for an update")})
	}
	if rv != om.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, fmt.Errorf("%s", optimisticLockMsg))
	}
	return nil
}

// zeroRV prints as the apiserver's message shows its uint64 zero ("0x0",
// from the %#v of the apimachinery it is built with).
type zeroRV struct{}

func (zeroRV) MarshalJSON() ([]byte, error) { return nil, errors.New("printed with String") }
func (zeroRV) String() string               { return "0x0" }

// prepareUpdate keeps what an update may not change, as the registry's
// BeforeUpdate and strategies do: uid, creation and deletion timestamps,
// generation (bumped when anything but metadata and status changed, for
// kinds that track it); the status of the object for a PUT or PATCH of
// the object itself, everything but the status for one of its status.
func prepareUpdate(obj, old runtime.Object, pol policy, subresource string) (runtime.Object, error) {
	if partialUpdate(obj, old, subresource) {
		// A subresource that changes one part (podsub.go).
	} else if _, typed := obj.(*unstructured.Unstructured); subresource == "status" && !typed && hasSpec(obj) {
		// The built-in kinds' status strategies: the object as sent, but
		// for its spec (and what each kind's strategy keeps besides).
		if err := statusUpdate(obj, old, pol.resource); err != nil {
			return nil, err
		}
	} else if subresource == "status" {
		// A custom resource's status strategy: the object as it was, with
		// the status sent.
		merged := old.DeepCopyObject()
		if err := copyStatus(merged, obj); err != nil {
			return nil, err
		}
		mm, _ := meta.Accessor(merged)
		nm, _ := meta.Accessor(obj)
		mm.SetManagedFields(nm.GetManagedFields())
		obj = merged
	} else if pol.status {
		if err := copyStatus(obj, old); err != nil {
			return nil, err
		}
	}
	if svc, ok := obj.(*corev1.Service); ok {
		if osvc, ok := old.(*corev1.Service); ok {
			keepAllocated(svc, osvc)
		}
	}
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	if m.GetUID() == "" {
		m.SetUID(om.GetUID())
	}
	m.SetCreationTimestamp(om.GetCreationTimestamp())
	if om.GetDeletionTimestamp() != nil {
		m.SetDeletionTimestamp(om.GetDeletionTimestamp())
	}
	if om.GetDeletionGracePeriodSeconds() != nil && m.GetDeletionGracePeriodSeconds() == nil {
		m.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	}
	m.SetGeneration(om.GetGeneration())
	if subresource == "" {
		prepareKindUpdate(obj, old)
	}
	if pol.generation && (subresource == "" || partialGeneration(subresource)) {
		changed, err := specChanged(obj, old)
		if err != nil {
			return nil, err
		}
		if changed {
			m.SetGeneration(om.GetGeneration() + 1)
		}
	}
	return obj, nil
}

// hasSpec reports whether a typed object has a Spec field.
func hasSpec(obj runtime.Object) bool {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v.Kind() == reflect.Struct && v.FieldByName("Spec").IsValid()
}

// statusKeepsMeta are the kinds whose status strategy keeps the object's
// metadata as it was (metav1.ResetObjectMetaForStatus, or the whole
// ObjectMeta), kube-apiserver v1.33.
var statusKeepsMeta = map[string]bool{
	"servicecidrs": true, "storageversionmigrations": true, "resourceclaims": true, "storageversions": true,
	"volumeattachments": true, "validatingadmissionpolicies": true, "flowschemas": true,
	"prioritylevelconfigurations": true, "apiservices": true,
}

// statusUpdate is what a built-in kind's status strategy (PrepareForUpdate)
// does to the object of an update of its status: obj keeps what was sent
// but for its spec, and what its kind keeps as it was (a Deployment's
// labels, a Pod's owner references; all of the metadata for some).
func statusUpdate(obj, old runtime.Object, resource string) error {
	nv, ov := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
	nv.FieldByName("Spec").Set(ov.FieldByName("Spec"))
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Labels = om.GetLabels()
	case *corev1.Pod:
		o.OwnerReferences = om.GetOwnerReferences()
		if o.Status.QOSClass == "" {
			o.Status.QOSClass = old.(*corev1.Pod).Status.QOSClass
		}
	}
	if statusKeepsMeta[resource] {
		mf := m.GetManagedFields()
		m.SetLabels(om.GetLabels())
		m.SetAnnotations(om.GetAnnotations())
		m.SetFinalizers(om.GetFinalizers())
		m.SetOwnerReferences(om.GetOwnerReferences())
		m.SetGeneration(om.GetGeneration())
		m.SetManagedFields(mf)
	}
	return nil
}

// copyStatus sets dst's status to src's.
func copyStatus(dst, src runtime.Object) error {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su, ok := src.(*unstructured.Unstructured)
		if !ok {
			return errorf("status of %T", src)
		}
		if st, ok := su.Object["status"]; ok {
			du.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(du.Object, "status")
		}
		return nil
	}
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	df, sf := dv.FieldByName("Status"), sv.FieldByName("Status")
	if !df.IsValid() || !sf.IsValid() {
		return nil
	}
	df.Set(sf)
	return nil
}

// specChanged reports whether anything but metadata and status differs.
func specChanged(obj, old runtime.Object) (bool, error) {
	if changed, ok := generationChanged(obj, old); ok {
		return changed, nil
	}
	a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false, err
	}
	b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return false, err
	}
	// ToUnstructured hands back an Unstructured's own map: compare copies.
	strip := func(m map[string]any) map[string]any {
		c := make(map[string]any, len(m))
		for k, v := range m {
			switch k {
			case "metadata", "status", "apiVersion", "kind":
			default:
				c[k] = v
			}
		}
		return c
	}
	return !reflect.DeepEqual(strip(a), strip(b)), nil
}

// commitUpdate finishes an update of o from old to obj, prepared and
// managed (the lock is held): a no-op (the same object: no new
// resourceVersion, no event), a deletion (the last finalizer of an object
// being deleted went away) or a new version.
func (s *Store) commitUpdate(c *call, o held, old, obj runtime.Object, p writeParams) *Response {
	if c.t.Subresource == "" {
		if err := validateUpdate(obj, old); err != nil {
			return s.fail(c, err)
		}
	} else if err := validatePartialUpdate(c.t.Subresource, obj, old); err != nil {
		return s.fail(c, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(c.info.GVK())
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	now := s.timeNow()
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && c.t.Subresource == "approval" {
		conditionTimes(csr, old.(*certificatesv1.CertificateSigningRequest), now.Time)
	}
	fixManagedTimes(old, obj, now)
	m.SetResourceVersion(om.GetResourceVersion())
	if sameObject(obj, old) && !defaultedOnRead(o.cur, old) {
		enc, err := codec.Encode(old, frame.JSON)
		if err != nil {
			return s.fail(c, err)
		}
		return s.respond(c.r, c.info, http.StatusOK, enc, c.how, false)
	}
	if deleteDuringUpdate(obj, old) {
		// The registry deletes an object whose deletion only waited for
		// its finalizers, and answers with the object as updated.
		resp, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return s.fail(c, err)
		}
		if p.dryRun {
			return s.respond(c.r, c.info, http.StatusOK, resp, c.how, false)
		}
		if _, err := s.store(o.h, o.key, old.DeepCopyObject(), Deleted); err != nil {
			return s.fail(c, err)
		}
		return s.respond(c.r, c.info, http.StatusOK, resp, c.how, true)
	}
	return s.commit(c, o.h, o.key, obj, Modified, http.StatusOK, p.dryRun)
}

// deleteDuringUpdate is the registry's ShouldDeleteDuringUpdate: an update
// that leaves an object being deleted (with no grace period) without
// finalizers deletes it — for a Namespace, once its spec's finalizers are
// gone too.
func deleteDuringUpdate(obj, old runtime.Object) bool {
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	if om.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if g := om.GetDeletionGracePeriodSeconds(); g != nil && *g != 0 {
		return false
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	return true
}

// sameObject reports whether an update changes nothing that would be
// stored (managedFields timestamps aside, as the apiserver ignores them).
func sameObject(obj, old runtime.Object) bool {
	a, err1 := codec.Encode(obj.DeepCopyObject(), frame.JSON)
	b, err2 := codec.Encode(old.DeepCopyObject(), frame.JSON)
	if err1 != nil || err2 != nil {
		return false
	}
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	// Same but for managedFields times: the apiserver keeps the old ones.
	strip := func(o runtime.Object) []byte {
		c := o.DeepCopyObject()
		m, _ := meta.Accessor(c)
		mf := m.GetManagedFields()
		for i := range mf {
			mf[i].Time = nil
		}
		m.SetManagedFields(mf)
		e, _ := codec.Encode(c, frame.JSON)
		return e.Raw
	}
	return bytes.Equal(strip(obj), strip(old))
}
