package world

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// Patch content types (k8s.io/apimachinery/pkg/types).
const (
	jsonPatch      = "application/json-patch+json"
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	applyPatch     = "application/apply-patch+yaml"
)

// maxJSONPatchOperations is the apiserver's limit on operations in one
// JSON patch.
const maxJSONPatchOperations = 10000

// jsonPatchOp is one operation of a JSON patch, as the apiserver decodes
// it first (its error messages name the type "handlers.jsonPatchOp").
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// patch answers PATCH of an object (or its status or scale): JSON patch,
// JSON merge patch, strategic merge patch, server-side apply.
func (s *Store) patch(r *Request, t Target, info Info) *Response {
	how := HowPatch
	pt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	pt = strings.ToLower(strings.TrimSpace(pt))
	pol := policyFor(info)
	switch pt {
	case jsonPatch, mergePatch:
	case strategicPatch:
		if !pol.builtin {
			return s.errorResponse(r, codec.NewStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				"the body of the request was in an unknown format - accepted media types include: "+jsonPatch+", "+mergePatch+", "+applyPatch), how)
		}
	case applyPatch:
		how = HowApply
	default:
		return s.errorResponse(r, unsupportedMediaType(), how)
	}
	p, err := parseWriteParams(r, "PatchOptions")
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	if pt == applyPatch && !p.named {
		return s.errorResponse(r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")}), how)
	}
	if pt != applyPatch && r.Query.Get("force") != "" {
		return s.errorResponse(r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")}), how)
	}
	if t.Subresource == "status" && !pol.status || t.Subresource == "scale" && !pol.scale {
		return s.errorResponse(r, notFoundPath(), how)
	}
	gr := info.Resource.GroupResource()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	key := Key{t.Namespace, t.Name}
	cur := s.current(h, key)
	if cur == nil {
		if pt != applyPatch || t.Subresource != "" {
			return s.errorResponse(r, apierrors.NewNotFound(gr, t.Name), how)
		}
		return s.applyCreate(r, t, info, h, p)
	}
	old, err := s.decodeEntry(cur)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	var warnings []string
	run := func(base runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
		var (
			obj     runtime.Object
			patched []byte
			shown   string
			err     error
		)
		switch pt {
		case jsonPatch, mergePatch:
			obj, patched, err = applyJSONPatch(pt, r.Body, base, gvk)
			shown = string(patched)
		case strategicPatch:
			obj, patched, shown, err = applyStrategicPatch(r.Body, base, gvk)
		default:
			return s.apply(r.Body, base, gvk, t.Subresource, p)
		}
		if err != nil {
			return nil, err
		}
		if warnings, err = checkPatchedFields(p.validation, patched, shown, gvk); err != nil {
			return nil, err
		}
		return obj, nil
	}
	if t.Subresource == "scale" {
		return s.updateScale(r, info, h, key, old, func(sc *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			obj, err := run(sc, scaleGVK)
			if err != nil {
				return nil, err
			}
			return obj.(*autoscalingv1.Scale), nil
		}, p, how)
	}
	obj, err := run(old, info.GVK())
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != t.Name || (info.Namespaced && m.GetNamespace() != t.Namespace) {
		return s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)), how)
	}
	if err := s.checkRV(info, policy{unconditionalUpdate: true}, t.Name, m.GetResourceVersion(), old); err != nil {
		return s.errorResponse(r, err, how)
	}
	convertStringData(obj)
	if pt == applyPatch {
		defaultObject(obj)
		obj, err = prepareUpdate(obj, old, pol, t.Subresource)
	} else {
		obj, err = s.managed(info, old, obj, t.Subresource, p)
	}
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	return withWarnings(s.commitUpdate(r, info, h, key, old, obj, p, how), warnings)
}

// applyJSONPatch applies a JSON patch or a JSON merge patch to base's
// JSON, as the apiserver's jsonPatcher does.
func applyJSONPatch(pt string, patch []byte, base runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, []byte, error) {
	cur, err := codec.Encode(base.DeepCopyObject(), frame.JSON)
	if err != nil {
		return nil, nil, err
	}
	var patched []byte
	if pt == jsonPatch {
		var ops []jsonPatchOp
		if err := json.Unmarshal(patch, &ops); err != nil {
			msg := strings.ReplaceAll(err.Error(), reflect.TypeOf(jsonPatchOp{}).String(), "handlers.jsonPatchOp")
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %s", msg))
		}
		po, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		if len(po) > maxJSONPatchOperations {
			return nil, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(po)))
		}
		patched, err = po.Apply(cur.Raw)
		if err != nil {
			return nil, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	} else {
		var v map[string]any
		if err := json.Unmarshal(patch, &v); err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		patched, err = jsonpatch.MergePatch(cur.Raw, patch)
		if err != nil {
			if err == jsonpatch.ErrBadJSONPatch {
				return nil, nil, apierrors.NewBadRequest(err.Error())
			}
			return nil, nil, err
		}
	}
	obj, err := codec.Decode(codec.Object{Format: frame.JSON, APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Raw: patched})
	if err != nil {
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), string(patched), err.Error())})
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, patched, nil
}

// applyStrategicPatch applies a strategic merge patch with the Go type of
// a built-in kind as its schema.
func applyStrategicPatch(patch []byte, base runtime.Object, gvk schema.GroupVersionKind) (obj runtime.Object, patchedJSON []byte, shown string, err error) {
	orig, err := runtime.DefaultUnstructuredConverter.ToUnstructured(base)
	if err != nil {
		return nil, nil, "", err
	}
	pm := map[string]any{}
	if err := json.Unmarshal(patch, &pm); err != nil {
		return nil, nil, "", apierrors.NewBadRequest(err.Error())
	}
	schemaObj := newObject(gvk)
	patched, err := strategicpatch.StrategicMergeMapPatch(orig, pm, schemaObj)
	if err != nil {
		switch err {
		case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
			mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
			return nil, nil, "", apierrors.NewBadRequest(err.Error())
		case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
			return nil, nil, "", apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return nil, nil, "", err
	}
	obj = newObject(gvk)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patched, obj); err != nil {
		return nil, nil, "", apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patched), err.Error())})
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	patchedJSON, err = json.Marshal(patched)
	if err != nil {
		return nil, nil, "", err
	}
	return obj, patchedJSON, fmt.Sprintf("%+v", pm), nil
}

// apply runs server-side apply with the apiserver's field manager.
func (s *Store) apply(patch []byte, live runtime.Object, gvk schema.GroupVersionKind, subresource string, p writeParams) (runtime.Object, error) {
	po := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(patch, &po.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	mgr, err := fieldManager(gvk, subresource)
	if err != nil {
		return nil, err
	}
	obj, err := mgr.Apply(live, po, p.manager, p.force)
	if err != nil {
		return nil, err
	}
	fixManagedTimes(live, obj, s.timeNow())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// applyCreate creates an object from an apply patch (the lock is held).
func (s *Store) applyCreate(r *Request, t Target, info Info, h *history, p writeParams) *Response {
	live := newObject(info.GVK())
	lm, _ := meta.Accessor(live)
	lm.SetName(t.Name)
	lm.SetNamespace(t.Namespace)
	obj, err := s.apply(r.Body, live, info.GVK(), "", p)
	if err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != t.Name {
		return s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)), HowApply)
	}
	if err := checkNamespace(m, t, info); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	if err := s.admitNamespace(info, m.GetNamespace(), m.GetName()); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	pol := policyFor(info)
	now := s.timeNow()
	m.SetUID(typesUID(s.newUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	if pol.generation {
		m.SetGeneration(1)
	}
	defaultObject(obj)
	prepareCreate(obj, info, pol)
	if err := s.admit(obj); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	prepareNamespace(obj)
	resp := s.commit(r, info, h, Key{t.Namespace, t.Name}, obj, Added, http.StatusCreated, p.dryRun, HowApply)
	if resp.Changed {
		s.pairCreated(info.Resource, obj)
	}
	return resp
}
