package diff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/internal/kscheme"
)

// Protobuf objects are compared as the JSON the apiserver would have sent
// for them: decoded into the typed object of client-go's scheme (every
// built-in kind, and meta.k8s.io's Table and PartialObjectMetadata), then
// encoded with encoding/json as the apiserver's JSON serializer does. This
// is the one place diff transcodes; it needs nothing but these two
// functions, so it can move onto a shared transcoder (apiserver/codec's
// Decode, when it lands) without touching the rest of the package.

// protoMagic starts every protobuf-encoded object
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
const protoMagic = "k8s\x00"

// errUnknownKind: a protobuf object of a kind the scheme does not know.
var errUnknownKind = errors.New("kind not known to client-go's scheme")

// scheme is client-go's scheme with meta.k8s.io's kinds, built on first
// use.
var scheme = kscheme.Scheme

// protoObjectJSON returns the JSON text of a protobuf object message (the
// inside of the runtime.Unknown envelope) of kind apiVersion/kind.
func protoObjectJSON(apiVersion, kind string, raw []byte) ([]byte, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if !scheme().Recognizes(gvk) {
		return nil, fmt.Errorf("%w: %s", errUnknownKind, gvk)
	}
	obj, err := scheme().New(gvk)
	if err != nil {
		return nil, err
	}
	um, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok {
		return nil, fmt.Errorf("%s has no protobuf form", gvk.Kind)
	}
	if err := unmarshalSafely(um, raw); err != nil {
		return nil, fmt.Errorf("decoding %s from protobuf: %w", gvk.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encoding %s as JSON: %w", gvk.Kind, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// unmarshalSafely runs a generated protobuf Unmarshal, turning a panic
// (generated code indexes slices it has bounds-checked, but recorded
// bytes are untrusted) into an error.
func unmarshalSafely(um interface{ Unmarshal([]byte) error }, raw []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed protobuf: %v", r)
		}
	}()
	return um.Unmarshal(raw)
}

// protoBodyJSON returns the JSON text of a protobuf body: "k8s\x00" and a
// runtime.Unknown envelope holding the object.
func protoBodyJSON(body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(protoMagic)) {
		return nil, fmt.Errorf("protobuf body without the %q prefix", protoMagic)
	}
	var u runtime.Unknown
	if err := unmarshalSafely(&u, body[len(protoMagic):]); err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	return protoObjectJSON(u.APIVersion, u.Kind, u.Raw)
}
