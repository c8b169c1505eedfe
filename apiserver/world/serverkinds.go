package world

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The kinds kube-apiserver serves from its other in-process servers (the
// apiextensions server's CustomResourceDefinitions, crd.go; the
// aggregator's APIServices, apiservice.go): where the world's write path
// calls into them.

// crdResource and apiServiceResource are the resources of these kinds.
var (
	crdResource        = Resource{Group: apiextensionsv1.GroupName, Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceResource = Resource{Group: apiregistrationv1.GroupName, Version: "v1", Resource: "apiservices"}
)

// kubeAPIServerManager is the field manager of the writes kube-apiserver's
// own controllers make (its loopback client's User-Agent prefix).
const kubeAPIServerManager = "kube-apiserver"

// defaultServerKind sets the decoder's defaults of these kinds, their
// modules' own defaulting functions (a CRD's conversion strategy None,
// singular and list kind, its stored versions; a service port 443). It
// reports whether obj is one of them.
func defaultServerKind(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(o)
	case *apiregistrationv1.APIService:
		apiregistrationv1.SetObjectDefaults_APIService(o)
	default:
		return false
	}
	return true
}

// createServerKind is what the registries of these kinds do to a new
// object after the field manager: its strategy's PrepareForCreate, then
// its validation (422 Invalid).
func (s *Store) createServerKind(obj runtime.Object) error {
	switch o := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		prepareCRDCreate(o)
		if errs := validateCRD(o); len(errs) > 0 {
			return apierrors.NewInvalid(schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}, o.Name, errs)
		}
	case *apiregistrationv1.APIService:
		prepareAPIServiceCreate(o, s.timeNow())
		if errs := validateAPIService(o); len(errs) > 0 {
			return apierrors.NewInvalid(schema.GroupKind{Group: apiregistrationv1.GroupName, Kind: "APIService"}, o.Name, errs)
		}
	}
	return nil
}

// afterStore runs the in-process controllers that act on an object of r
// just stored (the lock is held): for a CRD, the naming controller, then
// the establishing one, each a write of the status as kube-apiserver's
// (they follow every change at once; a client's next request sees them
// done, as it does against kube-apiserver but for a race of
// milliseconds).
func (s *Store) afterStore(h *history, r Resource, key Key) {
	if r != crdResource {
		return
	}
	others := func() []*apiextensionsv1.CustomResourceDefinition {
		var out []*apiextensionsv1.CustomResourceDefinition
		for k := range h.objs {
			if k == key {
				continue
			}
			if e := s.current(h, k); e != nil {
				if o, err := s.decodeEntry(e); err == nil {
					if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
						out = append(out, crd)
					}
				}
			}
		}
		return out
	}
	s.controllerWrite(h, key, func(obj runtime.Object) bool {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		return ok && crd.DeletionTimestamp == nil && nameCRD(crd, others(), s.timeNow())
	})
	s.controllerWrite(h, key, func(obj runtime.Object) bool {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		return ok && crd.DeletionTimestamp == nil && establishCRD(crd, s.timeNow())
	})
}

// controllerWrite is an UpdateStatus of kube-apiserver's own controllers
// (the lock is held): change edits the object's current version and says
// whether it changed anything; the write goes through the status
// subresource's field manager as kubeAPIServerManager's. A missing
// object, or one that fails to decode, is left alone.
func (s *Store) controllerWrite(h *history, key Key, change func(runtime.Object) bool) {
	e := s.current(h, key)
	if e == nil {
		return
	}
	old, err := s.decodeEntry(e)
	if err != nil {
		return
	}
	obj := old.DeepCopyObject()
	if !change(obj) {
		return
	}
	gvk := h.info.GVK()
	mgr, err := fieldManager(gvk, "status")
	if err != nil {
		return
	}
	obj = mgr.UpdateNoErrors(old, obj, kubeAPIServerManager)
	fixManagedTimes(old, obj, s.timeNow())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion("")
	}
	_, _ = s.store(h, key, throughStorage(obj), Modified)
}

// serverKindResetFields is the GetResetFields of these kinds' strategies:
// what the field manager counts as no one's — the status in a write of
// the object, the spec and metadata in one of its status (a CRD's status
// strategy lets labels and annotations change all the same: it resets
// the new object's metadata to itself). Nil for other kinds.
func serverKindResetFields(gvk schema.GroupVersionKind, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if gvk.GroupVersion() != apiextensionsv1.SchemeGroupVersion && gvk.GroupVersion() != apiregistrationv1.SchemeGroupVersion {
		return nil
	}
	set := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	switch subresource {
	case "":
	case "status":
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec"))
	default:
		return nil
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(set)}
}

// validateServerKindUpdate is the part of these kinds' ValidateUpdate the
// world models (handled false for other kinds): an APIService is validated as
// a new one is (ValidateAPIServiceUpdate); a CRD's group and plural, which
// name it, are immutable, and so are its scope and kind once established
// (validateCustomResourceDefinitionSpecUpdate; its spec's other rules are
// not modelled).
func validateServerKindUpdate(obj, old runtime.Object) (handled bool, err error) {
	switch o := obj.(type) {
	case *apiregistrationv1.APIService:
		if errs := validateAPIService(o); len(errs) > 0 {
			return true, apierrors.NewInvalid(schema.GroupKind{Group: apiregistrationv1.GroupName, Kind: "APIService"}, o.Name, errs)
		}
		return true, nil
	case *apiextensionsv1.CustomResourceDefinition:
		oc, _ := old.(*apiextensionsv1.CustomResourceDefinition)
		if oc == nil {
			return true, nil
		}
		var errs field.ErrorList
		spec := field.NewPath("spec")
		immutable := func(v, ov any, p *field.Path) {
			if v != ov {
				errs = append(errs, field.Invalid(p, v, "field is immutable"))
			}
		}
		if crdEstablished(oc) {
			immutable(string(o.Spec.Scope), string(oc.Spec.Scope), spec.Child("scope"))
			immutable(o.Spec.Names.Kind, oc.Spec.Names.Kind, spec.Child("names", "kind"))
		}
		immutable(o.Spec.Group, oc.Spec.Group, spec.Child("group"))
		immutable(o.Spec.Names.Plural, oc.Spec.Names.Plural, spec.Child("names", "plural"))
		if len(errs) > 0 {
			return true, apierrors.NewInvalid(schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}, o.Name, errs)
		}
		return true, nil
	}
	return false, nil
}
