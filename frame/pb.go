package frame

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers, checked against the .proto files of k8s.io/apimachinery
// v0.37.2 (pkg/apis/meta/v1/generated.proto, pkg/runtime/generated.proto)
// and k8s.io/api v0.37.2 (core/v1/generated.proto).
const (
	// metav1.WatchEvent
	fWatchEventType   = 1 // string type
	fWatchEventObject = 2 // runtime.RawExtension object
	// runtime.RawExtension
	fRawExtensionRaw = 1 // bytes raw
	// runtime.Unknown (the envelope after "k8s\x00")
	fUnknownTypeMeta        = 1 // runtime.TypeMeta typeMeta
	fUnknownRaw             = 2 // bytes raw: the object message
	fUnknownContentEncoding = 3
	fUnknownContentType     = 4
	// runtime.TypeMeta
	fTypeMetaAPIVersion = 1
	fTypeMetaKind       = 2
	// Every object message: field 1 is its metadata (ObjectMeta; ListMeta
	// for lists and Status). Lists carry items in field 2.
	fObjectMetadata = 1
	fListItems      = 2
	// metav1.ObjectMeta
	fObjectMetaName              = 1
	fObjectMetaGenerateName      = 2
	fObjectMetaNamespace         = 3
	fObjectMetaSelfLink          = 4
	fObjectMetaUID               = 5
	fObjectMetaResourceVersion   = 6
	fObjectMetaGeneration        = 7
	fObjectMetaCreationTimestamp = 8
	fObjectMetaAnnotations       = 12 // map<string, string>: entries {1 key, 2 value}
	fMapKey                      = 1
	fMapValue                    = 2
	// metav1.ListMeta
	fListMetaSelfLink        = 1
	fListMetaResourceVersion = 2
	fListMetaContinue        = 3
	// metav1.Status
	fStatusMessage = 3
	fStatusReason  = 4
	fStatusCode    = 6
)

// ProtobufMagic starts every protobuf-encoded Kubernetes object
// (k8s.io/apimachinery pkg/runtime/serializer/protobuf: "k8s" + 0x00, then
// a runtime.Unknown envelope).
const ProtobufMagic = "k8s\x00"

// pbField is one field of a protobuf message.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint and fixed values
	b   []byte // bytes value (aliases the message)
	off int    // offset of the tag within the message
}

// eachField calls fn for each field of message b. Groups and fixed-width
// fields are skipped over (fn sees them with b == nil). base is added to
// offsets in errors so that they point into the outermost buffer.
func eachField(b []byte, base int, fn func(f pbField) error) error {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fmt.Errorf("%w: protobuf tag at byte %d: %v", ErrInvalid, base+off, protowire.ParseError(n))
		}
		f := pbField{num: num, typ: typ, off: base + off}
		rest := b[off+n:]
		var m int
		switch typ {
		case protowire.VarintType:
			f.v, m = protowire.ConsumeVarint(rest)
		case protowire.Fixed32Type:
			var v uint32
			v, m = protowire.ConsumeFixed32(rest)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, m = protowire.ConsumeFixed64(rest)
		case protowire.BytesType:
			f.b, m = protowire.ConsumeBytes(rest)
		case protowire.StartGroupType:
			_, m = protowire.ConsumeGroup(num, rest)
		default:
			m = -1
		}
		if m < 0 {
			return fmt.Errorf("%w: protobuf field %d at byte %d: %v", ErrInvalid, num, base+off, protowire.ParseError(m))
		}
		if err := fn(f); err != nil {
			return err
		}
		off += n + m
	}
	return nil
}

// bytesField returns f's bytes or an error if f is not length-delimited.
func bytesField(f pbField, what string) ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, fmt.Errorf("%w: protobuf %s at byte %d: wire type %d, want bytes", ErrInvalid, what, f.off, f.typ)
	}
	return f.b, nil
}

// offsetIn returns the offset of sub within b (sub must alias b).
func offsetIn(b, sub []byte) int {
	if len(sub) == 0 {
		return 0
	}
	return cap(b) - cap(sub)
}

// unknown is a decoded runtime.Unknown envelope.
type unknown struct {
	apiVersion, kind string
	raw              []byte // the object message (aliases the input)
	rawOff           int    // offset of raw in the outermost buffer
	contentEncoding  string
	contentType      string
}

// parseUnknown decodes "k8s\x00" + runtime.Unknown. base is b's offset in
// the outermost buffer.
func parseUnknown(b []byte, base int) (unknown, error) {
	var u unknown
	if len(b) < len(ProtobufMagic) || string(b[:len(ProtobufMagic)]) != ProtobufMagic {
		return u, fmt.Errorf("%w: protobuf object at byte %d lacks the k8s\\x00 envelope", ErrInvalid, base)
	}
	b = b[len(ProtobufMagic):]
	base += len(ProtobufMagic)
	err := eachField(b, base, func(f pbField) error {
		switch f.num {
		case fUnknownTypeMeta:
			tm, err := bytesField(f, "Unknown.typeMeta")
			if err != nil {
				return err
			}
			return eachField(tm, base+offsetIn(b, tm), func(f pbField) error {
				switch f.num {
				case fTypeMetaAPIVersion:
					v, err := bytesField(f, "TypeMeta.apiVersion")
					u.apiVersion = string(v)
					return err
				case fTypeMetaKind:
					v, err := bytesField(f, "TypeMeta.kind")
					u.kind = string(v)
					return err
				}
				return nil
			})
		case fUnknownRaw:
			v, err := bytesField(f, "Unknown.raw")
			u.raw, u.rawOff = v, base+offsetIn(b, v)
			return err
		case fUnknownContentEncoding:
			v, err := bytesField(f, "Unknown.contentEncoding")
			u.contentEncoding = string(v)
			return err
		case fUnknownContentType:
			v, err := bytesField(f, "Unknown.contentType")
			u.contentType = string(v)
			return err
		}
		return nil
	})
	return u, err
}

// protobufRaw reports whether an Unknown's raw bytes are a protobuf message
// (rather than, say, JSON carried in a protobuf envelope).
func (u *unknown) protobufRaw() bool {
	return u.contentEncoding == "" && (u.contentType == "" || u.contentType == "application/vnd.kubernetes.protobuf")
}

// parseWatchEvent decodes a metav1.WatchEvent: its type and the raw bytes
// of its object (RawExtension.raw).
func parseWatchEvent(data []byte) (typ string, raw []byte, rawOff int, err error) {
	haveRaw := false
	err = eachField(data, 0, func(f pbField) error {
		switch f.num {
		case fWatchEventType:
			v, err := bytesField(f, "WatchEvent.type")
			typ = string(v)
			return err
		case fWatchEventObject:
			obj, err := bytesField(f, "WatchEvent.object")
			if err != nil {
				return err
			}
			return eachField(obj, offsetIn(data, obj), func(f pbField) error {
				if f.num != fRawExtensionRaw {
					return nil
				}
				v, err := bytesField(f, "RawExtension.raw")
				raw, rawOff, haveRaw = v, offsetIn(data, v), true
				return err
			})
		}
		return nil
	})
	if err == nil && !haveRaw {
		err = fmt.Errorf("%w: protobuf WatchEvent without object", ErrInvalid)
	}
	return typ, raw, rawOff, err
}

// appendString appends field num as a string, even when empty: the
// apiserver's gogo-protobuf marshalers always write non-pointer strings.
func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendUnknown appends "k8s\x00" + runtime.Unknown{TypeMeta{apiVersion,
// kind}, raw, contentEncoding "", contentType ""} as the apiserver writes it.
func appendUnknown(b []byte, apiVersion, kind string, raw []byte) []byte {
	b = append(b, ProtobufMagic...)
	tm := appendString(nil, fTypeMetaAPIVersion, apiVersion)
	tm = appendString(tm, fTypeMetaKind, kind)
	b = appendBytes(b, fUnknownTypeMeta, tm)
	b = appendBytes(b, fUnknownRaw, raw)
	b = appendString(b, fUnknownContentEncoding, "")
	return appendString(b, fUnknownContentType, "")
}
