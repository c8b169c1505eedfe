package world

import (
	"fmt"
	"net/http"

	"github.com/wtrace/wtrace/apiserver/codec"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// scaleReplicas maps each scalable kind's API version to the path of its
// replicas, for the managedFields of the scale subresource
// (managedfields.ScaleHandler, as the apps and core registries use it).
var scaleReplicas = map[string]managedfields.ResourcePathMappings{
	"deployments":            {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"replicasets":            {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"statefulsets":           {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"replicationcontrollers": {"v1": fieldpath.MakePathOrDie("spec", "replicas")},
}

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// scaleREST is the scale subresource of the scalable kinds: the
// object's replicas as an autoscaling/v1 Scale.
type scaleREST struct{}

func (scaleREST) serves(_ Info, pol policy) bool { return pol.scale }

// get answers GET of the object's Scale.
func (scaleREST) get(s *Store, c *call) *Response {
	o, _, err := s.served(c)
	if err != nil {
		return s.errorResponse(c.r, err, HowError)
	}
	obj, err := codec.Decode(o)
	if err != nil {
		return s.errorResponse(c.r, err, HowError)
	}
	sc, err := scaleOf(obj)
	if err != nil {
		return s.errorResponse(c.r, err, HowError)
	}
	return s.respondObject(c.r, scaleInfo, http.StatusOK, sc, HowGet, false)
}

// update answers PUT of the object's Scale.
func (scaleREST) update(s *Store, c *call) *Response {
	in, err := readPut(c, scaleGVK)
	if err != nil {
		return s.fail(c, err)
	}
	return s.withScaled(c, func(o held, old runtime.Object) *Response {
		return s.updateScale(c, o, old, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			return in.obj.(*autoscalingv1.Scale), nil
		}, in.p)
	})
}

// patch answers PATCH of the object's Scale.
func (scaleREST) patch(s *Store, c *call) *Response {
	pr, err := readPatch(c, "scale")
	if err != nil {
		return s.fail(c, err)
	}
	return s.withScaled(c, func(o held, old runtime.Object) *Response {
		return s.updateScale(c, o, old, func(sc *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			obj, err := s.run(pr, sc, scaleGVK)
			if err != nil {
				return nil, err
			}
			return obj.(*autoscalingv1.Scale), nil
		}, pr.p)
	})
}

// withScaled runs f with the store's lock held and the object whose
// Scale c names, decoded (404 when there is none).
func (s *Store) withScaled(c *call, f func(o held, old runtime.Object) *Response) *Response {
	return s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			return s.fail(c, apierrors.NewNotFound(c.info.Resource.GroupResource(), c.t.Name))
		}
		old, err := s.decodeEntry(o.cur)
		if err != nil {
			return s.fail(c, err)
		}
		return f(o, old)
	})
}

// updateScale answers an update of the scale subresource (the lock is
// held): the object's Scale, with the managedFields of its replicas, goes
// to change (the request's Scale, or a patch of the current one); the new
// replicas and managedFields go back to the object.
func (s *Store) updateScale(c *call, o held, old runtime.Object, change func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error), p writeParams) *Response {
	info, key := c.info, o.key
	om, _ := meta.Accessor(old)
	handler := managedfields.NewScaleHandler(om.GetManagedFields(), info.Resource.GroupVersion(), scaleReplicas[info.Resource.Resource])
	oldScale, err := scaleOf(old)
	if err != nil {
		return s.fail(c, err)
	}
	if oldScale.ManagedFields, err = handler.ToSubresource(); err != nil {
		return s.fail(c, err)
	}
	sc, err := change(oldScale)
	if err != nil {
		return s.fail(c, err)
	}
	if rv := sc.ResourceVersion; rv != "" && rv != om.GetResourceVersion() {
		return s.fail(c, apierrors.NewConflict(info.Resource.GroupResource(), key.Name, fmt.Errorf("%s", optimisticLockMsg)))
	}
	if sc.UID != "" && sc.UID != om.GetUID() {
		gr := info.Resource.GroupResource()
		gr.Resource += "/scale"
		return s.fail(c, apierrors.NewConflict(gr, key.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", sc.UID, om.GetUID())))
	}
	if c.how != HowApply {
		mgr, err := fieldManager(scaleGVK, "scale")
		if err != nil {
			return s.fail(c, err)
		}
		sc = mgr.UpdateNoErrors(oldScale, sc, p.manager).(*autoscalingv1.Scale)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return s.fail(c, err)
	}
	if err := unstructured.SetNestedField(u, int64(sc.Spec.Replicas), "spec", "replicas"); err != nil {
		return s.fail(c, err)
	}
	obj := newObject(info.GVK())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		return s.fail(c, err)
	}
	mf, err := handler.ToParent(sc.ManagedFields)
	if err != nil {
		return s.fail(c, err)
	}
	m, _ := meta.Accessor(obj)
	m.SetManagedFields(mf)
	obj, err = prepareUpdate(obj, old, policyFor(info), "")
	if err != nil {
		return s.fail(c, err)
	}
	resp := s.commitUpdate(c, o, old, obj, p)
	if resp.Code != http.StatusOK {
		return resp
	}
	cur := old
	if e := s.current(o.h, key); e != nil && !p.dryRun {
		if cur, err = s.decodeEntry(e); err != nil {
			return s.fail(c, err)
		}
	} else if p.dryRun {
		cur = obj
	}
	out, err := scaleOf(cur)
	if err != nil {
		return s.fail(c, err)
	}
	return s.respondObject(c.r, scaleInfo, http.StatusOK, out, c.how, resp.Changed)
}

// scaleInfo is the resource of autoscaling/v1 Scale objects.
var scaleInfo = Info{Resource: Resource{Group: "autoscaling", Version: "v1", Resource: "scales"}, Kind: "Scale", Namespaced: true}

// scaleOf is the autoscaling/v1 Scale of a scalable object, as the
// apiserver's scale subresources build it.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		uo, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u = &unstructured.Unstructured{Object: uo}
	}
	spec, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	status, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status)},
	}
	if sel, ok, _ := unstructured.NestedMap(u.Object, "spec", "selector"); ok {
		if _, ok := sel["matchLabels"]; ok || sel["matchExpressions"] != nil {
			var ls metav1.LabelSelector
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err == nil {
				if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
					sc.Status.Selector = s.String()
				}
			}
		} else {
			// ReplicationController: a plain map of labels.
			labels := map[string]string{}
			for k, v := range sel {
				if s, ok := v.(string); ok {
					labels[k] = s
				}
			}
			sc.Status.Selector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})
		}
	}
	sc.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	return sc, nil
}
