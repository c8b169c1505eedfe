package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// deleteOptions reads DeleteOptions from the body (JSON or YAML), or else
// from the query, as the apiserver's delete handlers do.
func deleteOptions(r *Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if len(r.Body) > 0 {
		body := r.Body
		mt, err := codec.ContentFormat(r.Header.Get("Content-Type"))
		if err != nil {
			return nil, err
		}
		switch mt {
		case codec.MediaProtobuf:
			// client-go sends its DeleteOptions in the encoding of its
			// requests: a protobuf envelope around metav1.DeleteOptions.
			o, err := codec.FromBody(frame.Protobuf, body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			if err := opts.Unmarshal(o.Raw); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		case codec.MediaCBOR:
			// ClientsPreferCBOR: a self-described CBOR DeleteOptions.
			o, err := codec.FromBody(frame.CBOR, body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			obj, err := codec.Decode(o)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			d, ok := obj.(*metav1.DeleteOptions)
			if !ok {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("a %s body where DeleteOptions were expected", o.Kind))
			}
			opts = d
		case codec.MediaYAML:
			if body, err = yaml.YAMLToJSON(body); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			fallthrough
		default:
			if err := json.Unmarshal(body, opts); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
	} else {
		q := r.Query
		if v := q.Get("gracePeriodSeconds"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			opts.GracePeriodSeconds = &n
		}
		if v := q.Get("propagationPolicy"); v != "" {
			pp := metav1.DeletionPropagation(v)
			opts.PropagationPolicy = &pp
		}
		if v := q.Get("orphanDependents"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			opts.OrphanDependents = &b //nolint:staticcheck // part of the API
		}
		opts.DryRun = q["dryRun"]
	}
	var errs field.ErrorList
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun"), opts.DryRun, []string{metav1.DryRunAll}))
			break
		}
	}
	if pp := opts.PropagationPolicy; pp != nil {
		switch *pp {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("propagationPolicy"), *pp,
				[]string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan), "nil"}))
		}
		if opts.OrphanDependents != nil { //nolint:staticcheck // part of the API
			errs = append(errs, field.Invalid(field.NewPath("propagationPolicy"), *pp, "orphanDependents and deletionPropagation cannot be both set"))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}

func dryRun(opts *metav1.DeleteOptions) bool { return len(opts.DryRun) > 0 }

// delete answers DELETE of one object.
func (s *Store) delete(c *call) *Response {
	opts, err := deleteOptions(c.r)
	if err != nil {
		return s.fail(c, err)
	}
	return s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			return s.fail(c, apierrors.NewNotFound(c.info.Resource.GroupResource(), c.t.Name))
		}
		if c.info.Resource == crdResource { // the CRD registry's own Delete (not a collection's)
			if out, code, err, done := s.deleteCRD(o.h, o.key, o.cur, opts); done {
				if err != nil {
					return s.fail(c, err)
				}
				return s.respondObject(c.r, c.info, code, out, c.how, !dryRun(opts))
			}
		}
		out, code, err := s.deleteLocked(c.info, o.h, o.key, o.cur, opts)
		if err != nil {
			return s.fail(c, err)
		}
		return s.respondObject(c.r, c.info, code, out, c.how, !dryRun(opts))
	}).withDeleteWarning(c, opts)
}

// jobDeleteWarning is the job registry's warning on a deletion that does
// not say what becomes of the Job's Pods (batch/v1 orphans them).
const jobDeleteWarning = "child pods are preserved by default when jobs are deleted; " +
	"set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"

// withDeleteWarning adds the warning of a deletion (of one object, or a
// collection) whose options leave a kind that orphans its dependents by
// default to that default: the registry warns before it looks for the
// object.
func (resp *Response) withDeleteWarning(c *call, opts *metav1.DeleteOptions) *Response {
	//nolint:staticcheck // OrphanDependents is part of the API
	if c.pol.orphanDefault && c.pol.resource == "jobs" && opts.PropagationPolicy == nil && opts.OrphanDependents == nil {
		resp.Warnings = append(resp.Warnings, jobDeleteWarning)
	}
	return resp
}

// deleteLocked deletes one object as the apiserver's registry does (the
// lock is held): preconditions, a Pod's grace period, the garbage
// collector's finalizers; then either a deletion that waits (finalizers, a
// Pod's grace period: the object gets its deletionTimestamp) or one that
// happens now (a Pod first gets its deletionTimestamp too, in a version of
// its own). It returns what the apiserver answers with.
func (s *Store) deleteLocked(info Info, h *history, key Key, cur *entry, opts *metav1.DeleteOptions) (runtime.Object, int, error) {
	pol := policyFor(info)
	old, err := s.decodeAs(cur, info.GVK())
	if err != nil {
		return nil, 0, err
	}
	om, _ := meta.Accessor(old)
	if pc := opts.Preconditions; pc != nil && info.Resource.Group == "" && info.Resource.Resource == "namespaces" {
		// The namespace registry checks them itself, in words of its own.
		gr := info.Resource.GroupResource()
		if pc.UID != nil && *pc.UID != om.GetUID() {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pc.UID, om.GetUID()))
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != om.GetResourceVersion() {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pc.ResourceVersion, om.GetResourceVersion()))
		}
	}
	if pc := opts.Preconditions; pc != nil {
		// rest.BeforeDelete's early check names the kind, not the resource.
		// Its kind is the storage's (core's Event for events.k8s.io's).
		sk := storageKind(info)
		gr := schema.GroupResource{Group: sk.Group, Resource: sk.Kind}
		if pc.UID != nil && *pc.UID != om.GetUID() {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pc.UID, om.GetUID()))
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != om.GetResourceVersion() {
			return nil, 0, apierrors.NewConflict(gr, key.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pc.ResourceVersion, om.GetResourceVersion()))
		}
	}
	obj := old.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	now := s.now()
	if ns, ok := obj.(*corev1.Namespace); ok {
		if out, code, err, done := s.deleteNamespace(info, h, key, ns, old, opts, now); done {
			return out, code, err
		}
	}
	graceful, pendingGraceful, grace := beforeDelete(obj, m, opts, now)
	if pendingGraceful {
		return s.finalDeleted(pol, info, old, true), http.StatusOK, nil
	}
	gcChanged := false
	if !pol.gcUnsupported {
		if fins, changed := gcFinalizers(m.GetFinalizers(), opts, pol.orphanDefault); changed {
			m.SetFinalizers(fins)
			gcChanged = true
		}
	}
	pending := len(m.GetFinalizers()) > 0
	code := http.StatusOK
	if o := opts.OrphanDependents; o != nil && !*o { //nolint:staticcheck // part of the API
		code = http.StatusAccepted
	}
	if graceful || pending || gcChanged {
		if !graceful && pending {
			markAsDeleting(m, now)
		}
		if graceful || pending {
			updated := old
			if !sameObject(obj, old) {
				updated = obj
				if !dryRun(opts) {
					o, err := s.store(h, key, obj, Modified)
					if err != nil {
						return nil, 0, err
					}
					if updated, err = codec.Decode(o); err != nil {
						return nil, 0, err
					}
				}
			}
			if pending || grace > 0 {
				return updated, code, nil
			}
			old = updated // deleted now, as updated
		}
	}
	if dryRun(opts) {
		return s.finalDeleted(pol, info, old, false), http.StatusOK, nil
	}
	o, err := s.store(h, key, old.DeepCopyObject(), Deleted)
	if err != nil {
		return nil, 0, err
	}
	s.afterWrite(h, key)
	if svc, ok := old.(*corev1.Service); ok {
		s.releaseIPs(svc)
	}
	gone, err := codec.Decode(o)
	if err != nil {
		return nil, 0, err
	}
	return s.finalDeleted(pol, info, gone, false), http.StatusOK, nil
}

// deleteNamespace is the namespace registry's Delete: the first request
// only starts the namespace's termination (deletionTimestamp, phase
// Terminating: the namespace controller then empties it and removes the
// spec's finalizers through the finalize subresource, which deletes it);
// a later one answers with the namespace as it is while spec.finalizers
// remain, else it deletes as any object (done false: the caller goes on).
func (s *Store) deleteNamespace(info Info, h *history, key Key, ns *corev1.Namespace, old runtime.Object, opts *metav1.DeleteOptions, now time.Time) (out runtime.Object, code int, err error, done bool) {
	if immortalNamespaces[ns.Name] {
		return nil, 0, apierrors.NewForbidden(info.Resource.GroupResource(), ns.Name, errors.New("this namespace may not be deleted")), true
	}
	if ns.DeletionTimestamp.IsZero() {
		t := metav1.NewTime(now)
		ns.DeletionTimestamp = &t
		ns.Status.Phase = corev1.NamespaceTerminating
		if fins, changed := gcFinalizers(ns.Finalizers, opts, false); changed {
			ns.Finalizers = fins
		}
		if dryRun(opts) {
			return ns, http.StatusOK, nil, true
		}
		o, err := s.store(h, key, ns, Modified)
		if err != nil {
			return nil, 0, err, true
		}
		updated, err := codec.Decode(o)
		return updated, http.StatusOK, err, true
	}
	if len(ns.Spec.Finalizers) > 0 {
		return old, http.StatusOK, nil, true // still being emptied: nothing changes
	}
	return nil, 0, nil, false
}

// beforeDelete is rest.BeforeDelete for the one graceful kind, Pod: a
// deletion that is already pending waits (unless it shortens the grace
// period); a new one sets deletionTimestamp to now plus the grace period
// (0 for a Pod not bound to a node or finished) and bumps the generation.
func beforeDelete(obj runtime.Object, m metav1.Object, opts *metav1.DeleteOptions, now time.Time) (graceful, pending bool, grace int64) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false, false, 0
	}
	if dt := m.GetDeletionTimestamp(); dt != nil {
		cur := m.GetDeletionGracePeriodSeconds()
		if cur == nil || *cur == 0 {
			return false, false, 0
		}
		if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds >= *cur {
			return false, true, 0
		}
		period := *opts.GracePeriodSeconds
		t := metav1.NewTime(dt.Add(-time.Second * time.Duration(*cur)).Add(time.Second * time.Duration(period)))
		m.SetDeletionTimestamp(&t)
		m.SetDeletionGracePeriodSeconds(&period)
		return true, false, period
	}
	period := int64(0)
	if opts.GracePeriodSeconds != nil {
		period = *opts.GracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	t := metav1.NewTime(now.Add(time.Second * time.Duration(period)).Truncate(time.Second))
	m.SetDeletionTimestamp(&t)
	m.SetDeletionGracePeriodSeconds(&period)
	if m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
	return true, false, period
}

// markAsDeleting is the registry's markAsDeleting: an object that waits
// for its finalizers.
func markAsDeleting(m metav1.Object, now time.Time) {
	if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
	if dt := m.GetDeletionTimestamp(); dt == nil || dt.After(now) {
		t := metav1.NewTime(now.Truncate(time.Second))
		m.SetDeletionTimestamp(&t)
	}
	zero := int64(0)
	m.SetDeletionGracePeriodSeconds(&zero)
}

// finalDeleted is finalizeDelete: what answers a deletion, the object for
// kinds that return it, else (for one that happened) a Success Status.
func (s *Store) finalDeleted(pol policy, info Info, obj runtime.Object, pending bool) runtime.Object {
	if pending {
		return obj
	}
	return s.deleted(info, pol, obj)
}

// deleted is the apiserver's answer to a deletion that happened: the
// object for kinds that return it, else a Success Status naming it.
func (s *Store) deleted(info Info, pol policy, obj runtime.Object) runtime.Object {
	if pol.returnDeleted {
		return obj
	}
	m, _ := meta.Accessor(obj)
	gr := info.Resource.GroupResource()
	st := &metav1.Status{Status: metav1.StatusSuccess, Details: &metav1.StatusDetails{
		Name: m.GetName(), Group: gr.Group, Kind: gr.Resource, UID: m.GetUID()}}
	st.SetGroupVersionKind(statusGVK)
	return st
}

// gcFinalizers applies the propagation policy to an object's finalizers
// (the registry's deletionFinalizersForGarbageCollection): an explicit
// policy, else the finalizers the object has, else the kind's default
// (orphan for defaultOrphan, else delete dependents in the background).
func gcFinalizers(fins []string, opts *metav1.DeleteOptions, defaultOrphan bool) ([]string, bool) {
	orphan, foreground := false, false
	switch {
	case opts.OrphanDependents != nil: //nolint:staticcheck // part of the API
		orphan = *opts.OrphanDependents //nolint:staticcheck // part of the API
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	default:
		for _, f := range fins {
			switch f {
			case metav1.FinalizerOrphanDependents:
				orphan = true
			case metav1.FinalizerDeleteDependents:
				foreground = true
			}
		}
		if orphan && foreground {
			foreground = false
		}
		if !orphan && !foreground {
			orphan = defaultOrphan
		}
	}
	out := []string{}
	for _, f := range fins {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sameSet(fins, out) {
		return fins, false
	}
	return out, true
}

func sameSet(a, b []string) bool {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	seen := map[string]bool{}
	for _, x := range b {
		if !in[x] {
			return false
		}
		seen[x] = true
	}
	return len(seen) == len(in)
}

// deleteCollection answers DELETE of a collection: every object of its
// scope matching its selectors is deleted as one DELETE would; the answer
// is the list of them as they were before, as the apiserver's.
func (s *Store) deleteCollection(c *call) *Response {
	r, info := c.r, c.info
	opts, err := deleteOptions(r)
	if err != nil {
		return s.errorResponse(r, err, HowDeleteCollection)
	}
	sel, err := newSelector(r.Query.Get("labelSelector"), r.Query.Get("fieldSelector"), info)
	if err != nil {
		return s.errorResponse(r, err, HowDeleteCollection)
	}
	w, err := s.writer(r, codec.TargetList, info)
	if err != nil {
		return s.errorResponse(r, err, HowDeleteCollection)
	}
	return s.deleteItems(c, opts, sel, w).withDeleteWarning(c, opts)
}

// deleteItems deletes the objects of c's scope that sel selects, each as
// one DELETE would, and answers with the list of them as they were.
func (s *Store) deleteItems(c *call, opts *metav1.DeleteOptions, sel *selector, w *codec.Writer) *Response {
	r, t, info := c.r, c.t, c.info
	s.mu.Lock()
	h, _ := s.hist(t.Resource)
	at := s.clk.last
	items, err := s.collect(t, info, sel, at, frame.JSON)
	if err == nil {
		for _, it := range items {
			obj, derr := codec.Decode(it)
			if derr != nil {
				err = derr
				break
			}
			m, _ := meta.Accessor(obj)
			k := Key{m.GetNamespace(), m.GetName()}
			if cur := s.current(h, k); cur != nil {
				if _, _, derr := s.deleteLocked(info, h, k, cur, opts); derr != nil {
					err = derr
					break
				}
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		return s.errorResponse(r, err, HowDeleteCollection)
	}
	body, err := w.List(info.APIVersion(), info.Kind, codec.ListMeta{ResourceVersion: formatRV(at)}, items)
	if err != nil {
		return s.errorResponse(r, notAcceptableEncoding(err, w.Media), HowDeleteCollection)
	}
	return &Response{Code: http.StatusOK, ContentType: w.Media.ContentType(codec.TargetList), Body: body,
		How: HowDeleteCollection, Transcoded: true, Changed: !dryRun(opts) && len(items) > 0}
}

// statusGVK is the kind of a Status the apiserver answers with.
var statusGVK = schema.GroupVersionKind{Version: "v1", Kind: "Status"}
