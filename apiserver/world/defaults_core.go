package world

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// What kube-apiserver v1.33's decoder defaults in the core kinds besides
// Pods and Services (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go and
// its generated zz_generated.defaults.go): before the field manager, which
// counts these fields as the client's.

// defaultEndpoints is SetDefaults_Endpoints: a port's protocol is TCP.
func defaultEndpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		for j := range e.Subsets[i].Ports {
			if p := &e.Subsets[i].Ports[j]; p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// defaultLimitRange is SetDefaults_LimitRangeItem for each of a
// LimitRange's items of type Container: the default limit is the max when
// unset, the default request the default limit, else the min.
func defaultLimitRange(l *corev1.LimitRange) {
	for i := range l.Spec.Limits {
		it := &l.Spec.Limits[i]
		if it.Type != corev1.LimitTypeContainer {
			continue
		}
		if it.Default == nil {
			it.Default = corev1.ResourceList{}
		}
		if it.DefaultRequest == nil {
			it.DefaultRequest = corev1.ResourceList{}
		}
		fill := func(dst, src corev1.ResourceList) {
			for k, v := range src {
				if _, ok := dst[k]; !ok {
					dst[k] = v.DeepCopy()
				}
			}
		}
		fill(it.Default, it.Max)
		fill(it.DefaultRequest, it.Default)
		fill(it.DefaultRequest, it.Min)
	}
}

// defaultPersistentVolume is SetDefaults_PersistentVolume and its
// volume sources': reclaim policy Retain, volume mode Filesystem, a
// hostPath's type "", phase Pending.
func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	src := &pv.Spec.PersistentVolumeSource
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if r := src.RBD; r != nil {
		defaultRBD(&r.RBDPool, &r.RadosUser, &r.Keyring)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if d := src.AzureDisk; d != nil {
		defaultAzureDisk(d)
	}
	if s := src.ScaleIO; s != nil {
		defaultScaleIO(&s.StorageMode, &s.FSType)
	}
}

// defaultPVC is SetDefaults_PersistentVolumeClaim and its spec's.
func defaultPVC(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	defaultPVCSpec(&pvc.Spec)
}

// defaultPVCSpec is SetDefaults_PersistentVolumeClaimSpec: volume mode
// Filesystem.
func defaultPVCSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		s.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
}

// defaultReplicationController is SetDefaults_ReplicationController: the
// selector and the labels are the template's when unset, one replica.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil && t.Labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = t.Labels
		}
		if len(rc.Labels) == 0 {
			rc.Labels = t.Labels
		}
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptr.To[int32](1)
	}
	if rc.Spec.Template != nil {
		defaultPodSpec(&rc.Spec.Template.Spec)
	}
}

// defaultNode is SetDefaults_NodeStatus: what a node can allocate is its
// capacity when unset.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
}

// defaultNamespace is SetDefaults_Namespace: the kubernetes.io/metadata.name
// label, for a namespace with a name (a generated one gets it from the
// strategy, after the field manager: createdNamespace).
func defaultNamespace(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// defaultVolumeMore is what SetDefaults_Volume and the generated
// defaulters set in the volume sources defaultVolume leaves alone: an
// emptyDir when no source is named, the fixed defaults of the RBD, iSCSI,
// Azure disk and ScaleIO sources, a projected volume's token lifetime and
// field references, an ephemeral volume's claim.
func defaultVolumeMore(v *corev1.Volume) {
	s := &v.VolumeSource
	if ptr.AllPtrFieldsNil(s) {
		s.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if r := s.RBD; r != nil {
		defaultRBD(&r.RBDPool, &r.RadosUser, &r.Keyring)
	}
	if s.ISCSI != nil && s.ISCSI.ISCSIInterface == "" {
		s.ISCSI.ISCSIInterface = "default"
	}
	if d := s.AzureDisk; d != nil {
		defaultAzureDisk(d)
	}
	if sc := s.ScaleIO; sc != nil {
		defaultScaleIO(&sc.StorageMode, &sc.FSType)
	}
	if d := s.DownwardAPI; d != nil {
		for i := range d.Items {
			defaultFieldRef(d.Items[i].FieldRef)
		}
	}
	if p := s.Projected; p != nil {
		for i := range p.Sources {
			src := &p.Sources[i]
			if src.DownwardAPI != nil {
				for j := range src.DownwardAPI.Items {
					defaultFieldRef(src.DownwardAPI.Items[j].FieldRef)
				}
			}
			if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
	if e := s.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		defaultPVCSpec(&e.VolumeClaimTemplate.Spec)
	}
}

// defaultFieldRef is SetDefaults_ObjectFieldSelector.
func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// defaultContainerMore is what the generated defaulters set in a container
// besides defaultContainer: a gRPC probe's service, a lifecycle hook's
// HTTP GET.
func defaultContainerMore(c *corev1.Container) {
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil && p.GRPC != nil && p.GRPC.Service == nil {
			p.GRPC.Service = ptr.To("")
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultHTTPGet is SetDefaults_HTTPGetAction.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultEphemeralContainers is SetDefaults_EphemeralContainer and the
// defaults of what an ephemeral container holds.
func defaultEphemeralContainers(s *corev1.PodSpec) {
	for i := range s.EphemeralContainers {
		c := (*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(c)
		defaultContainerMore(c)
	}
}

func defaultRBD(pool, user, keyring *string) {
	if *pool == "" {
		*pool = "rbd"
	}
	if *user == "" {
		*user = "admin"
	}
	if *keyring == "" {
		*keyring = "/etc/ceph/keyring"
	}
}

func defaultAzureDisk(d *corev1.AzureDiskVolumeSource) {
	if d.CachingMode == nil {
		d.CachingMode = ptr.To(corev1.AzureDataDiskCachingReadWrite)
	}
	if d.FSType == nil {
		d.FSType = ptr.To("ext4")
	}
	if d.ReadOnly == nil {
		d.ReadOnly = ptr.To(false)
	}
	if d.Kind == nil {
		d.Kind = ptr.To(corev1.AzureSharedBlobDisk)
	}
}

func defaultScaleIO(mode, fsType *string) {
	if *mode == "" {
		*mode = "ThinProvisioned"
	}
	if *fsType == "" {
		*fsType = "xfs"
	}
}
