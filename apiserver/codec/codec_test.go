package codec_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// corpusObject is one object of a corpus session: a watch event's or a
// LIST item's exact bytes.
type corpusObject struct {
	from string
	obj  codec.Object
}

// corpusObjects returns every object the corpus session holds, in its
// recorded format.
func corpusObjects(t testing.TB, scenario string) []corpusObject {
	t.Helper()
	path := wttest.RecordCorpus(t, scenario, false)
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusObject
	idx := f.Index()
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		if x.Response == nil || x.Response.Status != 200 {
			continue
		}
		sc := f.ExchangeRecords(x.Request.Exchange)
		var body []byte
		for {
			rec, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch r := rec.(type) {
			case *formats.Frame:
				ff := frame.Format(x.Response.Events)
				m, err := frame.Peek(ff, r.Data)
				if err != nil || m.Type == "ERROR" || m.Type == "BOOKMARK" {
					continue
				}
				av, kind, raw, err := frame.EventObject(ff, r.Data)
				if err != nil {
					t.Fatalf("%s: %v", x.Request.Target, err)
				}
				out = append(out, corpusObject{x.Request.Target, codec.Object{Format: ff, APIVersion: av, Kind: kind, Raw: raw}})
			case *formats.Body:
				if r.Dir == formats.ServerToClient {
					body = append(body, r.Data...)
				}
			}
		}
		if body == nil || x.Response.Events != frame.Unknown {
			continue
		}
		if x.Response.Encoding == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		ff := frame.JSON
		for _, h := range x.Response.Header {
			if strings.EqualFold(h.Name, "Content-Type") && strings.Contains(h.Value, "protobuf") {
				ff = frame.Protobuf
			}
			if strings.EqualFold(h.Name, "Content-Type") && strings.Contains(h.Value, "cbor") {
				ff = frame.CBOR
			}
		}
		l, err := frame.ListItems(ff, body)
		if err != nil || !strings.HasSuffix(l.Kind, "List") {
			continue
		}
		for _, it := range l.Items {
			out = append(out, corpusObject{x.Request.Target, codec.Object{Format: ff, APIVersion: l.APIVersion,
				Kind: strings.TrimSuffix(l.Kind, "List"), Raw: it}})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects", scenario)
	}
	return out
}

// jsonForm is an object's JSON as the apiserver writes it alone: kind and
// apiVersion first.
func jsonForm(t *testing.T, o codec.Object) []byte {
	return bytes.TrimSuffix(codec.Body(o), []byte("\n"))
}

// TestRoundTripCorpus decodes every object of the corpus captures and
// encodes it again: in its own format it comes back byte for byte (so the
// apiserver's encoding is what the codec writes), and through the other
// format (JSON → protobuf → JSON, protobuf → JSON → protobuf, CBOR → JSON
// → CBOR) too.
func TestRoundTripCorpus(t *testing.T) {
	for _, sc := range []string{"basic-json", "protobuf", "multi-watch", "tls-h2", "gone-410", "cbor-informer"} {
		t.Run(sc, func(t *testing.T) {
			objs := corpusObjects(t, sc)
			for _, c := range objs {
				obj, err := codec.Decode(c.obj)
				if err != nil {
					t.Fatalf("%s: Decode: %v", c.from, err)
				}
				same, err := codec.Encode(obj.DeepCopyObject(), c.obj.Format)
				if err != nil {
					t.Fatalf("%s: Encode: %v", c.from, err)
				}
				other := frame.JSON
				if c.obj.Format == frame.JSON {
					other = frame.Protobuf
				}
				via, err := codec.Encode(obj.DeepCopyObject(), other)
				if err != nil {
					t.Fatalf("%s: Encode(%v): %v", c.from, other, err)
				}
				back, err := codec.Decode(via)
				if err != nil {
					t.Fatalf("%s: Decode(%v): %v", c.from, other, err)
				}
				again, err := codec.Encode(back, c.obj.Format)
				if err != nil {
					t.Fatal(err)
				}
				want := c.obj.Raw
				switch c.obj.Format {
				case frame.JSON:
					want = jsonForm(t, c.obj)
				case frame.CBOR:
					// The apiserver writes a map's keys (Secret data,
					// labels) in Go's map order: the same object, its
					// bytes not twice alike. Compared as JSON.
					asJSON := func(o codec.Object) []byte {
						d, err := codec.Decode(o)
						if err != nil {
							t.Fatalf("%s: Decode: %v", c.from, err)
						}
						j, err := codec.Encode(d, frame.JSON)
						if err != nil {
							t.Fatal(err)
						}
						return j.Raw
					}
					want = asJSON(c.obj)
					same.Raw, again.Raw = asJSON(same), asJSON(again)
				}
				if !bytes.Equal(same.Raw, want) {
					t.Fatalf("%s: %v round trip differs:\n got %s\nwant %s", c.from, c.obj.Format, clip(same.Raw), clip(want))
				}
				if !bytes.Equal(again.Raw, want) {
					t.Fatalf("%s: round trip through %v differs:\n got %s\nwant %s", c.from, other, clip(again.Raw), clip(want))
				}
			}
			t.Logf("%d objects", len(objs))
		})
	}
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		name   string
		accept string
		target codec.Target
		gvk    schema.GroupVersionKind
		want   string // Media.String(), or the error message
		code   int
	}{
		{"empty", "", codec.TargetObject, configMapGVK, "json", 0},
		{"json", "application/json", codec.TargetObject, configMapGVK, "json", 0},
		{"wildcard", "*/*", codec.TargetObject, configMapGVK, "json", 0},
		{"client-go protobuf", "application/vnd.kubernetes.protobuf, */*", codec.TargetList, configMapGVK, "protobuf", 0},
		{"protobuf watch", "application/vnd.kubernetes.protobuf;stream=watch", codec.TargetWatch, configMapGVK, "protobuf", 0},
		{"yaml", "application/yaml", codec.TargetObject, configMapGVK, "yaml", 0},
		{"q order", "application/json;q=0.5, application/vnd.kubernetes.protobuf", codec.TargetObject, configMapGVK, "protobuf", 0},
		{"custom resource protobuf", "application/vnd.kubernetes.protobuf, application/json", codec.TargetObject, widgetGVK, "json", 0},
		{"custom resource protobuf only", "application/vnd.kubernetes.protobuf", codec.TargetObject, widgetGVK,
			"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 406},
		{"kubectl table", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
			codec.TargetWatch, configMapGVK, "json;as=Table", 0},
		{"table protobuf", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", codec.TargetObject, configMapGVK,
			"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 406},
		{"metadata informer list", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			codec.TargetList, configMapGVK, "protobuf;as=PartialObjectMetadataList", 0},
		{"metadata informer watch", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
			codec.TargetWatch, configMapGVK, "protobuf;as=PartialObjectMetadata", 0},
		{"partial for custom resources in protobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
			codec.TargetObject, widgetGVK, "protobuf;as=PartialObjectMetadata", 0},
		{"partial list of one", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", codec.TargetObject, configMapGVK,
			"you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)", 406},
		{"partial of a list", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", codec.TargetList, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			"you requested PartialObjectMetadata, but the requested object is a list (*apps.DeploymentList)", 406},
		{"unknown group", "application/json;as=Table;g=example.com;v=v1", codec.TargetObject, configMapGVK,
			"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 406},
		{"text", "text/plain", codec.TargetObject, configMapGVK,
			"406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf", 406},
		{"yaml watch", "application/yaml", codec.TargetWatch, configMapGVK,
			"only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch", 406},
		{"stream parameter", "application/json;stream=watch", codec.TargetWatch, configMapGVK, "json", 0},
		{"bad stream parameter", "application/json;stream=other, application/yaml", codec.TargetObject, configMapGVK, "yaml", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := codec.Negotiate(tt.accept, tt.target, tt.gvk)
			if tt.code == 0 {
				if err != nil || m.String() != tt.want {
					t.Fatalf("Negotiate(%q) = %v, %v; want %s", tt.accept, m, err, tt.want)
				}
				return
			}
			st := codec.StatusOf(err)
			if err == nil || int(st.Code) != tt.code || st.Message != tt.want || st.Reason != metav1.StatusReasonNotAcceptable {
				t.Fatalf("Negotiate(%q) = %v, %v; want %d %q", tt.accept, m, err, tt.code, tt.want)
			}
		})
	}
}

// TestWriterPassthrough: an object or event in the format asked for goes
// out as recorded, byte for byte, and Transcoded stays false.
func TestWriterPassthrough(t *testing.T) {
	for _, sc := range []string{"basic-json", "protobuf"} {
		objs := corpusObjects(t, sc)
		o := objs[len(objs)-1].obj
		w := codec.NewWriter(codec.Media{Format: o.Format}, codec.TableOptions{}, nil)
		ev, err := w.Event("MODIFIED", o)
		if err != nil {
			t.Fatal(err)
		}
		if want := frame.WatchEvent(o.Format, "MODIFIED", o.APIVersion, o.Kind, o.Raw); !bytes.Equal(ev, want) {
			t.Errorf("%s: Event differs from the recorded bytes", sc)
		}
		b, err := w.Object(o)
		if err != nil || !bytes.Equal(b, codec.Body(o)) {
			t.Errorf("%s: Object = %s, %v", sc, clip(b), err)
		}
		if w.Transcoded() {
			t.Errorf("%s: Transcoded after passthrough", sc)
		}
	}
}

// TestTranscodeEvent serves a recorded protobuf event to a JSON client and
// a recorded JSON event to a protobuf client; each decodes to the same
// object as the recorded bytes.
func TestTranscodeEvent(t *testing.T) {
	for _, sc := range []string{"basic-json", "protobuf"} {
		objs := corpusObjects(t, sc)
		o := objs[len(objs)/2].obj
		to := frame.JSON
		if o.Format == frame.JSON {
			to = frame.Protobuf
		}
		w := codec.NewWriter(codec.Media{Format: to}, codec.TableOptions{}, nil)
		ev, err := w.Event("ADDED", o)
		if err != nil {
			t.Fatal(err)
		}
		if !w.Transcoded() {
			t.Errorf("%s: not marked Transcoded", sc)
		}
		m, err := frame.Peek(to, ev)
		if err != nil || m.Type != "ADDED" || m.Kind != "ConfigMap" {
			t.Fatalf("%s: Peek = %+v, %v", sc, m, err)
		}
		av, kind, raw, err := frame.EventObject(to, ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Decode(codec.Object{Format: to, APIVersion: av, Kind: kind, Raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := codec.Decode(o)
		if !equalJSON(t, got, want) {
			t.Errorf("%s: transcoded event decodes to another object", sc)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(ja, jb)
}

// TestTable: the apiserver's ConfigMap columns, its default columns for a
// kind without a printer, ages against the Writer's clock, and column
// definitions only in the first event of a watch.
func TestTable(t *testing.T) {
	created := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return created.Add(90 * time.Second) }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", ResourceVersion: "7",
		CreationTimestamp: metav1.NewTime(created)}, Data: map[string]string{"x": "1", "y": "2"}}
	cm.SetGroupVersionKind(configMapGVK)
	m, err := codec.Negotiate("application/json;as=Table;v=v1;g=meta.k8s.io", codec.TargetWatch, configMapGVK)
	if err != nil {
		t.Fatal(err)
	}
	w := codec.NewWriter(m, codec.TableOptions{}, now)
	first, err := w.RuntimeEvent("ADDED", cm)
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.RuntimeEvent("MODIFIED", cm)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Object metav1.Table
	}
	if err := json.Unmarshal(first, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Object.ColumnDefinitions) != 3 || ev.Object.ColumnDefinitions[1].Name != "Data" {
		t.Fatalf("columns = %+v", ev.Object.ColumnDefinitions)
	}
	if got := ev.Object.Rows[0].Cells; len(got) != 3 || got[0] != "a" || got[1] != float64(2) || got[2] != "90s" {
		t.Fatalf("cells = %v", got)
	}
	if ev.Object.ResourceVersion != "7" || !bytes.Contains(ev.Object.Rows[0].Object.Raw, []byte(`"kind":"PartialObjectMetadata"`)) {
		t.Fatalf("table = %s", first)
	}
	if !bytes.Contains(second, []byte(`"columnDefinitions":null`)) {
		t.Fatalf("second event has column definitions: %s", second)
	}
	// A kind without a printer: Name and Created At.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetName("w")
	u.SetCreationTimestamp(metav1.NewTime(created))
	m, _ = codec.Negotiate("application/json;as=Table;v=v1;g=meta.k8s.io", codec.TargetObject, widgetGVK)
	b, err := codec.NewWriter(m, codec.TableOptions{IncludeObject: "None"}, now).RuntimeObject(u)
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(b, &tbl); err != nil {
		t.Fatal(err)
	}
	if len(tbl.ColumnDefinitions) != 2 || tbl.ColumnDefinitions[1].Name != "Created At" || tbl.Rows[0].Cells[1] != "2026-11-21T12:00:00Z" || tbl.Rows[0].Object.Raw != nil {
		t.Fatalf("table = %s", b)
	}
}

// TestPartialObjectMetadata: a list and a watch event in metadata-only
// form, protobuf and JSON, decode to the objects' metadata.
func TestPartialObjectMetadata(t *testing.T) {
	objs := corpusObjects(t, "protobuf")
	var items []codec.Object
	for _, c := range objs[:5] {
		items = append(items, c.obj)
	}
	for _, accept := range []string{
		"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
		"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
	} {
		m, err := codec.Negotiate(accept, codec.TargetList, configMapGVK)
		if err != nil {
			t.Fatal(err)
		}
		b, err := codec.NewWriter(m, codec.TableOptions{}, nil).List("v1", "ConfigMap", codec.ListMeta{ResourceVersion: "42"}, items)
		if err != nil {
			t.Fatal(err)
		}
		o, err := codec.FromBody(m.Format, b)
		if err != nil {
			t.Fatal(err)
		}
		l, err := codec.Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		pl, ok := l.(*metav1.PartialObjectMetadataList)
		if !ok || len(pl.Items) != len(items) || pl.ResourceVersion != "42" {
			t.Fatalf("%s: %T %+v", accept, l, l)
		}
		first, _ := codec.Decode(items[0])
		// Protobuf carries no kind in the items (nor does the apiserver's).
		if pl.Items[0].Name != first.(*corev1.ConfigMap).Name || m.Format == frame.JSON && pl.Items[0].Kind != "PartialObjectMetadata" {
			t.Fatalf("%s: item %+v", accept, pl.Items[0])
		}
	}
}

// TestListBlueprint is the annotation the corpus's streaming lists carry.
func TestListBlueprint(t *testing.T) {
	w := codec.NewWriter(codec.JSON, codec.TableOptions{}, nil)
	bp, err := w.ListBlueprint(configMapGVK)
	if err != nil {
		t.Fatal(err)
	}
	// From the initial-events-end bookmark of multi-watch's streaming list.
	if want := "eyJraW5kIjoiQ29uZmlnTWFwTGlzdCIsImFwaVZlcnNpb24iOiJ2MSIsIm1ldGFkYXRhIjp7fSwiaXRlbXMiOm51bGx9Cg=="; bp != want {
		b, _ := base64.StdEncoding.DecodeString(bp)
		t.Fatalf("ListBlueprint = %s (%s)", bp, b)
	}
}

// TestNullTimestamps: an ObjectMeta with a zero creation timestamp is
// written as the v1.33 apiserver writes it.
func TestNullTimestamps(t *testing.T) {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", CreationTimestamp: metav1.NewTime(time.Unix(1, 0))},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}}
	pt.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PodTemplate"})
	o, err := codec.Encode(pt, frame.JSON)
	if err != nil {
		t.Fatal(err)
	}
	want := `"template":{"metadata":{"creationTimestamp":null,"labels":{"a":"b"}},"spec":{"containers":null}}`
	if !bytes.Contains(o.Raw, []byte(want)) {
		t.Fatalf("Encode = %s; want it to contain %s", o.Raw, want)
	}
	empty := &corev1.ConfigMap{}
	empty.SetGroupVersionKind(configMapGVK)
	o, _ = codec.Encode(empty, frame.JSON)
	if string(o.Raw) != `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"creationTimestamp":null}}` {
		t.Fatalf("Encode = %s", o.Raw)
	}
}

// TestStatus: errors are encoded as the client accepts, protobuf included.
func TestStatus(t *testing.T) {
	st := codec.StatusOf(codec.NewStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "gone"))
	for _, accept := range []string{"application/vnd.kubernetes.protobuf, */*", "application/json", "application/json;as=Table;g=meta.k8s.io;v=v1"} {
		m := codec.StatusMedia(accept)
		b := codec.StatusBody(m, st)
		o, err := codec.FromBody(m.Format, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := got.(*metav1.Status); !ok || s.Code != 404 || s.Message != "gone" {
			t.Fatalf("%s: %T %+v", accept, got, got)
		}
	}
}
