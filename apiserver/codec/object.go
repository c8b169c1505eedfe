package codec

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/cborscan"
	"github.com/wtrace/wtrace/internal/kscheme"
)

// Scheme returns the scheme that knows every kind of k8s.io/api
// (client-go's scheme) and meta.k8s.io's Table, PartialObjectMetadata and
// PartialObjectMetadataList (v1 and v1beta1), built on first use. It must
// not be modified.
func Scheme() *runtime.Scheme { return kscheme.Scheme() }

// schemeSerializers are Scheme's serializers, built with it.
var schemeSerializers = sync.OnceValue(func() (ss struct {
	json  *json.Serializer
	proto *protobuf.Serializer
	cbor  runtime.Serializer
}) {
	s := Scheme()
	ss.json = json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{})
	ss.proto = protobuf.NewSerializer(s, s)
	ss.cbor = cbor.NewSerializer(s, s)
	return ss
})

// ErrUnknownKind: an object of a kind the Scheme does not know cannot be
// decoded from or encoded to protobuf.
var ErrUnknownKind = errors.New("codec: kind not known to the scheme")

// Object is one Kubernetes object's bytes. Raw is JSON text (an object,
// with or without its kind and apiVersion members), for Protobuf the
// object message inside the runtime.Unknown envelope, for CBOR the
// object's data item (a map, with or without its kind and apiVersion, the
// self-described tag before it or not). An Object does not own Raw
// exclusively: callers must not modify it.
type Object struct {
	Format     frame.Format // frame.JSON, frame.Protobuf or frame.CBOR
	APIVersion string
	Kind       string
	Raw        []byte
}

// GVK returns the object's group, version and kind.
func (o Object) GVK() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
}

// Known reports whether the Scheme knows gvk (a built-in kind).
func Known(gvk schema.GroupVersionKind) bool { return Scheme().Recognizes(gvk) }

// Decode returns o as a typed object for a built-in kind, or as a
// *unstructured.Unstructured for JSON of any other kind. The result owns
// its memory. Errors name the kind.
func Decode(o Object) (runtime.Object, error) {
	gvk := o.GVK()
	switch o.Format {
	case frame.JSON:
		if Known(gvk) {
			into, err := Scheme().New(gvk)
			if err != nil {
				return nil, err
			}
			obj, _, err := schemeSerializers().json.Decode(o.Raw, &gvk, into)
			if err != nil {
				return nil, fmt.Errorf("codec: decoding %s: %w", gvk.Kind, err)
			}
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(withTypeMeta(o)); err != nil {
			return nil, fmt.Errorf("codec: decoding %s: %w", gvk.Kind, err)
		}
		return u, nil
	case frame.Protobuf:
		if !Known(gvk) {
			return nil, fmt.Errorf("%w: %s", ErrUnknownKind, gvk)
		}
		into, err := Scheme().New(gvk)
		if err != nil {
			return nil, err
		}
		um, ok := into.(interface{ Unmarshal([]byte) error })
		if !ok {
			return nil, fmt.Errorf("codec: %s has no protobuf form", gvk.Kind)
		}
		if err := um.Unmarshal(o.Raw); err != nil {
			return nil, fmt.Errorf("codec: decoding %s from protobuf: %w", gvk.Kind, err)
		}
		into.GetObjectKind().SetGroupVersionKind(gvk)
		return into, nil
	case frame.CBOR:
		var into runtime.Object = &unstructured.Unstructured{}
		if Known(gvk) {
			var err error
			if into, err = Scheme().New(gvk); err != nil {
				return nil, err
			}
		}
		raw := o.Raw
		if o.Kind != "" {
			raw = append([]byte(cborscan.SelfDescribed), withTypeMeta(o)...)
		}
		obj, _, err := schemeSerializers().cbor.Decode(raw, &gvk, into)
		if err != nil {
			return nil, fmt.Errorf("codec: decoding %s from cbor: %w", gvk.Kind, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj, nil
	}
	return nil, fmt.Errorf("codec: cannot decode objects in format %v", o.Format)
}

// withTypeMeta returns the object (JSON text, or a CBOR map without the
// self-described tag) with its kind and apiVersion.
func withTypeMeta(o Object) []byte {
	ev := frame.WatchEvent(o.Format, "ADDED", o.APIVersion, o.Kind, o.Raw)
	_, _, obj, err := frame.EventObject(o.Format, ev)
	if err != nil {
		return o.Raw
	}
	return bytes.TrimPrefix(obj, []byte(cborscan.SelfDescribed))
}

// Encode encodes obj, whose kind must be set, in format f (frame.JSON,
// frame.Protobuf or frame.CBOR). JSON is compact, without the newline a
// body ends with; CBOR is apimachinery's (the apiserver's with
// CBORServingAndStorage): self-described, kind and apiVersion first.
func Encode(obj runtime.Object, f frame.Format) (Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		kinds, _, err := Scheme().ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return Object{}, fmt.Errorf("codec: object %T has no kind", obj)
		}
		gvk = kinds[0]
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	o := Object{Format: f, APIVersion: apiVersion, Kind: kind}
	switch f {
	case frame.JSON:
		b, err := encodeJSON(obj)
		if err != nil {
			return Object{}, fmt.Errorf("codec: encoding %s: %w", kind, err)
		}
		o.Raw = bytes.TrimSuffix(b, []byte("\n"))
		return o, nil
	case frame.Protobuf:
		if _, ok := obj.(runtime.Unstructured); ok || !Known(gvk) {
			return Object{}, fmt.Errorf("%w: %s", ErrUnknownKind, gvk)
		}
		var b bytes.Buffer
		if err := schemeSerializers().proto.Encode(obj, &b); err != nil {
			return Object{}, fmt.Errorf("codec: encoding %s as protobuf: %w", kind, err)
		}
		u, err := unwrapProto(b.Bytes())
		if err != nil {
			return Object{}, err
		}
		o.Raw = u.Raw
		return o, nil
	case frame.CBOR:
		var b bytes.Buffer
		if err := schemeSerializers().cbor.Encode(obj, &b); err != nil {
			return Object{}, fmt.Errorf("codec: encoding %s as cbor: %w", kind, err)
		}
		o.Raw = b.Bytes()
		return o, nil
	}
	return Object{}, fmt.Errorf("codec: cannot encode objects in format %v", f)
}

// unwrapProto decodes a protobuf envelope ("k8s\x00" + runtime.Unknown).
func unwrapProto(b []byte) (runtime.Unknown, error) {
	var u runtime.Unknown
	if !bytes.HasPrefix(b, []byte(frame.ProtobufMagic)) {
		return u, fmt.Errorf("codec: protobuf object without the %q prefix", frame.ProtobufMagic)
	}
	if err := u.Unmarshal(b[len(frame.ProtobufMagic):]); err != nil {
		return u, fmt.Errorf("codec: protobuf envelope: %w", err)
	}
	return u, nil
}

// wrapProto puts an object message into its envelope, as the apiserver's
// protobuf serializer does.
func wrapProto(apiVersion, kind string, raw []byte) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b := make([]byte, len(frame.ProtobufMagic)+u.Size())
	copy(b, frame.ProtobufMagic)
	if _, err := u.MarshalToSizedBuffer(b[len(frame.ProtobufMagic):]); err != nil {
		panic(err) // the buffer has u.Size() bytes: cannot fail
	}
	return b
}

// FromBody reads an Object from a whole body in format f (a GET response,
// or a request body): JSON text, a protobuf envelope, or a CBOR map with
// its kind and apiVersion. The Object aliases b.
func FromBody(f frame.Format, b []byte) (Object, error) {
	switch f {
	case frame.Protobuf:
		u, err := unwrapProto(b)
		if err != nil {
			return Object{}, err
		}
		return Object{Format: f, APIVersion: u.APIVersion, Kind: u.Kind, Raw: u.Raw}, nil
	case frame.JSON:
		gvk, err := json.DefaultMetaFactory.Interpret(b)
		if err != nil {
			return Object{}, fmt.Errorf("codec: %w", err)
		}
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		return Object{Format: f, APIVersion: apiVersion, Kind: kind, Raw: bytes.TrimSpace(b)}, nil
	case frame.CBOR:
		o := Object{Format: f, Raw: b}
		err := cborscan.EachMember(bytes.TrimPrefix(b, []byte(cborscan.SelfDescribed)), func(key, val []byte, _ int) bool {
			switch {
			case cborscan.KeyIs(key, "kind"):
				s, _ := cborscan.String(val)
				o.Kind = string(s)
			case cborscan.KeyIs(key, "apiVersion"):
				s, _ := cborscan.String(val)
				o.APIVersion = string(s)
			}
			return true
		})
		if err != nil {
			return Object{}, fmt.Errorf("codec: cbor body: %w", err)
		}
		if o.Kind == "" {
			return Object{}, errors.New("codec: cbor body without a kind")
		}
		return o, nil
	}
	return Object{}, fmt.Errorf("codec: cannot read bodies in format %v", f)
}

// Body returns the bytes a response body holding o alone carries, as the
// apiserver writes them: JSON with kind and apiVersion first and a final
// newline; protobuf in its "k8s\x00" + runtime.Unknown envelope; CBOR
// self-described, with its kind and apiVersion.
func Body(o Object) []byte {
	switch o.Format {
	case frame.Protobuf:
		return wrapProto(o.APIVersion, o.Kind, o.Raw)
	case frame.CBOR:
		return append([]byte(cborscan.SelfDescribed), withTypeMeta(o)...)
	default:
		b := withTypeMeta(o)
		out := make([]byte, 0, len(b)+1)
		return append(append(out, b...), '\n')
	}
}

// DecodeBody decodes a request body (an object to create or update) in
// mediaType (MediaJSON, MediaYAML, MediaProtobuf or MediaCBOR) as an object of kind
// gvk: typed for a built-in kind, unstructured otherwise. A body that
// names another kind, or another group and version, is refused with a 400
// Status worded like the apiserver's.
func DecodeBody(mediaType string, body []byte, gvk schema.GroupVersionKind) (runtime.Object, error) {
	var o Object
	switch mediaType {
	case MediaProtobuf:
		var err error
		if o, err = FromBody(frame.Protobuf, body); err != nil {
			return nil, badRequest(err.Error())
		}
	case MediaCBOR:
		var err error
		if o, err = FromBody(frame.CBOR, body); err != nil {
			return nil, badRequest(err.Error())
		}
	case MediaYAML:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, badRequest(err.Error())
		}
		body = j
		fallthrough
	default:
		var err error
		if o, err = FromBody(frame.JSON, body); err != nil {
			return nil, badRequest(err.Error())
		}
	}
	if o.APIVersion == "" {
		o.APIVersion = gvk.GroupVersion().String()
	}
	if o.Kind == "" {
		o.Kind = gvk.Kind
	}
	got := o.GVK()
	if got.Kind != gvk.Kind && Known(got) {
		from, _ := Scheme().New(got)
		return nil, badRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: converting (%s) to (%s): unknown conversion",
			got.Kind, got.Version, gvk.Kind, strings.TrimPrefix(reflect.TypeOf(from).String(), "*"), strings.TrimPrefix(internalType(gvk, false), "*")))
	}
	if got.GroupVersion() != gvk.GroupVersion() {
		return nil, badRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", o.APIVersion, gvk.GroupVersion()))
	}
	if got.Kind != gvk.Kind {
		return nil, badRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: no kind %q is registered for version %q in scheme \"pkg/api/legacyscheme/scheme.go:30\"",
			got.Kind, got.Version, gvk.Kind, got.Kind, o.APIVersion))
	}
	obj, err := Decode(o)
	if err != nil {
		msg := err.Error()
		if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "codec: decoding") && i > 0 {
			msg = msg[i+2:]
		}
		return nil, badRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", got.Kind, got.Version, gvk.Kind, msg))
	}
	return obj, nil
}

func badRequest(msg string) error {
	return NewStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
}

// encodeJSON encodes obj as the apiserver's JSON serializer does (a final
// newline included): typed objects with their zero creation timestamps
// written as null, unstructured ones with their keys sorted.
func encodeJSON(obj runtime.Object) ([]byte, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		j, err := runtime.Encode(unstructured.UnstructuredJSONScheme, u)
		if err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(j, []byte("\n")) {
			j = append(j, '\n')
		}
		return j, nil
	}
	var b bytes.Buffer
	if err := schemeSerializers().json.Encode(obj, &b); err != nil {
		return nil, err
	}
	return newerFields(obj, nullTimestamps(obj, b.Bytes())), nil
}
