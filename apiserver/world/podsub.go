package world

import (
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The subresources that change one part of an object and keep the rest
// as it was, as kube-apiserver v1.33's strategies do
// (pkg/registry/core/pod/strategy.go: podEphemeralContainersStrategy,
// podResizeStrategy; pkg/registry/certificates/certificates/strategy.go:
// csrApprovalStrategy): a Pod's ephemeral containers (what kubectl debug
// adds), its containers' resources (an in-place resize), a
// CertificateSigningRequest's approval conditions. Each answers GET with
// the whole object, PUT and PATCH with the object as updated.

// ephemeralContainersREST is pods/ephemeralcontainers.
type ephemeralContainersREST struct{}

func (ephemeralContainersREST) serves(info Info, _ policy) bool { return isPods(info.Resource) }

func (ephemeralContainersREST) get(s *Store, c *call) *Response { return s.get(c) }
func (ephemeralContainersREST) update(s *Store, c *call) *Response {
	return s.put(c, "ephemeralcontainers", false)
}
func (ephemeralContainersREST) patch(s *Store, c *call) *Response {
	return s.patch(c, "ephemeralcontainers")
}

// resizeREST is pods/resize.
type resizeREST struct{}

func (resizeREST) serves(info Info, _ policy) bool { return isPods(info.Resource) }

func (resizeREST) get(s *Store, c *call) *Response    { return s.get(c) }
func (resizeREST) update(s *Store, c *call) *Response { return s.put(c, "resize", false) }
func (resizeREST) patch(s *Store, c *call) *Response  { return s.patch(c, "resize") }

// approvalREST is certificatesigningrequests/approval.
type approvalREST struct{}

func (approvalREST) serves(info Info, _ policy) bool {
	return info.Resource.Group == "certificates.k8s.io" && info.Resource.Resource == "certificatesigningrequests"
}

func (approvalREST) get(s *Store, c *call) *Response    { return s.get(c) }
func (approvalREST) update(s *Store, c *call) *Response { return s.put(c, "approval", false) }
func (approvalREST) patch(s *Store, c *call) *Response  { return s.patch(c, "approval") }

// partialUpdate is PrepareForUpdate of the subresources above: obj keeps
// only what subresource may change, the rest taken from old; ok is false
// for any other subresource. prepareUpdate bumps a Pod's generation when
// its spec changed (updatePodGeneration); commitUpdate stamps the
// approval's conditions (conditionTimes).
func partialUpdate(obj, old runtime.Object, subresource string) (ok bool) {
	switch subresource {
	case "ephemeralcontainers":
		p, op, typed := pods(obj, old)
		if !typed {
			return false
		}
		eph := p.Spec.EphemeralContainers
		p.Spec = *op.Spec.DeepCopy()
		p.Spec.EphemeralContainers = eph
		p.Status = *op.Status.DeepCopy()
		metav1.ResetObjectMetaForStatus(p, op)
		return true
	case "resize":
		p, op, typed := pods(obj, old)
		if !typed {
			return false
		}
		if len(p.Spec.Containers) == len(op.Spec.Containers) && len(p.Spec.InitContainers) == len(op.Spec.InitContainers) {
			containers, cok := resized(p.Spec.Containers, op.Spec.Containers)
			inits, iok := resized(p.Spec.InitContainers, op.Spec.InitContainers)
			if cok && iok {
				p.Spec = *op.Spec.DeepCopy()
				p.Spec.Containers, p.Spec.InitContainers = containers, inits
				p.Status = *op.Status.DeepCopy()
				metav1.ResetObjectMetaForStatus(p, op)
			}
		}
		return true
	case "approval":
		csr, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
		ocsr, ok2 := old.(*certificatesv1.CertificateSigningRequest)
		if !ok1 || !ok2 {
			return false
		}
		conds := csr.Status.Conditions
		csr.Spec = *ocsr.Spec.DeepCopy()
		csr.Status = *ocsr.Status.DeepCopy()
		csr.Status.Conditions = conds
		return true
	}
	return false
}

// pods returns obj and old as Pods, typed false when either is not.
func pods(obj, old runtime.Object) (p, op *corev1.Pod, typed bool) {
	p, ok1 := obj.(*corev1.Pod)
	op, ok2 := old.(*corev1.Pod)
	return p, op, ok1 && ok2
}

// resized is dropNonResizeUpdatesForContainers: old's containers with the
// resources and resize policy of new's; ok is false when a container was
// renamed or moved (validation refuses it then).
func resized(new, old []corev1.Container) ([]corev1.Container, bool) {
	if len(new) == 0 {
		return new, true
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		out[i] = *old[i].DeepCopy()
		if out[i].Name != new[i].Name {
			return new, false
		}
		out[i].Resources = new[i].Resources
		out[i].ResizePolicy = new[i].ResizePolicy
	}
	return out, true
}

// conditionTimes is populateConditionTimestamps: a condition without
// times gets now as its last update, and as its last transition unless
// old had the same type with the same status (then old's).
func conditionTimes(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	t := metav1.NewTime(now.Truncate(time.Second))
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = t
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = t
		for _, oc := range old.Status.Conditions {
			if oc.Type == c.Type && oc.Status == c.Status && !oc.LastTransitionTime.IsZero() {
				c.LastTransitionTime = oc.LastTransitionTime
				break
			}
		}
	}
}

// partialGeneration reports whether an update of subresource bumps the
// generation when the spec changed: a Pod's ephemeral containers and
// resize (updatePodGeneration in their strategies).
func partialGeneration(subresource string) bool {
	return subresource == "ephemeralcontainers" || subresource == "resize"
}

// validatePartialUpdate is the part of the subresources' ValidateUpdate
// the world checks: a resize may not change a Pod's QoS class
// (ValidatePodResize).
func validatePartialUpdate(subresource string, obj, old runtime.Object) error {
	if subresource != "resize" {
		return nil
	}
	p, op, typed := pods(obj, old)
	if !typed {
		return nil
	}
	was := op.Status.QOSClass
	if was == "" {
		was = qosClass(op)
	}
	if now := qosClass(p); now != was {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, p.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec"), string(was), "Pod QOS Class may not change as a result of resizing")})
	}
	return nil
}

// podSpecUpdateRule is the message of ValidatePodUpdate's refusal of a
// change to a Pod's spec, which a diff follows (kube-apiserver's of its
// internal types, the world's of k8s.io/api's).
const podSpecUpdateRule = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate is ValidatePodUpdate's rule for a Pod's own update:
// its spec is immutable but for its containers' images, a shorter (or
// first) activeDeadlineSeconds, added tolerations, a terminationGrace-
// PeriodSeconds of 1 where it was negative, and removed scheduling
// gates (with the node selector and affinity a gated Pod may gain). Its
// ephemeral containers and resources change through their subresources.
func validatePodUpdate(p, op *corev1.Pod) error {
	m := p.Spec.DeepCopy()
	for i := range m.Containers {
		if i < len(op.Spec.Containers) {
			m.Containers[i].Image = op.Spec.Containers[i].Image
		}
	}
	for i := range m.InitContainers {
		if i < len(op.Spec.InitContainers) {
			m.InitContainers[i].Image = op.Spec.InitContainers[i].Image
		}
	}
	if a, oa := m.ActiveDeadlineSeconds, op.Spec.ActiveDeadlineSeconds; a != nil && (oa == nil || *a <= *oa) {
		m.ActiveDeadlineSeconds = oa
	}
	if g, og := m.TerminationGracePeriodSeconds, op.Spec.TerminationGracePeriodSeconds; g != nil && og != nil && *og < 0 && *g == 1 {
		m.TerminationGracePeriodSeconds = og
	}
	if tolerationsAdded(m.Tolerations, op.Spec.Tolerations) {
		m.Tolerations = op.Spec.Tolerations
	}
	if len(op.Spec.SchedulingGates) > 0 {
		m.SchedulingGates, m.NodeSelector, m.Affinity = op.Spec.SchedulingGates, op.Spec.NodeSelector, op.Spec.Affinity
	}
	m.EphemeralContainers = op.Spec.EphemeralContainers
	if apiequality.Semantic.DeepEqual(*m, op.Spec) {
		return nil
	}
	// Followed, as ValidatePodUpdate does, by a go-cmp diff of the spec
	// as it was and as sent (with what may change put back).
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, p.Name, field.ErrorList{
		field.Forbidden(field.NewPath("spec"), podSpecUpdateRule+"\n"+cmp.Diff(op.Spec, *m))})
}

// tolerationsAdded reports whether now holds every toleration of was
// (ValidateTolerationsInPodUpdate: tolerations may only be added; an
// existing NoExecute one may shorten its tolerationSeconds).
func tolerationsAdded(now, was []corev1.Toleration) bool {
	for _, w := range was {
		found := false
		for _, n := range now {
			if n.Key == w.Key && n.Operator == w.Operator && n.Value == w.Value && n.Effect == w.Effect &&
				(apiequality.Semantic.DeepEqual(n.TolerationSeconds, w.TolerationSeconds) ||
					w.TolerationSeconds != nil && n.TolerationSeconds != nil && *n.TolerationSeconds <= *w.TolerationSeconds) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
