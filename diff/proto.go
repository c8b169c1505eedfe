package diff

import (
	"fmt"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// Protobuf objects are compared as the JSON the apiserver would have sent
// for them: decoded and encoded by apiserver/codec, the one owner of how
// an object is encoded for a client (every built-in kind of client-go's
// scheme, and meta.k8s.io's Table and PartialObjectMetadata).

// protoObjectJSON returns the JSON text of a protobuf object message (the
// inside of the runtime.Unknown envelope) of kind apiVersion/kind. A kind
// the scheme does not know is codec.ErrUnknownKind.
func protoObjectJSON(apiVersion, kind string, raw []byte) (j []byte, err error) {
	defer recoverMalformed(&err)
	obj, err := codec.Decode(codec.Object{Format: frame.Protobuf, APIVersion: apiVersion, Kind: kind, Raw: raw})
	if err != nil {
		return nil, err
	}
	o, err := codec.Encode(obj, frame.JSON)
	if err != nil {
		return nil, err
	}
	return o.Raw, nil
}

// protoBodyJSON returns the JSON text of a protobuf body: "k8s\x00" and a
// runtime.Unknown envelope holding the object.
func protoBodyJSON(body []byte) (j []byte, err error) {
	defer recoverMalformed(&err)
	o, err := codec.FromBody(frame.Protobuf, body)
	if err != nil {
		return nil, err
	}
	return protoObjectJSON(o.APIVersion, o.Kind, o.Raw)
}

// recoverMalformed turns a panic of generated protobuf code (it indexes
// slices it has bounds-checked, but recorded bytes are untrusted) into an
// error.
func recoverMalformed(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("malformed protobuf: %v", r)
	}
}
