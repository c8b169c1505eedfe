package world

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// What kube-apiserver v1.33 does to a new object after the field manager
// (which does not count these fields as the client's), for the kinds
// besides Pods (admitPod) and Namespaces' phase and finalizer
// (prepareNamespace): its default admission plugins that change objects
// (TaintNodesByCondition, StorageObjectInUseProtection), the registry
// strategies' PrepareForCreate and Canonicalize, and the defaults the
// decoder sets again when the stored object is read back.

// Finalizers of StorageObjectInUseProtection (pkg/volume/util).
const (
	pvProtectionFinalizer  = "kubernetes.io/pv-protection"
	pvcProtectionFinalizer = "kubernetes.io/pvc-protection"
)

// admitKind changes a new object as the apiserver does after its field
// manager (the lock is held).
func (s *Store) admitKind(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Node:
		taintNotReady(o)
	case *corev1.PersistentVolume:
		o.Finalizers = withFinalizer(o.Finalizers, pvProtectionFinalizer)
		now := s.timeNow()
		o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
	case *corev1.PersistentVolumeClaim:
		o.Finalizers = withFinalizer(o.Finalizers, pvcProtectionFinalizer)
		o.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	case *corev1.Namespace:
		// Canonicalize: a generated name's label.
		if o.Labels[corev1.LabelMetadataName] != o.Name {
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			o.Labels[corev1.LabelMetadataName] = o.Name
		}
	case *batchv1.Job:
		generateJobSelector(o)
	case *appsv1.DaemonSet:
		// The strategy's template generation, which v1 shows as an
		// annotation.
		if g, err := strconv.ParseInt(o.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64); err != nil || g < 1 {
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations[appsv1.DeprecatedTemplateGeneration] = "1"
		}
	}
}

// taintNotReady is TaintNodesByCondition: a new Node is not ready for
// scheduling until the node controller says it is.
func taintNotReady(n *corev1.Node) {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule {
			return
		}
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
}

// withFinalizer returns fs with f, added at the end when missing.
func withFinalizer(fs []string, f string) []string {
	for _, x := range fs {
		if x == f {
			return fs
		}
	}
	return append(fs, f)
}
