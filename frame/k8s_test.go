// Cross-checks with the apiserver's own codecs (k8s.io/apimachinery,
// k8s.io/api, client-go), in tests only.

package frame

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

func mediaType(f Format) string {
	switch f {
	case Protobuf:
		return runtime.ContentTypeProtobuf
	case CBOR:
		return runtime.ContentTypeCBOR
	}
	return runtime.ContentTypeJSON
}

// codecs are client-go's scheme with the meta.k8s.io/v1 kinds (Table,
// PartialObjectMetadata) and the CBOR serializer, as a client that asks
// for Tables, metadata only or CBOR (ClientsAllowCBOR) decodes.
var codecsScheme = runtime.NewScheme()

var codecs = func() serializer.CodecFactory {
	s := codecsScheme
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.WithSerializer(cbor.NewSerializerInfo))
}()

// decodeK8s decodes a whole object (a LIST body) with client-go's scheme.
func decodeK8s(t *testing.T, b []byte) runtime.Object {
	t.Helper()
	obj, _, err := codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("k8s decode: %v", err)
	}
	return obj
}

// decodeItem decodes one list item (JSON text without kind, or a protobuf
// message) into a new object of like's type.
func decodeItem(t *testing.T, f Format, item []byte, like runtime.Object) runtime.Object {
	t.Helper()
	obj := reflect.New(reflect.TypeOf(like).Elem()).Interface().(runtime.Object)
	var err error
	switch f {
	case JSON:
		err = json.Unmarshal(item, obj)
	case CBOR:
		// The serializer, not direct.Unmarshal: it turns CBOR
		// managedFields into the JSON client-go keeps.
		gvk := schema.GroupVersionKind{Version: "v1", Kind: reflect.TypeOf(like).Elem().Name()}
		_, _, err = cbor.NewSerializer(codecsScheme, codecsScheme).Decode(item, &gvk, obj)
	default:
		err = obj.(interface{ Unmarshal([]byte) error }).Unmarshal(item)
	}
	if err != nil {
		t.Fatalf("decode item: %v", err)
	}
	return obj
}

// decodeWatch decodes a watch body the way client-go does: the media
// type's stream serializer and framer, then rest/watch.Decoder.
func decodeWatch(t *testing.T, f Format, body []byte) (types []string, objs []runtime.Object) {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType(f))
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("no stream serializer for %s", mediaType(f))
	}
	fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(body)))
	d := restwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), codecs.UniversalDeserializer())
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			return types, objs
		}
		if err != nil {
			t.Fatalf("client-go watch decode after %d events: %v", len(types), err)
		}
		types = append(types, string(typ))
		objs = append(objs, obj)
	}
}

func withoutTypeMeta(o runtime.Object) runtime.Object {
	o = o.DeepCopyObject()
	if a, err := meta.TypeAccessor(o); err == nil {
		a.SetAPIVersion("")
		a.SetKind("")
	}
	return o
}

// TestK8sListItems: ListItems agrees with the apiserver's codecs on real
// LIST bodies, item by item.
func TestK8sListItems(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "list" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f, body := fx.format(), fx.body(t)
			l, err := ListItems(f, body)
			if err != nil {
				t.Fatalf("ListItems: %v", err)
			}
			want := decodeK8s(t, body)
			lm, err := meta.ListAccessor(want)
			if err != nil {
				t.Fatal(err)
			}
			gvk := want.GetObjectKind().GroupVersionKind()
			if l.APIVersion != gvk.GroupVersion().String() || l.Kind != gvk.Kind || l.ResourceVersion != lm.GetResourceVersion() || l.Continue != lm.GetContinue() {
				t.Errorf("ListItems = %s %s rv %q continue %q; want %s %s rv %q continue %q", l.APIVersion, l.Kind, l.ResourceVersion, l.Continue,
					gvk.GroupVersion(), gvk.Kind, lm.GetResourceVersion(), lm.GetContinue())
			}
			items, err := meta.ExtractList(want)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != len(items) || len(items) == 0 {
				t.Fatalf("%d items; want %d", len(l.Items), len(items))
			}
			kind := strings.TrimSuffix(l.Kind, "List")
			for i, item := range l.Items {
				if got := decodeItem(t, f, item, items[i]); !equality.Semantic.DeepEqual(got, items[i]) {
					t.Errorf("item %d decodes to %v; want %v", i, got, items[i])
				}
				om, err := meta.Accessor(items[i])
				if err != nil {
					t.Fatal(err)
				}
				pm, err := PeekObject(f, l.APIVersion, kind, item)
				want := Meta{APIVersion: l.APIVersion, Kind: kind, Namespace: om.GetNamespace(), Name: om.GetName(), ResourceVersion: om.GetResourceVersion()}
				if err != nil || pm != want {
					t.Errorf("PeekObject(item %d) = %+v, %v; want %+v", i, pm, err, want)
				}
			}
		})
	}
}

// TestK8sListToWatch: events built from LIST items decode with client-go's
// watch decoder to the list's objects, and the rebuilt list decodes too.
func TestK8sListToWatch(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "list" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f, body := fx.format(), fx.body(t)
			l, err := ListItems(f, body)
			if err != nil {
				t.Fatal(err)
			}
			kind := strings.TrimSuffix(l.Kind, "List")
			evs, objs := listToEvents(t, f, l)
			want, _ := meta.ExtractList(decodeK8s(t, body))
			types, got := decodeWatch(t, f, watchBody(f, evs))
			if len(got) != len(want) {
				t.Fatalf("client-go decoded %d events; want %d", len(got), len(want))
			}
			for i := range got {
				if types[i] != "ADDED" || got[i].GetObjectKind().GroupVersionKind().Kind != kind {
					t.Errorf("event %d: %s %v", i, types[i], got[i].GetObjectKind().GroupVersionKind())
				}
				if !equality.Semantic.DeepEqual(withoutTypeMeta(got[i]), withoutTypeMeta(want[i])) {
					t.Errorf("event %d decodes to %v; want %v", i, got[i], want[i])
				}
			}
			backItems, _ := meta.ExtractList(decodeK8s(t, BuildList(f, l.APIVersion, l.Kind, l.ResourceVersion, objs)))
			if len(backItems) != len(want) {
				t.Fatalf("rebuilt list has %d items; want %d", len(backItems), len(want))
			}
			for i := range want {
				if !equality.Semantic.DeepEqual(withoutTypeMeta(backItems[i]), withoutTypeMeta(want[i])) {
					t.Errorf("rebuilt item %d = %v; want %v", i, backItems[i], want[i])
				}
			}
		})
	}
}

// TestK8sBookmark: bookmarks decode with client-go, annotation included.
func TestK8sBookmark(t *testing.T) {
	for _, f := range []Format{JSON, Protobuf, CBOR} {
		for _, end := range []bool{false, true} {
			ev := Bookmark(f, "v1", "ConfigMap", "123", end)
			types, objs := decodeWatch(t, f, watchBody(f, [][]byte{ev}))
			if len(objs) != 1 || types[0] != "BOOKMARK" {
				t.Fatalf("%v: decoded %v", f, types)
			}
			m, err := meta.Accessor(objs[0])
			if err != nil || m.GetResourceVersion() != "123" || (m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true") != end {
				t.Errorf("%v: bookmark decodes to %v", f, objs[0])
			}
		}
	}
}

// TestK8sWatchFixtures: client-go decodes the real watch bodies to as many
// events as the splitter finds, with the same types and names.
func TestK8sWatchFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "watch" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f := fx.format()
			evs := splitAll(t, f, fx.body(t))
			types, objs := decodeWatch(t, f, fx.body(t))
			if len(objs) != len(evs) {
				t.Fatalf("client-go: %d events; splitter: %d", len(objs), len(evs))
			}
			for i, data := range evs {
				m, err := Peek(f, data)
				if err != nil {
					t.Fatal(err)
				}
				if types[i] != m.Type {
					t.Errorf("event %d: Peek type %s; client-go %s", i, m.Type, types[i])
				}
				obj := objs[i]
				if tbl, ok := obj.(*metav1.Table); ok {
					// kubectl get -w: the event is about its row's object.
					if len(tbl.Rows) != 1 || m.Kind != "Table" {
						t.Fatalf("event %d: a Table of %d rows, Peek kind %q", i, len(tbl.Rows), m.Kind)
					}
					if obj, _, err = codecs.UniversalDeserializer().Decode(tbl.Rows[0].Object.Raw, nil, nil); err != nil {
						t.Fatalf("event %d: the row's object: %v", i, err)
					}
				}
				a, err := meta.Accessor(obj)
				if _, status := obj.(*metav1.Status); status {
					continue
				}
				if err != nil {
					t.Fatalf("event %d: %T: %v", i, obj, err)
				}
				if a.GetName() != m.Name || a.GetNamespace() != m.Namespace || a.GetResourceVersion() != m.ResourceVersion {
					t.Errorf("event %d: Peek %s/%s@%s; client-go %s/%s@%s", i, m.Namespace, m.Name, m.ResourceVersion, a.GetNamespace(), a.GetName(), a.GetResourceVersion())
				}
			}
		})
	}
}

func TestK8sBuildListEmpty(t *testing.T) {
	for _, f := range []Format{JSON, Protobuf, CBOR} {
		decodeK8s(t, BuildList(f, "v1", "ConfigMapList", "42", nil))
	}
}
