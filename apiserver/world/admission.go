package world

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// What kube-apiserver v1.33 does to a new Pod besides storing it: the
// defaults its decoder sets (before the field manager, which counts them
// as the client's), then its default admission chain (after it): the
// ServiceAccount plugin (the service account, its token volume, and a
// refusal when the account does not exist), Priority and
// DefaultTolerationSeconds; then the pod strategy's status (Pending, the
// QoS class). A controller that creates Pods (a ReplicaSet's) stores the
// same Pods in a replay as against the apiserver. Defaulting of other
// kinds and other admission plugins are not modelled (see the package
// doc).

// defaultPod sets the defaults of SetDefaults_Pod, SetDefaults_PodSpec and
// SetDefaults_Container (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go).
func defaultPod(p *corev1.Pod) {
	defaultPodSpec(&p.Spec)
	s := &p.Spec
	if s.EnableServiceLinks == nil {
		on := corev1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &on
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			// A limit without a request: the request is the limit.
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
}

// defaultPodSpec is SetDefaults_PodSpec, and the defaults of what a pod
// spec holds (containers, their probes, volumes), as the generated
// defaulters apply them to Pods and to the pod templates of workloads.
func defaultPodSpec(s *corev1.PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		period := int64(corev1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &period
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			defaultContainer(&cs[i])
			defaultContainerMore(&cs[i])
		}
	}
	for i := range s.Volumes {
		defaultVolumeMore(&s.Volumes[i])
		defaultVolume(&s.Volumes[i].VolumeSource)
	}
	defaultEphemeralContainers(s)
}

// defaultVolume sets the default file modes of the volume sources that
// have one (SetDefaults_SecretVolumeSource and the like).
func defaultVolume(v *corev1.VolumeSource) {
	mode := func(m **int32, def int32) {
		if *m == nil {
			*m = &def
		}
	}
	switch {
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode)
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode)
	case v.HostPath != nil:
		if v.HostPath.Type == nil {
			t := corev1.HostPathUnset
			v.HostPath.Type = &t
		}
	}
}

// defaultContainer is SetDefaults_Container (and its ports' and probes').
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if latestTag(c.Image) {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, e := range c.Env {
		// SetDefaults_ObjectFieldSelector (the job controller's
		// JOB_COMPLETION_INDEX names none).
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.APIVersion == "" {
			e.ValueFrom.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		if h := p.HTTPGet; h != nil {
			if h.Path == "" {
				h.Path = "/"
			}
			if h.Scheme == "" {
				h.Scheme = corev1.URISchemeHTTP
			}
		}
	}
}

// defaultDeployment is SetDefaults_Deployment (apps/v1).
func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	st := &d.Spec.Strategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if st.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			st.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if st.RollingUpdate.MaxSurge == nil {
			st.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

// defaultReplicaSet is SetDefaults_ReplicaSet (apps/v1).
func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr.To[int32](1)
	}
	defaultPodSpec(&rs.Spec.Template.Spec)
}

// latestTag reports whether an image reference names no tag or the tag
// "latest" (and no digest): its pull policy defaults to Always.
func latestTag(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndex(name, ":")
	return i < 0 || name[i+1:] == "latest"
}

// Names and values of the ServiceAccount admission plugin
// (plugin/pkg/admission/serviceaccount).
const (
	serviceAccountMountPath  = "/var/run/secrets/kubernetes.io/serviceaccount"
	serviceAccountVolumeBase = "kube-api-access-"
	serviceAccountTokenTTL   = 3607 // an hour and the 7 s kubelets refresh early by
)

// admitPod runs the default admission plugins that change a new Pod (the
// lock is held): ServiceAccount, Priority, DefaultTolerationSeconds; then
// the strategy's status. An error refuses the create, as the plugin does.
func (s *Store) admitPod(p *corev1.Pod) error {
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = "default"
	}
	p.Spec.DeprecatedServiceAccount = p.Spec.ServiceAccountName
	sa, err := s.serviceAccount(p.Namespace, p.Spec.ServiceAccountName)
	if err != nil {
		return apierrors.NewForbidden(corev1.Resource("pods"), p.Name, err)
	}
	if automount(p, sa) {
		mountToken(p)
	}
	if p.Spec.Priority == nil {
		var prio int32
		switch p.Spec.PriorityClassName {
		case "system-node-critical":
			prio = 2000001000
		case "system-cluster-critical":
			prio = 2000000000
		}
		p.Spec.Priority = &prio
	}
	if p.Spec.PreemptionPolicy == nil {
		pol := corev1.PreemptLowerPriority
		p.Spec.PreemptionPolicy = &pol
	}
	defaultTolerations(p)
	// The pod strategy's PrepareForCreate, after the field manager.
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(p)}
	return nil
}

// serviceAccount returns the service account a Pod names, or the
// admission plugin's refusal when the world, which knows the namespace's
// service accounts, has none of that name (the lock is held).
func (s *Store) serviceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	h := s.res[Resource{Version: "v1", Resource: "serviceaccounts"}]
	if h == nil {
		// The session shows no service account at all (nothing listed or
		// watched them): the world cannot tell, and takes it that the
		// account exists.
		return &corev1.ServiceAccount{}, nil
	}
	{
		if e := s.current(h, Key{ns, name}); e != nil {
			if obj, err := s.decodeEntry(e); err == nil {
				if sa, ok := obj.(*corev1.ServiceAccount); ok {
					return sa, nil
				}
			}
			return &corev1.ServiceAccount{}, nil
		}
	}
	return nil, fmt.Errorf("error looking up service account %s/%s: serviceaccount %q not found", ns, name, name)
}

// automount reports whether a Pod gets its service account's token: unless
// the Pod, or else its service account, says no.
func automount(p *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if p.Spec.AutomountServiceAccountToken != nil {
		return *p.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken adds the projected token volume of the ServiceAccount plugin
// and mounts it in every container that does not mount something at its
// path already.
func mountToken(p *corev1.Pod) {
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, serviceAccountVolumeBase) {
			return
		}
	}
	name := serviceAccountVolumeBase + utilrand.String(5)
	ttl := int64(serviceAccountTokenTTL)
	mode := corev1.ProjectedVolumeSourceDefaultMode
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &ttl, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}},
	}})
	mount := func(cs []corev1.Container) {
		for i := range cs {
			has := false
			for _, m := range cs[i].VolumeMounts {
				has = has || m.MountPath == serviceAccountMountPath
			}
			if !has {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: serviceAccountMountPath})
			}
		}
	}
	mount(p.Spec.InitContainers)
	mount(p.Spec.Containers)
}

// defaultTolerations is the DefaultTolerationSeconds plugin: a Pod that
// does not tolerate the not-ready and unreachable taints for NoExecute
// tolerates them for 300 seconds.
func defaultTolerations(p *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		has := false
		for _, t := range p.Spec.Tolerations {
			if (t.Key == key || t.Key == "" && t.Operator == corev1.TolerationOpExists) &&
				(t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
				has = true
			}
		}
		if !has {
			secs := int64(300)
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
		}
	}
}

// qosClass is the Pod's quality of service class (pkg/apis/core/v1/helper/qos):
// Guaranteed when every container's requests equal its limits for CPU and
// memory, BestEffort when none sets either, else Burstable.
func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	zero := resource.MustParse("0")
	guaranteed := true
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for name, q := range c.Resources.Requests {
				if (name == corev1.ResourceCPU || name == corev1.ResourceMemory) && q.Cmp(zero) == 1 {
					sum := requests[name]
					sum.Add(q)
					requests[name] = sum
				}
			}
			seen := map[corev1.ResourceName]bool{}
			for name, q := range c.Resources.Limits {
				if (name == corev1.ResourceCPU || name == corev1.ResourceMemory) && q.Cmp(zero) == 1 {
					seen[name] = true
					sum := limits[name]
					sum.Add(q)
					limits[name] = sum
				}
			}
			if !seen[corev1.ResourceCPU] || !seen[corev1.ResourceMemory] {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// defaultObject sets what the apiserver's decoder defaults in an object it
// decodes (a create's, an update's, a patched one), for the kinds the
// world models, before the field manager sees it (which counts the
// defaults as the client's; admit comes after it). Other kinds are stored
// as they come.
func defaultObject(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		defaultPod(o)
	case *appsv1.Deployment:
		defaultDeployment(o)
	case *appsv1.ReplicaSet:
		defaultReplicaSet(o)
	case *corev1.PodTemplate:
		defaultPodSpec(&o.Template.Spec)
	case *corev1.Service:
		defaultService(o)
	default:
		defaultKind(obj)
	}
}

// admit runs the default admission plugins the world models on a new
// object (the lock is held), and the registry's PrepareForCreate and
// validation of a CRD or an APIService (createServerKind); an error
// refuses the create.
func (s *Store) admit(obj runtime.Object) error {
	if err := s.createServerKind(obj); err != nil {
		return err
	}
	if p, ok := obj.(*corev1.Pod); ok {
		return s.admitPod(p)
	}
	s.admitKind(obj)
	return nil
}

// admitNamespace is the NamespaceLifecycle admission plugin for a create
// in namespace ns (the lock is held): a namespace being terminated takes
// no new content (403, its cause NamespaceTerminating); one that does not
// exist is a 404 — when the world knows the namespaces at all (a session
// that never listed or watched them shows only some).
func (s *Store) admitNamespace(info Info, ns, name string) error {
	if !info.Namespaced || ns == "" || isAccessReview(info.Resource) {
		return nil
	}
	h := s.res[Resource{Version: "v1", Resource: "namespaces"}]
	if h == nil || len(h.rec)+len(h.syn) == 0 {
		return nil
	}
	e := s.current(h, Key{"", ns})
	if e == nil {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
	}
	obj, err := s.decodeEntry(e)
	if err != nil {
		return nil
	}
	if n, ok := obj.(*corev1.Namespace); !ok || n.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	st := apierrors.NewForbidden(info.Resource.GroupResource(), name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", ns),
		Field: "metadata.namespace"})
	return st
}

// isAccessReview reports whether r is one of the access reviews that
// NamespaceLifecycle always lets through.
func isAccessReview(r Resource) bool {
	return r.Group == "authorization.k8s.io" && (r.Resource == "localsubjectaccessreviews")
}

// immortalNamespaces may not be deleted (NamespaceLifecycle).
var immortalNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true}
