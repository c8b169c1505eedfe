package world

import (
	"fmt"
	"net/http"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// crdCleanupFinalizer is the finalizer the CRD registry's Delete adds:
// the apiextensions server's finalizer controller removes it once the
// CRD's custom resources are gone.
const crdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// deleteCRD is the CRD registry's Delete (the lock is held). The first
// DELETE of a CRD does not delete it: preconditions checked (a conflict
// names the resource), it gets its deletionTimestamp, the cleanup
// finalizer and the condition Terminating (propagation policy and grace
// period ignored), and the answer is the object; then the finalizer
// controller runs (finalizeCRD). A DELETE of a CRD already being deleted
// is the generic one (done false).
func (s *Store) deleteCRD(h *history, key Key, cur *entry, opts *metav1.DeleteOptions) (out runtime.Object, code int, err error, done bool) {
	old, err := s.decodeEntry(cur)
	if err != nil {
		return nil, 0, err, true
	}
	crd, ok := old.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, 0, nil, false
	}
	gr := crdResource.GroupResource()
	if pc := opts.Preconditions; pc != nil {
		if pc.UID != nil && *pc.UID != crd.UID {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pc.UID, crd.UID)), true
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != crd.ResourceVersion {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pc.ResourceVersion, crd.ResourceVersion)), true
		}
	}
	if !crd.DeletionTimestamp.IsZero() {
		return nil, 0, nil, false
	}
	crd = crd.DeepCopy()
	now := s.timeNow()
	crd.DeletionTimestamp = &now
	if !hasFinalizer(crd.Finalizers, crdCleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, crdCleanupFinalizer)
	}
	setCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
		Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"}, now)
	if dryRun(opts) {
		return crd, http.StatusOK, nil, true
	}
	o, err := s.store(h, key, crd, Modified)
	if err != nil {
		return nil, 0, err, true
	}
	stored, err := codec.Decode(o)
	if err != nil {
		return nil, 0, err, true
	}
	s.finalizeCRD(h, key)
	return stored, http.StatusOK, nil, true
}

// finalizeCRD is the finalizer controller's sync of a CRD being deleted
// (the lock is held): Terminating InstanceDeletionInProgress, then its
// custom resources deleted (of every version the world has), then — when
// none is left — the finalizer removed, which deletes the CRD. A
// custom resource with finalizers of its own only gets its
// deletionTimestamp: the CRD then stays in progress, as kube-apiserver's
// does while it waits for them (it gives up after a minute and retries;
// the world does not retry).
func (s *Store) finalizeCRD(h *history, key Key) {
	s.controllerWrite(h, key, func(obj runtime.Object) bool {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || crd.DeletionTimestamp.IsZero() || !hasFinalizer(crd.Finalizers, crdCleanupFinalizer) {
			return false
		}
		setCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionInProgress",
			Message: "CustomResource deletion is in progress"}, s.timeNow())
		return true
	})
	e := s.current(h, key)
	if e == nil {
		return
	}
	obj, err := s.decodeEntry(e)
	if err != nil {
		return
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || !hasFinalizer(crd.Finalizers, crdCleanupFinalizer) {
		return
	}
	if crdEstablished(crd) && s.deleteInstances(crd) > 0 {
		return
	}
	// The last status write (Terminating False, InstanceDeletionCompleted
	// or NeverEstablished, the finalizer removed) deletes the CRD
	// (ShouldDeleteDuringUpdate): its watchers see it deleted as it was
	// last stored.
	_, _ = s.store(h, key, crd.DeepCopy(), Deleted)
}

// deleteInstances deletes the custom resources of crd the world holds
// (the lock is held), and returns how many remain, waiting for their
// finalizers (each given its deletionTimestamp).
func (s *Store) deleteInstances(crd *apiextensionsv1.CustomResourceDefinition) int {
	remaining := 0
	var rs []Resource
	for r := range s.res {
		if r.Group == crd.Spec.Group && r.Resource == crd.Spec.Names.Plural {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Version < rs[j].Version })
	for _, r := range rs {
		h := s.res[r]
		for _, k := range sortedKeys(h.objs) { // etcd's key order, as its deletecollection
			e := s.current(h, k)
			if e == nil {
				continue
			}
			obj, err := s.decodeEntry(e)
			if err != nil {
				continue
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			if len(m.GetFinalizers()) > 0 {
				remaining++
				if m.GetDeletionTimestamp() == nil {
					now := s.timeNow()
					m.SetDeletionTimestamp(&now)
					var zero int64
					m.SetDeletionGracePeriodSeconds(&zero)
					_, _ = s.store(h, k, obj, Modified)
				}
				continue
			}
			_, _ = s.store(h, k, obj, Deleted)
		}
	}
	return remaining
}

func hasFinalizer(fins []string, f string) bool {
	for _, x := range fins {
		if x == f {
			return true
		}
	}
	return false
}
