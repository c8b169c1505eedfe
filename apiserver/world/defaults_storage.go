package world

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// The defaults kube-apiserver v1.33's decoder sets in storage.k8s.io/v1
// (k8s.io/kubernetes/pkg/apis/storage/v1/defaults.go,
// SELinuxMountReadWriteOncePod on).

// defaultStorageClass is SetDefaults_StorageClass: volumes deleted with
// their claim, bound at once.
func defaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	}
}

// defaultCSIDriver is SetDefaults_CSIDriver.
func defaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	for _, f := range []struct {
		p   **bool
		def bool
	}{{&s.AttachRequired, true}, {&s.PodInfoOnMount, false}, {&s.StorageCapacity, false},
		{&s.RequiresRepublish, false}, {&s.SELinuxMount, false}} {
		if *f.p == nil {
			*f.p = ptr.To(f.def)
		}
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
}

// defaultVolumeAttachment defaults the inline volume of a
// VolumeAttachment's source as a PersistentVolume's.
func defaultVolumeAttachment(va *storagev1.VolumeAttachment) {
	if spec := va.Spec.Source.InlineVolumeSpec; spec != nil {
		pv := &corev1.PersistentVolume{Spec: *spec}
		phase := pv.Status.Phase
		defaultPersistentVolume(pv)
		pv.Status.Phase = phase
		*spec = pv.Spec
	}
}
