package frame

import (
	"bytes"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// List is a LIST response body split into its parts.
type List struct {
	APIVersion      string
	Kind            string // e.g. ConfigMapList
	ResourceVersion string
	Continue        string
	// Items holds each item's exact bytes, aliasing the body: for JSON the
	// item object's text (built-in types' items have no kind/apiVersion);
	// for protobuf the item's object message (no envelope).
	// CBOR the item's map (its data item, tags included).
	Items [][]byte
}

// ListItems splits a LIST response body in format f without decoding the
// items. JSON: {"kind":…,"apiVersion":…,"metadata":{"resourceVersion":…,
// "continue":…},"items":[…]}, members in any order. Protobuf: "k8s\x00" +
// runtime.Unknown{TypeMeta, raw = XList{1 ListMeta{2 resourceVersion,
// 3 continue}, 2 items}}. CBOR: the JSON shape as a self-described map,
// each item a map. Errors wrap ErrInvalid.
func ListItems(f Format, body []byte) (List, error) {
	switch f {
	case JSON:
		return listItemsJSON(body)
	case Protobuf:
		return listItemsProto(body)
	case CBOR:
		return listItemsCBOR(body)
	}
	return List{}, fmt.Errorf("%w: cannot split a %v list", ErrInvalid, f)
}

func listItemsJSON(body []byte) (List, error) {
	var l List
	var err error
	set := func(dst *string, val []byte, at int) {
		if err == nil {
			*dst, err = jsonString(val, at)
		}
	}
	werr := eachMember(body, func(key, val []byte, at int) bool {
		switch {
		case keyIs(key, "kind"):
			set(&l.Kind, val, at)
		case keyIs(key, "apiVersion"):
			set(&l.APIVersion, val, at)
		case keyIs(key, "metadata"):
			if string(val) == "null" {
				break
			}
			merr := eachMember(val, func(key, val []byte, vat int) bool {
				switch {
				case keyIs(key, "resourceVersion"):
					set(&l.ResourceVersion, val, at+vat)
				case keyIs(key, "continue"):
					set(&l.Continue, val, at+vat)
				}
				return err == nil
			})
			if err == nil {
				err = merr
			}
		case keyIs(key, "items"):
			l.Items = l.Items[:0]
			ierr := eachElement(val, func(item []byte, iat int) error {
				if item[0] != '{' {
					return walkErr(at+iat, "list item is not an object")
				}
				l.Items = append(l.Items, item)
				return nil
			})
			if err == nil {
				err = ierr
			}
		}
		return err == nil
	})
	if werr != nil {
		return List{}, werr
	}
	if err != nil {
		return List{}, err
	}
	return l, nil
}

func listItemsProto(body []byte) (List, error) {
	var l List
	u, err := parseUnknown(body, 0)
	if err != nil {
		return List{}, err
	}
	l.APIVersion, l.Kind = u.apiVersion, u.kind
	if !u.protobufRaw() {
		return List{}, fmt.Errorf("%w: protobuf list with content type %q, encoding %q", ErrInvalid, u.contentType, u.contentEncoding)
	}
	err = eachField(u.raw, u.rawOff, func(f pbField) error {
		switch f.num {
		case fObjectMetadata:
			lm, err := bytesField(f, "ListMeta")
			if err != nil {
				return err
			}
			return eachField(lm, u.rawOff+offsetIn(u.raw, lm), func(f pbField) error {
				var err error
				var v []byte
				switch f.num {
				case fListMetaResourceVersion:
					v, err = bytesField(f, "ListMeta.resourceVersion")
					l.ResourceVersion = string(v)
				case fListMetaContinue:
					v, err = bytesField(f, "ListMeta.continue")
					l.Continue = string(v)
				}
				return err
			})
		case fListItems:
			item, err := bytesField(f, "list item")
			if err != nil {
				return err
			}
			l.Items = append(l.Items, item[:len(item):len(item)])
		}
		return nil
	})
	if err != nil {
		return List{}, err
	}
	return l, nil
}

// WatchEvent builds one event's exact bytes from a LIST item (as ListItems
// returns it), the way the apiserver writes a watch event.
//
// JSON: {"type":typ,"object":OBJ} where OBJ is object with "kind" and
// "apiVersion" inserted at its front if it lacks them (built-in types'
// list items do); the rest of object is copied byte for byte. An object
// that is not a well-formed JSON object is copied as is.
//
// Protobuf: WatchEvent{type: typ, object: RawExtension{raw: "k8s\x00" +
// runtime.Unknown{TypeMeta{apiVersion, kind}, raw: object, contentEncoding
// "", contentType ""}}}.
//
// CBOR: {"type": typ, "object": OBJ}, OBJ the object self-described, with
// "kind" and "apiVersion" added before its members when it lacks them;
// like every CBOR event's exact bytes it lacks the self-described tag
// that AppendEvent puts before it on the wire.
//
// For any other format it returns nil.
func WatchEvent(f Format, typ, apiVersion, kind string, object []byte) []byte {
	switch f {
	case JSON:
		b := make([]byte, 0, len(object)+len(typ)+len(apiVersion)+len(kind)+64)
		b = append(b, `{"type":`...)
		b = appendJSONString(b, typ)
		b = append(b, `,"object":`...)
		b = appendWithTypeMeta(b, apiVersion, kind, object)
		return append(b, '}')
	case Protobuf:
		raw := appendUnknown(make([]byte, 0, len(object)+len(apiVersion)+len(kind)+32), apiVersion, kind, object)
		return appendWatchEvent(nil, typ, raw)
	case CBOR:
		obj := appendCBORWithTypeMeta(make([]byte, 0, len(object)+len(apiVersion)+len(kind)+32), apiVersion, kind, object)
		return appendCBOREvent(make([]byte, 0, len(obj)+32), typ, obj)
	}
	return nil
}

// appendWatchEvent appends WatchEvent{type, object: RawExtension{raw}}.
func appendWatchEvent(b []byte, typ string, raw []byte) []byte {
	ext := protowire.AppendTag(nil, fRawExtensionRaw, protowire.BytesType)
	ext = protowire.AppendVarint(ext, uint64(len(raw)))
	b = appendString(b, fWatchEventType, typ)
	b = protowire.AppendTag(b, fWatchEventObject, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(ext)+len(raw)))
	b = append(b, ext...)
	return append(b, raw...)
}

// appendWithTypeMeta appends object, inserting "kind" and "apiVersion"
// after its '{' when absent.
func appendWithTypeMeta(b []byte, apiVersion, kind string, object []byte) []byte {
	hasKind, hasAPIVersion := false, false
	err := eachMember(object, func(key, _ []byte, _ int) bool {
		hasKind = hasKind || keyIs(key, "kind")
		hasAPIVersion = hasAPIVersion || keyIs(key, "apiVersion")
		return true
	})
	if err != nil || (hasKind || kind == "") && (hasAPIVersion || apiVersion == "") {
		return append(b, object...)
	}
	i := skipSpace(object, 0) // object[i] == '{'
	b = append(b, object[:i+1]...)
	if !hasKind && kind != "" {
		b = append(b, `"kind":`...)
		b = appendJSONString(b, kind)
		b = append(b, ',')
	}
	if !hasAPIVersion && apiVersion != "" {
		b = append(b, `"apiVersion":`...)
		b = appendJSONString(b, apiVersion)
		b = append(b, ',')
	}
	rest := object[i+1:]
	if j := skipSpace(rest, 0); j < len(rest) && rest[j] == '}' {
		b = b[:len(b)-1] // empty object: no member follows the inserted ones
	}
	return append(b, rest...)
}

// Bookmark builds a BOOKMARK event like the apiserver's: an object of the
// given kind carrying only metadata.resourceVersion and, if
// initialEventsEnd, the annotation k8s.io/initial-events-end: "true".
//
// JSON: {"type":"BOOKMARK","object":{"kind":K,"apiVersion":V,"metadata":
// {"resourceVersion":RV,"creationTimestamp":null[,"annotations":{…}]}}}.
// Protobuf: the object message holds only field 1, ObjectMeta, with the
// fields gogo-protobuf always writes (empty strings, generation 0, an empty
// creationTimestamp); byte-identical to the apiserver's for kinds whose
// other fields are all optional (ConfigMap, …), and decodable for all.
// CBOR: the JSON shape (without the self-described tag, see WatchEvent).
// For any other format it returns nil.
func Bookmark(f Format, apiVersion, kind, resourceVersion string, initialEventsEnd bool) []byte {
	switch f {
	case JSON:
		b := append([]byte(nil), `{"type":"BOOKMARK","object":{"kind":`...)
		b = appendJSONString(b, kind)
		b = append(b, `,"apiVersion":`...)
		b = appendJSONString(b, apiVersion)
		b = append(b, `,"metadata":{"resourceVersion":`...)
		b = appendJSONString(b, resourceVersion)
		b = append(b, `,"creationTimestamp":null`...)
		if initialEventsEnd {
			b = append(b, `,"annotations":{"`+annInitialEventsEnd+`":"true"}`...)
		}
		return append(b, "}}}"...)
	case Protobuf:
		var om []byte
		for _, n := range []protowire.Number{fObjectMetaName, fObjectMetaGenerateName, fObjectMetaNamespace, fObjectMetaSelfLink, fObjectMetaUID} {
			om = appendString(om, n, "")
		}
		om = appendString(om, fObjectMetaResourceVersion, resourceVersion)
		om = protowire.AppendTag(om, fObjectMetaGeneration, protowire.VarintType)
		om = protowire.AppendVarint(om, 0)
		om = appendBytes(om, fObjectMetaCreationTimestamp, nil)
		if initialEventsEnd {
			e := appendString(nil, fMapKey, annInitialEventsEnd)
			e = appendString(e, fMapValue, "true")
			om = appendBytes(om, fObjectMetaAnnotations, e)
		}
		obj := appendBytes(nil, fObjectMetadata, om)
		return appendWatchEvent(nil, "BOOKMARK", appendUnknown(nil, apiVersion, kind, obj))
	case CBOR:
		return bookmarkCBOR(apiVersion, kind, resourceVersion, initialEventsEnd)
	}
	return nil
}

// BuildList builds a LIST response body from event objects (as
// EventObject returns them), the reverse of ListItems.
//
// JSON: {"kind":listKind,"apiVersion":V,"metadata":{"resourceVersion":RV},
// "items":[…]} and "\n" (the apiserver's encoder ends a body with a
// newline); an object that begins with "kind" equal to listKind
// without its "List" suffix and then "apiVersion" equal to apiVersion has
// those two members removed, as in the apiserver's lists of built-in types;
// everything else is copied byte for byte.
// Protobuf: "k8s\x00" + runtime.Unknown{TypeMeta{apiVersion, listKind},
// raw: XList{1 ListMeta{selfLink "", resourceVersion, continue ""},
// 2 items}}. CBOR: the JSON shape, self-described, each item without its
// self-described tag and without "kind" and "apiVersion" when they are the
// list's item kind and apiVersion. For any other format it returns nil.
func BuildList(f Format, apiVersion, listKind, resourceVersion string, objects [][]byte) []byte {
	switch f {
	case JSON:
		n := 128
		for _, o := range objects {
			n += len(o) + 1
		}
		b := make([]byte, 0, n)
		b = append(b, `{"kind":`...)
		b = appendJSONString(b, listKind)
		b = append(b, `,"apiVersion":`...)
		b = appendJSONString(b, apiVersion)
		b = append(b, `,"metadata":{"resourceVersion":`...)
		b = appendJSONString(b, resourceVersion)
		b = append(b, `},"items":[`...)
		itemKind := strings.TrimSuffix(listKind, "List")
		for i, o := range objects {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, stripTypeMeta(o, apiVersion, itemKind)...)
		}
		return append(b, "]}\n"...)
	case Protobuf:
		lm := appendString(nil, fListMetaSelfLink, "")
		lm = appendString(lm, fListMetaResourceVersion, resourceVersion)
		lm = appendString(lm, fListMetaContinue, "")
		n := len(lm) + 16
		for _, o := range objects {
			n += len(o) + 8
		}
		raw := appendBytes(make([]byte, 0, n), fObjectMetadata, lm)
		for _, o := range objects {
			raw = appendBytes(raw, fListItems, o)
		}
		return appendUnknown(make([]byte, 0, len(raw)+len(apiVersion)+len(listKind)+32), apiVersion, listKind, raw)
	case CBOR:
		return buildListCBOR(apiVersion, listKind, resourceVersion, objects)
	}
	return nil
}

// stripTypeMeta removes a leading `"kind":kind,"apiVersion":apiVersion` pair
// (in that order, as the apiserver writes them) from a JSON object.
func stripTypeMeta(o []byte, apiVersion, kind string) []byte {
	var ends [2]int
	n := 0
	_ = eachMember(o, func(key, val []byte, at int) bool {
		want := [2]struct{ key, val string }{{"kind", kind}, {"apiVersion", apiVersion}}[n]
		s, err := jsonString(val, at)
		if err != nil || !keyIs(key, want.key) || s != want.val {
			return false
		}
		ends[n] = at + len(val)
		n++
		return n < 2
	})
	if n < 2 {
		return o
	}
	i := skipSpace(o, 0) // o[i] == '{'
	j := skipSpace(o, ends[1])
	if j < len(o) && o[j] == ',' {
		j++
	}
	out := make([]byte, 0, len(o)-(j-i-1))
	out = append(out, o[:i+1]...)
	return append(out, bytes.TrimLeft(o[j:], " \t\r\n")...)
}

// EventObject extracts the object from an event's exact bytes: for JSON
// the exact bytes of the "object" member with its "apiVersion" and "kind";
// for protobuf the object message inside the runtime.Unknown envelope
// (WatchEvent.object.raw minus "k8s\x00" and the envelope) with the
// envelope's apiVersion and kind; for CBOR the "object" member's item
// (self-described, as the apiserver writes it). object aliases data.
// Errors wrap ErrInvalid.
func EventObject(f Format, data []byte) (apiVersion, kind string, object []byte, err error) {
	switch f {
	case JSON:
		found := false
		werr := eachMember(data, func(key, val []byte, _ int) bool {
			if keyIs(key, "object") {
				object, found = val, true
			}
			return true
		})
		if werr != nil {
			return "", "", nil, werr
		}
		if !found || len(object) == 0 || object[0] != '{' {
			return "", "", nil, fmt.Errorf("%w: json event without an object", ErrInvalid)
		}
		werr = eachMember(object, func(key, val []byte, at int) bool {
			switch {
			case keyIs(key, "kind"):
				kind, err = jsonString(val, at)
			case keyIs(key, "apiVersion"):
				apiVersion, err = jsonString(val, at)
			}
			return err == nil
		})
		if werr != nil {
			err = werr
		}
		if err != nil {
			return "", "", nil, err
		}
		return apiVersion, kind, object, nil
	case Protobuf:
		_, raw, rawOff, err := parseWatchEvent(data)
		if err != nil {
			return "", "", nil, err
		}
		u, err := parseUnknown(raw, rawOff)
		if err != nil {
			return "", "", nil, err
		}
		return u.apiVersion, u.kind, u.raw[:len(u.raw):len(u.raw)], nil
	case CBOR:
		return eventObjectCBOR(data)
	}
	return "", "", nil, fmt.Errorf("%w: cannot read objects of format %v", ErrInvalid, f)
}
