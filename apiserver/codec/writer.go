package codec

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/frame"
)

// ListMeta is the metadata of a list response.
type ListMeta struct {
	ResourceVersion    string
	Continue           string
	RemainingItemCount *int64
}

// Writer encodes the answers to one request in one Media. The zero
// Writer writes JSON. Not safe for concurrent use: a watch of Tables
// remembers whether its column definitions went out.
type Writer struct {
	Media Media
	Table TableOptions
	// Now is the time Table ages are computed against; nil means
	// time.Now.
	Now func() time.Time

	transcoded  bool
	headersSent bool
}

// NewWriter returns a Writer for m.
func NewWriter(m Media, table TableOptions, now func() time.Time) *Writer {
	return &Writer{Media: m, Table: table, Now: now}
}

// Transcoded reports whether anything the Writer returned so far is not
// the bytes it was given (a format change, a transformation).
func (w *Writer) Transcoded() bool { return w.transcoded }

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// passthrough reports whether o can go out as it is.
func (w *Writer) passthrough(o Object) bool {
	return w.Media.Plain() && !w.Media.YAML && o.Format == w.Media.Format
}

// Object returns the body of a response carrying o.
func (w *Writer) Object(o Object) ([]byte, error) {
	if w.passthrough(o) {
		return Body(o), nil
	}
	w.transcoded = true
	obj, err := Decode(o)
	if err != nil {
		return nil, err
	}
	return w.RuntimeObject(obj)
}

// RuntimeObject returns the body of a response carrying obj (typed or
// unstructured, its kind set), transformed as the Media asks.
func (w *Writer) RuntimeObject(obj runtime.Object) ([]byte, error) {
	out, err := w.transform(obj, false, ListMeta{})
	if err != nil {
		return nil, err
	}
	return w.body(out)
}

// body encodes a whole response body in the Media's format.
func (w *Writer) body(obj runtime.Object) ([]byte, error) {
	if (w.Media.Format == frame.Protobuf || w.Media.Format == frame.CBOR) && !w.Media.YAML {
		o, err := Encode(obj, w.Media.Format)
		if err != nil {
			return nil, err
		}
		return Body(o), nil
	}
	j, err := encodeJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("codec: encoding json: %w", err)
	}
	if w.Media.YAML {
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return nil, fmt.Errorf("codec: encoding yaml: %w", err)
		}
		return y, nil
	}
	return j, nil
}

// transform applies the Media's transformation to obj (one object, or a
// list if list).
func (w *Writer) transform(obj runtime.Object, list bool, lm ListMeta) (runtime.Object, error) {
	if _, ok := obj.(*metav1.Status); ok {
		return obj, nil
	}
	gv := schema.GroupVersion{Group: metav1.GroupName, Version: w.Media.AsVersion}
	switch w.Media.As {
	case "":
		return obj, nil
	case AsPartial:
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		p := partialOf(obj, m)
		p.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartial))
		if gv.Version == "v1beta1" {
			pb := (*metav1beta1.PartialObjectMetadata)(p)
			pb.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartial))
			return pb, nil
		}
		return p, nil
	case AsPartialList:
		var items []metav1.PartialObjectMetadata
		err := meta.EachListItem(obj, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			p := partialOf(o, m)
			p.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartial))
			items = append(items, *p)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if items == nil {
			items = []metav1.PartialObjectMetadata{}
		}
		l := &metav1.PartialObjectMetadataList{Items: items}
		l.ResourceVersion, l.Continue, l.RemainingItemCount = lm.ResourceVersion, lm.Continue, lm.RemainingItemCount
		if gv.Version == "v1beta1" {
			lb := &metav1beta1.PartialObjectMetadataList{Items: make([]metav1.PartialObjectMetadata, len(items))}
			copy(lb.Items, items)
			lb.ListMeta = l.ListMeta
			lb.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartialList))
			return lb, nil
		}
		l.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartialList))
		return l, nil
	case AsTable:
		return w.table(obj, list, lm, gv)
	}
	return nil, fmt.Errorf("codec: unknown transformation %q", w.Media.As)
}

// table converts obj (one object or a list) to a Table.
func (w *Writer) table(obj runtime.Object, list bool, lm ListMeta, gv schema.GroupVersion) (runtime.Object, error) {
	var objs []runtime.Object
	var gk schema.GroupKind
	if list {
		if err := meta.EachListItem(obj, func(o runtime.Object) error {
			objs = append(objs, o)
			return nil
		}); err != nil {
			return nil, err
		}
		gk = obj.GetObjectKind().GroupVersionKind().GroupKind()
		gk.Kind = strings.TrimSuffix(gk.Kind, "List")
	} else {
		objs = []runtime.Object{obj}
		gk = obj.GetObjectKind().GroupVersionKind().GroupKind()
	}
	cols, rows, err := tableRows(gk, objs, w.now())
	if err != nil {
		return nil, err
	}
	for i, o := range objs {
		var inner runtime.Object
		switch w.Table.IncludeObject {
		case string(metav1.IncludeObject):
			inner = o
			if o.GetObjectKind().GroupVersionKind().Kind == "" {
				inner = o.DeepCopyObject()
				inner.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind().GroupVersion().WithKind(gk.Kind))
			}
		case string(metav1.IncludeNone):
		default:
			m, err := meta.Accessor(o)
			if err != nil {
				return nil, err
			}
			p := partialOf(o, m)
			p.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsPartial))
			inner = p
		}
		if inner != nil {
			b, err := encodeJSON(inner)
			if err != nil {
				return nil, err
			}
			rows[i].Object = runtime.RawExtension{Raw: bytes.TrimSuffix(b, []byte("\n"))}
		}
	}
	t := &metav1.Table{Rows: rows}
	if list {
		t.ResourceVersion, t.Continue, t.RemainingItemCount = lm.ResourceVersion, lm.Continue, lm.RemainingItemCount
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		t.ResourceVersion = m.GetResourceVersion()
	}
	if !w.headersSent {
		t.ColumnDefinitions = cols
	}
	if gv.Version == "v1beta1" {
		tb := (*metav1beta1.Table)(t)
		tb.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsTable))
		return tb, nil
	}
	t.GetObjectKind().SetGroupVersionKind(gv.WithKind(AsTable))
	return t, nil
}

// List returns the body of a list response: items of kind apiVersion/kind
// (the list's kind is kind+"List").
func (w *Writer) List(apiVersion, kind string, lm ListMeta, items []Object) ([]byte, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	same := w.Media.Plain() && !w.Media.YAML && Known(gvk) && lm.Continue == "" && lm.RemainingItemCount == nil
	for _, it := range items {
		same = same && it.Format == w.Media.Format
	}
	if same {
		raws := make([][]byte, len(items))
		for i, it := range items {
			raws[i] = it.Raw
			if it.Format == frame.JSON {
				raws[i] = withTypeMeta(it)
			}
		}
		return frame.BuildList(w.Media.Format, apiVersion, kind+"List", lm.ResourceVersion, raws), nil
	}
	w.transcoded = true
	l, err := NewList(apiVersion, kind, lm, items)
	if err != nil {
		return nil, err
	}
	out, err := w.transform(l, true, lm)
	if err != nil {
		return nil, err
	}
	return w.body(out)
}

// NewList decodes items into a list object of kind+"List" (typed for a
// built-in kind, else unstructured).
func NewList(apiVersion, kind string, lm ListMeta, items []Object) (runtime.Object, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	objs := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		o, err := Decode(it)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	listGVK := gvk.GroupVersion().WithKind(kind + "List")
	if Known(listGVK) {
		l, err := Scheme().New(listGVK)
		if err != nil {
			return nil, err
		}
		if err := meta.SetList(l, objs); err != nil {
			return nil, err
		}
		la, err := meta.ListAccessor(l)
		if err != nil {
			return nil, err
		}
		la.SetResourceVersion(lm.ResourceVersion)
		la.SetContinue(lm.Continue)
		la.SetRemainingItemCount(lm.RemainingItemCount)
		l.GetObjectKind().SetGroupVersionKind(listGVK)
		// Items of a typed list carry no kind (encoding/json omits it).
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			return nil
		})
		return l, nil
	}
	ul := &unstructured.UnstructuredList{Object: map[string]any{}}
	ul.SetGroupVersionKind(listGVK)
	ul.SetResourceVersion(lm.ResourceVersion)
	ul.SetContinue(lm.Continue)
	ul.SetRemainingItemCount(lm.RemainingItemCount)
	ul.Items = []unstructured.Unstructured{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("codec: %s is not unstructured", gvk)
		}
		ul.Items = append(ul.Items, *u)
	}
	return ul, nil
}

// Event returns one watch event's exact bytes (without framing: see
// Frame) carrying o, transformed as the Media asks.
func (w *Writer) Event(typ string, o Object) ([]byte, error) {
	if w.passthrough(o) {
		return frame.WatchEvent(o.Format, typ, o.APIVersion, o.Kind, o.Raw), nil
	}
	w.transcoded = true
	obj, err := Decode(o)
	if err != nil {
		return nil, err
	}
	return w.RuntimeEvent(typ, obj)
}

// RuntimeEvent is Event for a decoded object.
func (w *Writer) RuntimeEvent(typ string, obj runtime.Object) ([]byte, error) {
	out := obj
	if w.Media.As != "" {
		var err error
		out, err = w.transform(obj, false, ListMeta{})
		if err != nil {
			// As the apiserver's watch encoder: an object that cannot be
			// transformed goes out as it is.
			out = obj
		}
		if w.Media.As == AsTable && err == nil {
			w.headersSent = true
		}
	}
	f := w.Media.Format
	if _, ok := out.(runtime.Unstructured); ok && f != frame.CBOR {
		if f == frame.Protobuf {
			return nil, fmt.Errorf("%w: %s", ErrUnknownKind, out.GetObjectKind().GroupVersionKind())
		}
		b, err := encodeJSON(out)
		if err != nil {
			return nil, err
		}
		return frame.WatchEvent(frame.JSON, typ, "", "", bytes.TrimSuffix(b, []byte("\n"))), nil
	}
	enc, err := Encode(out, f)
	if err != nil {
		return nil, err
	}
	return frame.WatchEvent(f, typ, enc.APIVersion, enc.Kind, enc.Raw), nil
}

// Frame frames one event for a watch body in the Media's format: JSON
// followed by a newline, protobuf after its 4-byte big-endian length,
// CBOR after the self-described tag (frame.AppendEvent).
func (w *Writer) Frame(ev []byte) []byte {
	return FrameEvent(w.Media.Format, ev)
}

// FrameEvent frames one event in format f (see Writer.Frame).
func FrameEvent(f frame.Format, ev []byte) []byte {
	return frame.AppendEvent(make([]byte, 0, len(ev)+4), f, ev)
}

// StatusMedia is the encoding of an error answered to a request with this
// Accept header: the apiserver negotiates errors without transformations,
// and when no clause fits, writes JSON.
func StatusMedia(accept string) Media {
	if strings.TrimSpace(accept) == "" {
		return JSON
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		if _, ok := c.Params["as"]; ok {
			continue
		}
		if _, ok := c.Params["g"]; ok {
			continue
		}
		if _, ok := c.Params["v"]; ok {
			continue
		}
		for _, s := range serializers {
			if c.Type == s.typ && (c.SubType == s.sub || c.SubType == "*") || c.Type == "*" && c.SubType == "*" {
				m, _ := acceptParams(nil, s.media, s.stream, true)
				return m
			}
		}
	}
	return JSON
}

// StatusBody encodes a Status as a whole body in m (JSON, YAML or
// protobuf).
func StatusBody(m Media, st *metav1.Status) []byte {
	s := st.DeepCopy()
	s.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	w := &Writer{Media: Media{Format: m.Format, YAML: m.YAML}}
	b, err := w.body(s)
	if err != nil {
		b, _ = (&Writer{}).body(s)
	}
	return b
}

// StatusEvent is the ERROR watch event carrying st, in format f.
func StatusEvent(f frame.Format, st *metav1.Status) []byte {
	s := st.DeepCopy()
	s.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	enc, err := Encode(s, f)
	if err != nil {
		enc, _ = Encode(s, frame.JSON)
		f = frame.JSON
	}
	return frame.WatchEvent(f, "ERROR", enc.APIVersion, enc.Kind, enc.Raw)
}

// ListBlueprint is the kubernetes.io/initial-events-list-blueprint
// annotation of a streaming list's initial-events-end bookmark: the empty
// list of the kind (items null) encoded as the watch's events are, in
// base64, as kube-apiserver v1.33 adds it.
func (w *Writer) ListBlueprint(gvk schema.GroupVersionKind) (string, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	var l runtime.Object
	if Known(listGVK) {
		var err error
		if l, err = Scheme().New(listGVK); err != nil {
			return "", err
		}
	} else {
		l = &unstructured.UnstructuredList{Object: map[string]any{}}
	}
	l.GetObjectKind().SetGroupVersionKind(listGVK)
	if w.Media.As == AsPartial {
		gv := schema.GroupVersion{Group: metav1.GroupName, Version: w.Media.AsVersion}
		pl := &metav1.PartialObjectMetadataList{}
		pl.SetGroupVersionKind(gv.WithKind(AsPartialList))
		l = pl
	}
	b, err := (&Writer{Media: Media{Format: w.Media.Format}}).body(l)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Annotations of a streaming list's last bookmark.
const (
	initialEventsEnd = "k8s.io/initial-events-end"
	listBlueprint    = "kubernetes.io/initial-events-list-blueprint"
)

// EndBookmark is the initial-events-end BOOKMARK event (its exact bytes,
// without framing) of a streaming list of kind gvk at resourceVersion rv,
// in format f, as kube-apiserver v1.33 sends it: an object of the kind
// carrying only its resourceVersion and two annotations,
// k8s.io/initial-events-end and kubernetes.io/initial-events-list-blueprint
// (the empty list of the kind, encoded as the events are, in base64).
func EndBookmark(f frame.Format, gvk schema.GroupVersionKind, rv string) ([]byte, error) {
	w := &Writer{Media: Media{Format: f}}
	bp, err := w.ListBlueprint(gvk)
	if err != nil {
		return nil, err
	}
	var obj runtime.Object
	if Known(gvk) {
		if obj, err = Scheme().New(gvk); err != nil {
			return nil, err
		}
	} else {
		obj = &unstructured.Unstructured{Object: map[string]any{}}
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(rv)
	m.SetAnnotations(map[string]string{initialEventsEnd: "true", listBlueprint: bp})
	return w.RuntimeEvent("BOOKMARK", obj)
}
