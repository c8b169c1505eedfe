package frame

import (
	"bytes"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wtrace/wtrace/internal/jsonscan"
)

// annInitialEventsEnd marks the bookmark that ends a streaming list
// (k8s.io/apimachinery pkg/apis/meta/v1: InitialEventsAnnotationKey).
const annInitialEventsEnd = "k8s.io/initial-events-end"

// Peek reads Meta from an event's exact bytes (Event.Data) in format f.
//
// JSON and CBOR: the event object's "type", and from "object" its "kind",
// "apiVersion", "metadata" ("name", "namespace", "resourceVersion",
// annotation k8s.io/initial-events-end) and, for a Status, "code", "reason"
// and "message". Fields may come in any order; others are skipped without
// being decoded. CBOR strings may be byte or text strings (Kubernetes
// writes byte strings). Protobuf: WatchEvent.type, then the object's
// runtime.Unknown envelope (TypeMeta) and the object message's field 1
// (ObjectMeta, or for kind Status the Status fields). Status fields are
// kept only for ERROR events.
//
// A Table (the events of kubectl get -w, Accept application/json;as=Table)
// keeps Kind "Table" as sent; its namespace, name and resourceVersion are
// those of its row's object (rows[0].object.metadata, a
// PartialObjectMetadata unless includeObject=Object), when it has exactly
// one row; the Table's own resourceVersion stays when the row's object
// has none. A PartialObjectMetadata (metadata-only informers) is an object
// like any other: Kind "PartialObjectMetadata", its metadata.
//
// Errors wrap ErrInvalid; Peek never panics.
func Peek(f Format, data []byte) (Meta, error) {
	switch f {
	case JSON:
		m, _, err := peekJSON(data)
		return m, err
	case Protobuf:
		return peekProto(data)
	case CBOR:
		return peekCBOR(data)
	}
	return Meta{}, fmt.Errorf("%w: cannot peek format %v", ErrInvalid, f)
}

// PeekEvent reads an event's Meta as Peek does and its object's exact
// bytes as EventObject does, in one walk over a JSON event: for readers
// that keep the objects of many events (the replay's world). Errors wrap
// ErrInvalid, as an event without an object does; PeekEvent never panics.
func PeekEvent(f Format, data []byte) (Meta, []byte, error) {
	if f != JSON {
		m, err := Peek(f, data)
		if err != nil {
			return m, nil, err
		}
		_, _, obj, err := EventObject(f, data)
		return m, obj, err
	}
	m, object, err := peekJSON(data)
	if err != nil {
		return Meta{}, nil, err
	}
	if len(object) == 0 {
		return Meta{}, nil, fmt.Errorf("%w: json event without an object", ErrInvalid)
	}
	return m, object, nil
}

// peekJSON reads a JSON event's Meta (see Peek) and its object's exact
// bytes (nil when "object" is not an object) in one walk with jsonscan:
// the one reader of a JSON event's metadata. The object's members are
// read where the event's walk meets them (the last "object" wins, whole,
// as EventObject's).
func peekJSON(data []byte) (Meta, []byte, error) {
	var m Meta
	var rows rowMeta
	var object []byte
	werr := jsonscan.WalkMembers(data, func(key []byte, vs int) (int, error) {
		switch {
		case keyIs(key, "type"):
			ve, err := jsonscan.SkipValue(data, vs)
			if err != nil {
				return 0, err
			}
			m.Type, err = jsonString(data[vs:ve], vs)
			return ve, err
		case keyIs(key, "object"):
			m, rows, object = Meta{Type: m.Type}, rowMeta{}, nil
			if data[vs] != '{' {
				return jsonscan.SkipValue(data, vs)
			}
			ve, err := walkObjectAt(data, vs, objectMember(data, &m, &rows))
			if err != nil {
				return 0, err
			}
			object = data[vs:ve:ve]
			return ve, nil
		}
		return jsonscan.SkipValue(data, vs)
	})
	if werr != nil {
		return Meta{}, nil, invalid(werr)
	}
	if m.Type != "ERROR" {
		m.Code, m.Reason, m.Message = 0, "", ""
	}
	rows.apply(&m)
	return m, object, nil
}

// PeekObject reads the Meta of one object as a LIST's item or a
// response's body holds it (ListItems' Items, EventObject's object):
// Kind and APIVersion (apiVersion and kind when the object does not name
// them, as a typed LIST's JSON items do not), Namespace, Name and
// ResourceVersion; Type is empty. It reads what Peek reads of the
// object of WatchEvent(f, "ADDED", apiVersion, kind, object), in one walk
// for JSON. Errors wrap ErrInvalid; PeekObject never panics.
func PeekObject(f Format, apiVersion, kind string, object []byte) (Meta, error) {
	if f != JSON {
		m, err := Peek(f, WatchEvent(f, "ADDED", apiVersion, kind, object))
		m.Type = ""
		return m, err
	}
	m := Meta{APIVersion: apiVersion, Kind: kind}
	if err := peekJSONObject(object, &m); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// peekJSONObject reads a JSON object's kind, apiVersion and metadata
// into m, in one walk.
func peekJSONObject(object []byte, m *Meta) error {
	return invalid(jsonscan.WalkMembers(object, objectMember(object, m, nil)))
}

// walkObjectAt walks the JSON object that starts at b[i] with fn (see
// jsonscan.WalkObjectAt) and returns the offset just past it.
func walkObjectAt(b []byte, i int, fn func(key []byte, valAt int) (int, error)) (int, error) {
	end, err := jsonscan.WalkObjectAt(b, i, fn)
	return end, invalid(err)
}

// objectMember reads one member of an object in b into m: its metadata in
// the same pass as the object's. With rows (an event's object) also a
// Status's code, reason and message, and a Table's rows (rowMeta).
func objectMember(b []byte, m *Meta, rows *rowMeta) func(key []byte, vs int) (int, error) {
	return func(key []byte, vs int) (int, error) {
		var dst *string
		switch {
		case keyIs(key, "metadata") && b[vs] == '{':
			return walkObjectAt(b, vs, metaMember(b, m))
		case keyIs(key, "kind"):
			dst = &m.Kind
		case keyIs(key, "apiVersion"):
			dst = &m.APIVersion
		case rows == nil:
		case keyIs(key, "rows") && b[vs] == '[':
			return tableRows(b, vs, rows)
		case keyIs(key, "code"):
			ve, err := jsonscan.SkipValue(b, vs)
			if err == nil {
				if n, perr := strconv.ParseInt(string(b[vs:ve]), 10, 32); perr == nil {
					m.Code = int32(n)
				}
			}
			return ve, err
		case keyIs(key, "reason") && b[vs] == '"':
			dst = &m.Reason
		case keyIs(key, "message") && b[vs] == '"':
			dst = &m.Message
		}
		return readString(b, vs, dst)
	}
}

// metaMember reads one member of an object's metadata in b into m: name,
// namespace, resourceVersion and the initial-events-end annotation.
func metaMember(b []byte, m *Meta) func(key []byte, vs int) (int, error) {
	return func(key []byte, vs int) (int, error) {
		var dst *string
		switch {
		case keyIs(key, "name"):
			dst = &m.Name
		case keyIs(key, "namespace"):
			dst = &m.Namespace
		case keyIs(key, "resourceVersion"):
			dst = &m.ResourceVersion
		case keyIs(key, "annotations") && b[vs] == '{':
			return walkObjectAt(b, vs, func(k []byte, at int) (int, error) {
				ve, err := jsonscan.SkipValue(b, at)
				if err == nil && keyIs(k, annInitialEventsEnd) && b[at] == '"' {
					s, serr := jsonString(b[at:ve], at)
					m.InitialEventsEnd = serr == nil && s == "true"
				}
				return ve, err
			})
		}
		return readString(b, vs, dst)
	}
}

// readString skips the value at b[vs] and, with dst, reads it into *dst
// as a JSON string (an error if it is not one). It returns the value's
// end.
func readString(b []byte, vs int, dst *string) (int, error) {
	ve, err := jsonscan.SkipValue(b, vs)
	if err != nil || dst == nil {
		return ve, err
	}
	*dst, err = jsonString(b[vs:ve], vs)
	return ve, err
}

// tableRows reads a Table's "rows" at b[vs] into rows: their number,
// and the metadata of the first row's "object". It returns the rows' end.
func tableRows(b []byte, vs int, rows *rowMeta) (int, error) {
	ve, err := jsonscan.SkipValue(b, vs)
	if err != nil {
		return 0, err
	}
	err = jsonscan.EachElement(b[vs:ve], func(row []byte, _ int) error {
		if rows.n++; rows.n > 1 || row[0] != '{' {
			return nil
		}
		var om Meta
		err := jsonscan.WalkMembers(row, func(key []byte, at int) (int, error) {
			if !keyIs(key, "object") || row[at] != '{' {
				return jsonscan.SkipValue(row, at)
			}
			return walkObjectAt(row, at, func(key []byte, at int) (int, error) {
				if !keyIs(key, "metadata") || row[at] != '{' {
					return jsonscan.SkipValue(row, at)
				}
				return walkObjectAt(row, at, metaMember(row, &om))
			})
		})
		rows.namespace, rows.name, rows.resourceVersion = om.Namespace, om.Name, om.ResourceVersion
		return err
	})
	return ve, err
}

func peekProto(data []byte) (Meta, error) {
	var m Meta
	typ, raw, rawOff, err := parseWatchEvent(data)
	if err != nil {
		return Meta{}, err
	}
	m.Type = typ
	u, err := parseUnknown(raw, rawOff)
	if err != nil {
		return Meta{}, err
	}
	m.APIVersion, m.Kind = u.apiVersion, u.kind
	if !u.protobufRaw() {
		return m, nil
	}
	obj, base := u.raw, u.rawOff
	if m.Kind == "Status" {
		var code int32
		var reason, message string
		err = eachField(obj, base, func(f pbField) error {
			switch f.num {
			case fStatusMessage:
				v, err := bytesField(f, "Status.message")
				message = string(v)
				return err
			case fStatusReason:
				v, err := bytesField(f, "Status.reason")
				reason = string(v)
				return err
			case fStatusCode:
				code = int32(f.v)
			}
			return nil
		})
		if err != nil {
			return Meta{}, err
		}
		if m.Type == "ERROR" {
			m.Code, m.Reason, m.Message = code, reason, message
		}
		return m, nil
	}
	err = eachField(obj, base, func(f pbField) error {
		if f.num != fObjectMetadata {
			return nil
		}
		om, err := bytesField(f, "ObjectMeta")
		if err != nil {
			return err
		}
		return eachField(om, base+offsetIn(obj, om), func(f pbField) error {
			var err error
			var v []byte
			switch f.num {
			case fObjectMetaName:
				v, err = bytesField(f, "ObjectMeta.name")
				m.Name = string(v)
			case fObjectMetaNamespace:
				v, err = bytesField(f, "ObjectMeta.namespace")
				m.Namespace = string(v)
			case fObjectMetaResourceVersion:
				v, err = bytesField(f, "ObjectMeta.resourceVersion")
				m.ResourceVersion = string(v)
			case fObjectMetaAnnotations:
				var e []byte
				if e, err = bytesField(f, "ObjectMeta.annotations"); err != nil {
					return err
				}
				var key, val []byte
				err = eachField(e, f.off, func(f pbField) error {
					switch f.num {
					case fMapKey:
						key = f.b
					case fMapValue:
						val = f.b
					}
					return nil
				})
				if string(key) == annInitialEventsEnd {
					m.InitialEventsEnd = string(val) == "true"
				}
			}
			return err
		})
	})
	if err != nil {
		return Meta{}, err
	}
	return m, nil
}

// PeekType returns an event's type ("ADDED", …) from its exact bytes, for
// callers that need nothing else (the session index counts events by
// type): JSON's top-level "type" member (a string), protobuf's
// WatchEvent.type (field 1). With Unknown it guesses the format from the
// first byte that is not whitespace ('{' is JSON). ok is false when the
// type cannot be read. It does not allocate unless the JSON type or a
// member name before it holds escapes; typ aliases data otherwise.
func PeekType(f Format, data []byte) (typ []byte, ok bool) {
	switch f {
	case JSON:
		return peekJSONType(data)
	case Protobuf:
		return peekProtoType(data)
	case CBOR:
		return peekCBORType(data)
	case Unknown:
		if i := skipSpace(data, 0); i < len(data) && data[i] == '{' {
			return peekJSONType(data)
		}
		if len(data) > 0 && (data[0]>>5 == 5 || data[0]>>5 == 6) {
			// A CBOR map, or a tag (self-described CBOR); a protobuf
			// WatchEvent begins with 0x0a.
			return peekCBORType(data)
		}
		return peekProtoType(data)
	}
	return nil, false
}

// peekJSONType reads the top-level "type" member of a JSON event. Members
// after it are not looked at.
func peekJSONType(data []byte) (typ []byte, ok bool) {
	err := jsonscan.EachMember(data, func(key, val []byte, _ int) bool {
		if !keyIs(key, "type") {
			return true
		}
		if len(val) < 2 || val[0] != '"' {
			return false
		}
		if bytes.IndexByte(val, '\\') < 0 {
			typ, ok = val[1:len(val)-1], true
			return false
		}
		if s, err := jsonscan.String(val, 0); err == nil {
			typ, ok = []byte(s), true
		}
		return false
	})
	return typ, ok && err == nil
}

// peekProtoType reads field 1 (type, a string) of a metav1.WatchEvent.
func peekProtoType(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == fWatchEventType && wt == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			return v, true
		}
		n = protowire.ConsumeFieldValue(num, wt, b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return nil, false
}
