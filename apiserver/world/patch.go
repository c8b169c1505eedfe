package world

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
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

// patchReq is a PATCH as read before the object it patches: its patch
// type and write parameters, and (once run) what field validation warns
// of.
type patchReq struct {
	pt       string
	p        writeParams
	body     []byte
	sub      string // the subresource patched, "" for the object
	warnings []string
}

// readPatch reads a PATCH of c (of subresource sub): its patch type (JSON
// patch, JSON merge patch, strategic merge patch for built-in kinds,
// server-side apply, which it logs as an apply) and parameters.
func readPatch(c *call, sub string) (*patchReq, error) {
	pt, _, _ := strings.Cut(c.r.Header.Get("Content-Type"), ";")
	pt = strings.ToLower(strings.TrimSpace(pt))
	switch pt {
	case jsonPatch, mergePatch:
	case strategicPatch:
		if !c.pol.builtin {
			return nil, codec.NewStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				"the body of the request was in an unknown format - accepted media types include: "+jsonPatch+", "+mergePatch+", "+applyPatch)
		}
	case applyPatch:
		c.how = HowApply
	default:
		return nil, unsupportedMediaType()
	}
	p, err := parseWriteParams(c.r, "PatchOptions")
	if err != nil {
		return nil, err
	}
	if pt == applyPatch && !p.named {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	if pt != applyPatch && c.r.Query.Get("force") != "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")})
	}
	return &patchReq{pt: pt, p: p, body: c.r.Body, sub: sub}, nil
}

// run applies the patch to base, an object of kind gvk (the apiserver's
// patcher: the patched object, its fields validated).
func (s *Store) run(pr *patchReq, base runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	var (
		obj     runtime.Object
		patched []byte
		shown   string
		err     error
	)
	switch pr.pt {
	case jsonPatch, mergePatch:
		obj, patched, err = applyJSONPatch(pr.pt, pr.body, base, gvk)
		shown = string(patched)
	case strategicPatch:
		obj, patched, shown, err = applyStrategicPatch(pr.body, base, gvk)
	default:
		return s.apply(pr.body, base, gvk, pr.sub, pr.p)
	}
	if err != nil {
		return nil, err
	}
	if pr.warnings, err = checkPatchedFields(pr.p.validation, patched, shown, gvk); err != nil {
		return nil, err
	}
	return obj, nil
}

// patch answers PATCH of an object, or of its subresource sub (status):
// the patched object through the registry's update rules (an apply
// creates the object when there is none).
func (s *Store) patch(c *call, sub string) *Response {
	pr, err := readPatch(c, sub)
	if err != nil {
		return s.fail(c, err)
	}
	return s.withObject(c, func(o held) *Response {
		if o.cur == nil {
			if pr.pt != applyPatch || sub != "" {
				return s.fail(c, apierrors.NewNotFound(c.info.Resource.GroupResource(), c.t.Name))
			}
			return s.applyCreate(c, o.h, pr.p)
		}
		old, err := s.decodeAs(o.cur, c.info.GVK())
		if err != nil {
			return s.fail(c, err)
		}
		obj, err := s.run(pr, old, c.info.GVK())
		if err != nil {
			return s.fail(c, err)
		}
		m, _ := meta.Accessor(obj)
		if m.GetName() != c.t.Name || (c.info.Namespaced && m.GetNamespace() != c.t.Namespace) {
			return s.fail(c, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), c.t.Name)))
		}
		if err := s.checkRV(c.info, policy{unconditionalUpdate: true}, c.t.Name, m.GetResourceVersion(), old); err != nil {
			return s.fail(c, err)
		}
		convertStringData(obj)
		if pr.pt == applyPatch {
			defaultObject(obj)
			obj, err = prepareUpdate(obj, old, c.pol, sub)
		} else {
			obj, err = s.managed(c.info, old, obj, sub, pr.p)
		}
		if err != nil {
			return s.fail(c, err)
		}
		return withWarnings(s.commitUpdate(c, o, old, obj, pr.p), pr.warnings)
	})
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
func (s *Store) applyCreate(c *call, h *history, p writeParams) *Response {
	t, info := c.t, c.info
	live := newObject(info.GVK())
	lm, _ := meta.Accessor(live)
	lm.SetName(t.Name)
	lm.SetNamespace(t.Namespace)
	obj, err := s.apply(c.r.Body, live, info.GVK(), "", p)
	if err != nil {
		return s.fail(c, err)
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != t.Name {
		return s.fail(c, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)))
	}
	if err := checkNamespace(m, t, info); err != nil {
		return s.fail(c, err)
	}
	if err := s.admitNamespace(info, m.GetNamespace(), m.GetName()); err != nil {
		return s.fail(c, err)
	}
	pol := c.pol
	now := s.timeNow()
	m.SetUID(typesUID(s.newUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	if pol.generation {
		m.SetGeneration(1)
	}
	defaultObject(obj)
	s.prepareNew(obj, info, pol)
	if err := s.admit(obj); err != nil {
		return s.fail(c, err)
	}
	prepareNamespace(obj)
	ips, err := s.allocate(obj)
	if err != nil {
		return s.fail(c, err)
	}
	resp := s.commit(c, h, c.key(), obj, Added, http.StatusCreated, p.dryRun)
	if resp.Changed {
		s.created(info.Resource, obj, ips)
	}
	return resp
}
