package world

import (
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// One resource, several versions. kube-apiserver stores some resources
// once and serves them through more than one group or version, converting
// on every read and write: core v1 Events are events.k8s.io/v1 Events
// (pkg/registry/events/rest reuses core's event storage, whose qualified
// resource is core's "events"), and autoscaling/v1 HorizontalPodAutoscalers
// are autoscaling/v2's (stored as autoscaling/v2). An object written
// through one version is listed, watched, got and deleted through the
// other, with one uid, one resourceVersion sequence and one set of
// managedFields (each entry keeps the apiVersion it was written with; a
// write through one group drops the other group's, see versionConvertor).
//
// The store keeps one history per such pair, keyed by the storage's
// resource (storageOf). Its entries hold each version as the session or a
// client showed it, in the version it was shown in (a recorded object
// goes out as recorded to a client of its own version); a read, a watch
// or a write in the other version converts it (convertTo), as the
// apiserver's conversions do (pkg/apis/events/v1/conversion.go,
// pkg/apis/autoscaling/v1/conversion.go). A client's write is stored as
// the apiserver's round trip through its storage version makes it
// (roundTrip), so what the other version reads of it is what it would.

// storedAs maps each resource served from another's storage to that one.
var storedAs = map[Resource]Resource{
	{Group: "events.k8s.io", Version: "v1", Resource: "events"}:                 {Version: "v1", Resource: "events"},
	{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"}: {Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
}

// storageOf returns the resource whose history holds r's objects: r
// itself but for the resources storedAs names.
func storageOf(r Resource) Resource {
	if s, ok := storedAs[r]; ok {
		return s
	}
	return r
}

// sharesStorage reports whether r is served from another resource's
// storage.
func sharesStorage(r Resource) bool {
	_, ok := storedAs[r]
	return ok
}

// storageKind is the group and kind of the objects the storage of r holds,
// as the registry's strategy names them (rest.BeforeDelete's
// preconditions name this kind: "Event" for events.k8s.io's, core's).
func storageKind(info Info) schema.GroupKind {
	return schema.GroupKind{Group: storageOf(info.Resource).Group, Kind: info.Kind}
}

// convertible reports whether objects of kind from convert to kind to,
// another: the two versions of one storage.
func convertible(from, to schema.GroupVersionKind) bool {
	if from == to {
		return false
	}
	_, ok := converters[[2]schema.GroupVersionKind{from, to}]
	return ok
}

// sharedKinds are the kinds of the objects of storages served in more
// than one version.
var sharedKinds = map[string]bool{"Event": true, "HorizontalPodAutoscaler": true}

var (
	coreEventGVK   = corev1.SchemeGroupVersion.WithKind("Event")
	eventsEventGVK = eventsv1.SchemeGroupVersion.WithKind("Event")
	hpaV1GVK       = autoscalingv1.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
	hpaV2GVK       = autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
)

// converters convert a typed object of one version to the other's, by
// (from, to).
var converters = map[[2]schema.GroupVersionKind]func(runtime.Object) (runtime.Object, error){
	{coreEventGVK, eventsEventGVK}: func(o runtime.Object) (runtime.Object, error) {
		return eventToEventsV1(o.(*corev1.Event)), nil
	},
	{eventsEventGVK, coreEventGVK}: func(o runtime.Object) (runtime.Object, error) {
		return eventToCoreV1(o.(*eventsv1.Event)), nil
	},
	{hpaV1GVK, hpaV2GVK}: func(o runtime.Object) (runtime.Object, error) {
		return hpaToV2(o.(*autoscalingv1.HorizontalPodAutoscaler))
	},
	{hpaV2GVK, hpaV1GVK}: func(o runtime.Object) (runtime.Object, error) {
		return hpaToV1(o.(*autoscalingv2.HorizontalPodAutoscaler))
	},
}

// convertObject converts an object (typed, or unstructured) to kind to,
// which must be convertible from its own. The result is typed, its kind
// set.
func convertObject(obj runtime.Object, to schema.GroupVersionKind) (runtime.Object, error) {
	from := obj.GetObjectKind().GroupVersionKind()
	conv, ok := converters[[2]schema.GroupVersionKind{from, to}]
	if !ok {
		return nil, fmt.Errorf("state: no conversion from %s to %s", from, to)
	}
	if u, isU := obj.(runtime.Unstructured); isU {
		typed, err := codec.Scheme().New(from)
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
			return nil, err
		}
		typed.GetObjectKind().SetGroupVersionKind(from)
		obj = typed
	}
	out, err := conv(obj)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(to)
	return out, nil
}

// convertTo returns o as an object of kind to, in o's format: o itself
// when it is of that kind already, or not of the other version of it (a
// metadata-only view, a Status). converted says it was converted.
func convertTo(o codec.Object, to schema.GroupVersionKind) (out codec.Object, converted bool, err error) {
	// Most objects are of no such kind: known without parsing apiVersion.
	if o.Kind != to.Kind || !sharedKinds[o.Kind] || !convertible(o.GVK(), to) {
		return o, false, nil
	}
	obj, err := codec.Decode(o)
	if err != nil {
		return o, false, err
	}
	conv, err := convertObject(obj, to)
	if err != nil {
		return o, false, err
	}
	f := o.Format
	if f != frame.JSON && f != frame.Protobuf && f != frame.CBOR {
		f = frame.JSON
	}
	out, err = codec.Encode(conv, f)
	return out, err == nil, err
}

// servedAs is servedObject for a client of kind gvk: e's object, in format
// f when the session holds it so, converted to gvk when e holds the other
// version of its storage.
func (s *Store) servedAs(e *entry, f frame.Format, gvk schema.GroupVersionKind) (o codec.Object, rewritten bool, err error) {
	if o := e.other; o != nil && o.Kind == gvk.Kind && o.APIVersion == gvk.GroupVersion().String() {
		// The session showed this version as the client's version shows it.
		return s.withServedRV(e, *o)
	}
	o, rewritten, err = s.servedObject(e, f)
	if err != nil {
		return o, rewritten, err
	}
	o, converted, err := convertTo(o, gvk)
	return o, rewritten || converted, err
}

// decodeAs is decodeEntry for a write through kind gvk: the entry's
// object as it is served, in gvk's version.
func (s *Store) decodeAs(e *entry, gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := s.decodeEntry(e)
	if err != nil || !convertible(obj.GetObjectKind().GroupVersionKind(), gvk) {
		return obj, err
	}
	out, err := convertObject(obj, gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// roundTrip returns obj, written through a version other than its
// storage's, as the apiserver stores and serves it back: converted to the
// storage version (defaulted as the storage's decoder defaults it), and
// back. obj itself for every other kind.
func roundTrip(obj runtime.Object, storage schema.GroupVersionKind) (runtime.Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if !convertible(gvk, storage) {
		return obj, nil
	}
	stored, err := convertObject(obj, storage)
	if err != nil {
		return nil, err
	}
	defaultObject(stored)
	return convertObject(stored, gvk)
}

// asStored is roundTrip for a write of a resource of info: obj, written
// through info's version, as its storage's round trip makes it. The
// apiserver decodes a write into its internal version at once, so its
// field manager counts what the round trip adds as the writer's (a v1
// HPA's default CPU target); an error leaves obj as it is (the store
// reports it when it stores obj).
func asStored(info Info, obj runtime.Object) runtime.Object {
	if !sharesStorage(info.Resource) {
		return obj
	}
	st := storageOf(info.Resource)
	out, err := roundTrip(obj, schema.GroupVersionKind{Group: st.Group, Version: st.Version, Kind: info.Kind})
	if err != nil {
		return obj
	}
	return out
}

// versionConvertor is the field manager's object convertor: the scheme's,
// and the conversions between the versions of one storage within a group,
// so that a write through autoscaling/v2 tracks the fields of managers
// that wrote through autoscaling/v1 (each managedFields entry is kept in
// its own version). Between groups it converts nothing, as the
// apiserver's, whose field manager converts through the request group's
// internal version: it reports the other group's version as not
// registered, and the field manager drops that version's entries (a write
// through core's Events forgets the managers that wrote through
// events.k8s.io, and the other way).
type versionConvertor struct{ runtime.ObjectConvertor }

func (c versionConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	from := in.GetObjectKind().GroupVersionKind()
	if to, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{from, otherVersion(from)}); ok && convertible(from, to) {
		if to.Group != from.Group {
			return nil, runtime.NewNotRegisteredErrForTarget("wtrace", reflect.TypeOf(in), gv)
		}
		return convertObject(in, to)
	}
	return c.ObjectConvertor.ConvertToVersion(in, gv)
}

// otherVersion is the kind of the other version of gvk's storage (gvk
// itself for a kind stored once).
func otherVersion(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	for k := range converters {
		if k[0] == gvk {
			return k[1]
		}
	}
	return gvk
}
