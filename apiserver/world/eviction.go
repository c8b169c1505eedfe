package world

import (
	"fmt"
	"net/http"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// evictionREST is a Pod's eviction subresource (POST
// …/pods/NAME/eviction), as kube-apiserver v1.33's EvictionREST
// (pkg/registry/core/pod/storage/eviction.go): a Pod that cannot disrupt
// anything (terminal, Pending, being deleted) is deleted at once; any
// other only if its PodDisruptionBudget allows (one budget at most: the
// budget's disruptionsAllowed decremented and the Pod named in its
// disruptedPods, as the apiserver writes the budget's status), else 429
// TooManyRequests. A Pod that goes gets the DisruptionTarget condition
// first, in a version of its own, then is deleted as a DELETE with the
// eviction's options would.
type evictionREST struct{}

func (evictionREST) serves(info Info, _ policy) bool { return isPods(info.Resource) }

var evictionGVK = policyv1.SchemeGroupVersion.WithKind("Eviction")

func (evictionREST) createNamed(s *Store, c *call) *Response {
	in, err := readWrite(c, "CreateOptions", evictionGVK)
	if err != nil {
		return s.fail(c, err)
	}
	ev, ok := in.obj.(*policyv1.Eviction)
	if !ok {
		return s.fail(c, apierrors.NewBadRequest(fmt.Sprintf("not a Eviction object: %T", in.obj)))
	}
	if ev.Name != c.t.Name {
		return s.fail(c, apierrors.NewBadRequest("name in URL does not match name in Eviction object"))
	}
	if o := ev.DeleteOptions; o != nil && o.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *o.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return s.fail(c, apierrors.NewInvalid(evictionGVK.GroupKind(), c.t.Name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true, "can not be set for pod eviction, try after removing the option")}))
	}
	opts, err := evictionOptions(ev, c.r.Query["dryRun"])
	if err != nil {
		return s.fail(c, err)
	}
	pods := *c
	pods.how = HowDelete
	return withWarnings(s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			return s.fail(c, apierrors.NewNotFound(corev1.Resource("pods"), c.t.Name))
		}
		obj, err := s.decodeEntry(o.cur)
		if err != nil {
			return s.fail(c, err)
		}
		pod := obj.(*corev1.Pod)
		st, err := s.evict(&pods, o, pod, opts)
		if err != nil {
			return s.fail(c, err)
		}
		st.SetGroupVersionKind(statusGVK)
		code := http.StatusCreated
		if st.Code != 0 {
			code = int(st.Code)
		} else {
			st.Code = http.StatusCreated
		}
		return s.respondObject(c.r, c.info, code, st, c.how, !dryRun(opts))
	}), in.warnings)
}

// evictionOptions are the options of the deletion an eviction asks for,
// its dryRun the request's (propagateDryRun).
func evictionOptions(ev *policyv1.Eviction, dry []string) (*metav1.DeleteOptions, error) {
	if ev.DeleteOptions == nil {
		return &metav1.DeleteOptions{DryRun: dry}, nil
	}
	switch {
	case len(ev.DeleteOptions.DryRun) == 0:
		ev.DeleteOptions.DryRun = dry
	case len(dry) > 0 && !reflect.DeepEqual(dry, ev.DeleteOptions.DryRun):
		return nil, fmt.Errorf("Non-matching dry-run options in request and content: %v and %v", dry, ev.DeleteOptions.DryRun)
	}
	return ev.DeleteOptions, nil
}

// evict evicts pod, the current version of o (the lock is held): the
// answer's Status, or the error that refuses it.
func (s *Store) evict(c *call, o held, pod *corev1.Pod, opts *metav1.DeleteOptions) (*metav1.Status, error) {
	if !canIgnoreBudget(pod) {
		pdbs := s.budgetsOf(pod)
		switch len(pdbs) {
		case 0:
		case 1:
			unhealthyOK, err := s.checkBudget(pod, pdbs[0], dryRun(opts))
			if err != nil {
				return nil, err
			}
			if unhealthyOK && opts.Preconditions == nil {
				opts = opts.DeepCopy()
				opts.Preconditions = &metav1.Preconditions{ResourceVersion: &pod.ResourceVersion}
			}
		default:
			return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
				Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}, nil
		}
	} else if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil &&
		opts.Preconditions == nil {
		opts = opts.DeepCopy()
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &pod.ResourceVersion}
	}
	if err := s.disruptAndDelete(c, o, pod, opts); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// canIgnoreBudget is canIgnorePDB: a Pod that is terminal, Pending or
// being deleted disrupts nothing more.
func canIgnoreBudget(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// budgetsOf returns the PodDisruptionBudgets of pod's namespace whose
// selector matches it (the lock is held).
func (s *Store) budgetsOf(pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, o := range s.currentOf(Resource{Group: policyv1.GroupName, Version: "v1", Resource: "poddisruptionbudgets"}) {
		b, ok := o.(*policyv1.PodDisruptionBudget)
		if !ok || b.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// checkBudget decides what pdb says of evicting pod (the lock is held):
// an unready Pod its policy lets go (unhealthyOK), a disruption it allows
// (decremented in its status, unless dryRun), or the apiserver's refusal.
func (s *Store) checkBudget(pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, dryRun bool) (unhealthyOK bool, err error) {
	old := pdb.DeepCopy()
	if !podReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return true, nil
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return true, nil
		}
	}
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return false, budgetBusy(pdb.Name)
	case pdb.Status.DisruptionsAllowed < 0:
		return false, apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	case pdb.Status.DisruptionsAllowed == 0:
		e := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)})
		return false, e
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		apimeta.SetStatusCondition(&pdb.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
			Reason: policyv1.InsufficientPodsReason, Status: metav1.ConditionFalse, ObservedGeneration: pdb.Status.ObservedGeneration})
	}
	if dryRun {
		return false, nil
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(s.now())
	h, _ := s.hist(Resource{Group: policyv1.GroupName, Version: "v1", Resource: "poddisruptionbudgets"})
	gvk := policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")
	pdb.SetGroupVersionKind(gvk)
	var obj runtime.Object = pdb
	if mgr, err := fieldManager(gvk, "status"); err == nil {
		// The apiserver updates it through its own loopback client.
		obj = mgr.UpdateNoErrors(old, pdb, "kube-apiserver")
		fixManagedTimes(old, obj, s.timeNow())
	}
	if _, err := s.store(h, Key{pdb.Namespace, pdb.Name}, obj, Modified); err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return false, nil
}

// budgetBusy is the 429 of a budget its controller has not processed yet.
func budgetBusy(name string) error {
	e := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return e
}

// podReady is IsPodReady: its Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// disruptAndDelete is addConditionAndDeletePod (the lock is held): the
// Pod gets the DisruptionTarget condition (checked against the deletion's
// preconditions first), then is deleted with opts.
func (s *Store) disruptAndDelete(c *call, o held, pod *corev1.Pod, opts *metav1.DeleteOptions) error {
	if pc := opts.Preconditions; pc != nil {
		gr := corev1.Resource("Pod")
		if pc.UID != nil && *pc.UID != "" && *pc.UID != pod.UID {
			return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pc.UID, pod.UID))
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != "" && *pc.ResourceVersion != pod.ResourceVersion {
			return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pc.ResourceVersion, pod.ResourceVersion))
		}
	}
	cur := o.cur
	if !dryRun(opts) {
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}, metav1.NewTime(s.now()))
		pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
		if _, err := s.store(o.h, o.key, pod, Modified); err != nil {
			return apierrors.NewInternalError(err)
		}
		cur = s.current(o.h, o.key)
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			opts = opts.DeepCopy()
			rv := formatRV(cur.rv)
			opts.Preconditions.ResourceVersion = &rv
		}
	}
	_, _, err := s.deleteLocked(c.info, o.h, o.key, cur, opts)
	return err
}
