package codec

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/internal/jsonscan"
)

// kube-apiserver v1.33 writes a zero metadata.creationTimestamp as
// "creationTimestamp":null (its ObjectMeta tags the field omitempty, which
// does not omit a struct); the k8s.io/apimachinery this module builds
// with also tags it omitzero and leaves it out. nullTimestamps puts it
// back, so that what the replay encodes reads like what the apiserver
// sends: pod templates' metadata, bookmarks, PartialObjectMetadata.

var objectMetaType = reflect.TypeOf(metav1.ObjectMeta{})

// metaHolders caches, per type, whether values of it can hold an
// ObjectMeta (so that maps of strings and byte slices are not walked).
var metaHolders sync.Map // reflect.Type → bool

func mayHoldMeta(t reflect.Type) bool {
	if v, ok := metaHolders.Load(t); ok {
		return v.(bool)
	}
	metaHolders.Store(t, false) // breaks cycles: recursive types answer false while being computed
	r := computeMayHoldMeta(t, map[reflect.Type]bool{})
	metaHolders.Store(t, r)
	return r
}

func computeMayHoldMeta(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == objectMetaType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return computeMayHoldMeta(t.Elem(), seen)
	case reflect.Map:
		return computeMayHoldMeta(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && computeMayHoldMeta(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// metaPaths collects the JSON paths (member names, array indexes) of the
// ObjectMetas in v whose creationTimestamp is zero.
func metaPaths(v reflect.Value, path []string, out *[][]string) {
	if !v.IsValid() || !mayHoldMeta(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			metaPaths(v.Elem(), path, out)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			metaPaths(v.Index(i), append(path, strconv.Itoa(i)), out)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if k.Kind() == reflect.String {
				metaPaths(v.MapIndex(k), append(path, k.String()), out)
			}
		}
	case reflect.Struct:
		if v.Type() == objectMetaType {
			if m := v.Interface().(metav1.ObjectMeta); m.CreationTimestamp.IsZero() {
				*out = append(*out, append([]string(nil), path...))
			}
			return
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
				metaPaths(v.Field(i), path, out)
				continue
			}
			if name == "" {
				name = f.Name
			}
			metaPaths(v.Field(i), append(path, name), out)
		}
	}
}

// metaFieldsBefore are the ObjectMeta members the apiserver writes before
// creationTimestamp, in order.
var metaFieldsBefore = []string{"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation"}

// nullTimestamps returns j (the JSON of obj, a typed object) with
// "creationTimestamp":null in every ObjectMeta whose timestamp is zero.
func nullTimestamps(obj any, j []byte) []byte {
	v := reflect.ValueOf(obj)
	var paths [][]string
	metaPaths(v, nil, &paths)
	if len(paths) == 0 {
		return j
	}
	type insertion struct {
		at   int
		text string
	}
	var ins []insertion
	for _, p := range paths {
		start, end, ok := locate(j, 0, len(j), p)
		if !ok || j[start] != '{' {
			continue
		}
		obj := j[start:end]
		after, has, empty := -1, false, true
		_ = jsonscan.EachMember(obj, func(key, val []byte, valAt int) bool {
			empty = false
			if jsonscan.KeyIs(key, "creationTimestamp") {
				has = true
				return false
			}
			for _, k := range metaFieldsBefore {
				if jsonscan.KeyIs(key, k) {
					after = valAt + len(val)
				}
			}
			return true
		})
		switch {
		case has:
		case after >= 0:
			ins = append(ins, insertion{start + after, `,"creationTimestamp":null`})
		case empty:
			ins = append(ins, insertion{start + 1, `"creationTimestamp":null`})
		default:
			ins = append(ins, insertion{start + 1, `"creationTimestamp":null,`})
		}
	}
	sort.Slice(ins, func(a, b int) bool { return ins[a].at < ins[b].at })
	out := make([]byte, 0, len(j)+len(ins)*26)
	prev := 0
	for _, in := range ins {
		out = append(out, j[prev:in.at]...)
		out = append(out, in.text...)
		prev = in.at
	}
	return append(out, j[prev:]...)
}

// locate finds the value at path within the JSON value j[start:end] and
// returns its bounds.
func locate(j []byte, start, end int, path []string) (int, int, bool) {
	if len(path) == 0 {
		s := jsonscan.SkipSpace(j, start)
		return s, end, s < end
	}
	val := j[start:end]
	s := jsonscan.SkipSpace(val, 0)
	if s >= len(val) {
		return 0, 0, false
	}
	found, fs, fe := false, 0, 0
	switch val[s] {
	case '{':
		_ = jsonscan.EachMember(val, func(key, v []byte, at int) bool {
			if jsonscan.KeyIs(key, path[0]) {
				found, fs, fe = true, start+at, start+at+len(v)
				return false
			}
			return true
		})
	case '[':
		idx, err := strconv.Atoi(path[0])
		if err != nil {
			return 0, 0, false
		}
		i := 0
		_ = jsonscan.EachElement(val, func(elem []byte, at int) error {
			if i == idx {
				found, fs, fe = true, start+at, start+at+len(elem)
			}
			i++
			return nil
		})
	}
	if !found {
		return 0, 0, false
	}
	return locate(j, fs, fe, path[1:])
}
