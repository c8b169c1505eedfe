package frame

import (
	"fmt"
	"strings"

	"github.com/wtrace/wtrace/internal/cborscan"
)

// CBOR lists and events, built and taken apart the way the apiserver
// writes them (k8s.io/apimachinery pkg/runtime/serializer/cbor): a LIST
// body is a self-described map {kind, apiVersion, metadata, items}, the
// items maps without kind and apiVersion (like JSON's); a watch event a
// self-described map {type, object}, its object a self-described map with
// kind and apiVersion. Strings are byte strings.

func listItemsCBOR(body []byte) (List, error) {
	var l List
	var ierr error
	err := cborscan.EachMember(body, func(key, val []byte, at int) bool {
		switch {
		case cborscan.KeyIs(key, "kind"):
			l.Kind = cborString(val)
		case cborscan.KeyIs(key, "apiVersion"):
			l.APIVersion = cborString(val)
		case cborscan.KeyIs(key, "metadata"):
			if isNull(val) {
				break
			}
			ierr = offsetErr(cborscan.EachMember(val, func(key, val []byte, _ int) bool {
				switch {
				case cborscan.KeyIs(key, "resourceVersion"):
					l.ResourceVersion = cborString(val)
				case cborscan.KeyIs(key, "continue"):
					l.Continue = cborString(val)
				}
				return true
			}), at)
		case cborscan.KeyIs(key, "items"):
			l.Items = l.Items[:0]
			ierr = offsetErr(cborscan.EachElement(val, func(item []byte, iat int) error {
				if i, _ := cborscan.Untag(item, 0); i >= len(item) || item[i]>>5 != cborscan.Map {
					return &cborscan.SyntaxError{Offset: iat, Msg: "list item is not a map"}
				}
				l.Items = append(l.Items, item)
				return nil
			}), at)
		}
		return ierr == nil
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return List{}, cborInvalid(err)
	}
	return l, nil
}

// cborObject returns obj without its leading self-described tag, and
// whether it is a map (the head's offset within the result is 0).
func cborUntagged(obj []byte) []byte {
	for len(obj) >= len(cborscan.SelfDescribed) && string(obj[:len(cborscan.SelfDescribed)]) == cborscan.SelfDescribed {
		obj = obj[len(cborscan.SelfDescribed):]
	}
	return obj
}

// appendCBORWithTypeMeta appends object (a map, as ListItems returns
// items) self-described, with "kind" and "apiVersion" added before its
// members when it lacks them. An object that is not a well-formed map is
// appended as is.
func appendCBORWithTypeMeta(b []byte, apiVersion, kind string, object []byte) []byte {
	o := cborUntagged(object)
	hasKind, hasAPIVersion, n := false, false, 0
	if cborscan.EachMember(o, func(key, _ []byte, _ int) bool {
		hasKind = hasKind || cborscan.KeyIs(key, "kind")
		hasAPIVersion = hasAPIVersion || cborscan.KeyIs(key, "apiVersion")
		n++
		return true
	}) != nil {
		return append(b, object...)
	}
	b = append(b, cborscan.SelfDescribed...)
	i, _ := cborscan.Untag(o, 0) // other tags stay before the map
	b = append(b, o[:i]...)
	h, _ := cborscan.ParseHead(o[i:], i) // a map: EachMember checked it
	var add [][2]string
	if !hasKind && kind != "" {
		add = append(add, [2]string{"kind", kind})
	}
	if !hasAPIVersion && apiVersion != "" {
		add = append(add, [2]string{"apiVersion", apiVersion})
	}
	if h.Indef() {
		b = append(b, o[i])
	} else {
		b = cborscan.AppendHead(b, cborscan.Map, uint64(n+len(add)))
	}
	for _, kv := range add {
		b = cborscan.AppendString(b, kv[0])
		b = cborscan.AppendString(b, kv[1])
	}
	return append(b, o[i+h.Len:]...)
}

// appendCBOREvent appends a watch event's exact bytes (without the
// self-described tag, which is its Pre): {type, object}.
func appendCBOREvent(b []byte, typ string, objectWithTag []byte) []byte {
	b = cborscan.AppendHead(b, cborscan.Map, 2)
	b = cborscan.AppendString(b, "type")
	b = cborscan.AppendString(b, typ)
	b = cborscan.AppendString(b, "object")
	return append(b, objectWithTag...)
}

func bookmarkCBOR(apiVersion, kind, resourceVersion string, initialEventsEnd bool) []byte {
	md := cborscan.AppendHead(nil, cborscan.Map, uint64(2+boolInt(initialEventsEnd)))
	md = cborscan.AppendString(md, "resourceVersion")
	md = cborscan.AppendString(md, resourceVersion)
	md = cborscan.AppendString(md, "creationTimestamp")
	md = append(md, 0xf6) // null
	if initialEventsEnd {
		md = cborscan.AppendString(md, "annotations")
		md = cborscan.AppendHead(md, cborscan.Map, 1)
		md = cborscan.AppendString(md, annInitialEventsEnd)
		md = cborscan.AppendString(md, "true")
	}
	obj := append([]byte(cborscan.SelfDescribed), cborscan.AppendHead(nil, cborscan.Map, 3)...)
	obj = cborscan.AppendString(obj, "kind")
	obj = cborscan.AppendString(obj, kind)
	obj = cborscan.AppendString(obj, "apiVersion")
	obj = cborscan.AppendString(obj, apiVersion)
	obj = cborscan.AppendString(obj, "metadata")
	obj = append(obj, md...)
	return appendCBOREvent(nil, "BOOKMARK", obj)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func buildListCBOR(apiVersion, listKind, resourceVersion string, objects [][]byte) []byte {
	n := 128
	for _, o := range objects {
		n += len(o)
	}
	b := append(make([]byte, 0, n), cborscan.SelfDescribed...)
	b = cborscan.AppendHead(b, cborscan.Map, 4)
	b = cborscan.AppendString(b, "kind")
	b = cborscan.AppendString(b, listKind)
	b = cborscan.AppendString(b, "apiVersion")
	b = cborscan.AppendString(b, apiVersion)
	b = cborscan.AppendString(b, "metadata")
	b = cborscan.AppendHead(b, cborscan.Map, 1)
	b = cborscan.AppendString(b, "resourceVersion")
	b = cborscan.AppendString(b, resourceVersion)
	b = cborscan.AppendString(b, "items")
	b = cborscan.AppendHead(b, cborscan.Array, uint64(len(objects)))
	itemKind := strings.TrimSuffix(listKind, "List")
	for _, o := range objects {
		b = appendCBORWithoutTypeMeta(b, apiVersion, itemKind, o)
	}
	return b
}

// appendCBORWithoutTypeMeta appends object (an event's object) as a list
// item: without its self-described tag, and without "kind" and
// "apiVersion" when they are itemKind and apiVersion. An object that is
// not a well-formed map is appended without its tag, as is.
func appendCBORWithoutTypeMeta(b []byte, apiVersion, kind string, object []byte) []byte {
	o := cborUntagged(object)
	var keep [][2]int
	drop := 0
	if cborscan.EachMember(o, func(key, val []byte, at int) bool {
		if cborscan.KeyIs(key, "kind") && cborString(val) == kind || cborscan.KeyIs(key, "apiVersion") && cborString(val) == apiVersion {
			drop++
			return true
		}
		keep = append(keep, [2]int{at - len(key), at + len(val)})
		return true
	}) != nil || drop == 0 {
		return append(b, o...)
	}
	i, _ := cborscan.Untag(o, 0)
	b = append(b, o[:i]...)
	h, _ := cborscan.ParseHead(o[i:], i)
	if h.Indef() {
		b = append(b, o[i])
	} else {
		b = cborscan.AppendHead(b, cborscan.Map, h.Arg-uint64(drop))
	}
	for _, k := range keep {
		b = append(b, o[k[0]:k[1]]...)
	}
	if h.Indef() {
		b = append(b, 0xff)
	}
	return b
}

func eventObjectCBOR(data []byte) (apiVersion, kind string, object []byte, err error) {
	found := false
	if err := cborscan.EachMember(data, func(key, val []byte, _ int) bool {
		if cborscan.KeyIs(key, "object") {
			object, found = val, true
		}
		return true
	}); err != nil {
		return "", "", nil, cborInvalid(err)
	}
	if i, _ := cborscan.Untag(object, 0); !found || i >= len(object) || object[i]>>5 != cborscan.Map {
		return "", "", nil, fmt.Errorf("%w: cbor event without an object", ErrInvalid)
	}
	if err := cborscan.EachMember(object, func(key, val []byte, _ int) bool {
		switch {
		case cborscan.KeyIs(key, "kind"):
			kind = cborString(val)
		case cborscan.KeyIs(key, "apiVersion"):
			apiVersion = cborString(val)
		}
		return true
	}); err != nil {
		return "", "", nil, cborInvalid(err)
	}
	return apiVersion, kind, object, nil
}

// AppendEvent appends one event's exact bytes (as Event.Data holds them)
// framed as its stream carries them, so that a body built of such events
// is one the apiserver could have sent: JSON, the event then "\n";
// protobuf, the 4-byte big-endian length then the event; CBOR, the
// self-described tag then the event.
func AppendEvent(b []byte, f Format, data []byte) []byte {
	switch f {
	case Protobuf:
		n := uint32(len(data))
		b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		return append(b, data...)
	case CBOR:
		return append(append(b, cborscan.SelfDescribed...), data...)
	}
	return append(append(b, data...), '\n')
}
