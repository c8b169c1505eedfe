package diff

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wtrace/wtrace/frame"
)

const watchTarget = cmPath + "?watch=true&resourceVersion=10&timeoutSeconds=30"

// history is a watch's events; base numbers resourceVersions.
func history(base int) [][]byte {
	return [][]byte{
		ev("ADDED", obj{name: "cm-1", ns: "demo", rv: base + 1, data: map[string]string{"a": "1"}}),
		ev("MODIFIED", obj{name: "cm-1", ns: "demo", rv: base + 2, data: map[string]string{"a": "2"}}),
		ev("ADDED", obj{name: "cm-2", ns: "demo", rv: base + 3}),
		ev("DELETED", obj{name: "cm-1", ns: "demo", rv: base + 4, data: map[string]string{"a": "2"}}),
	}
}

func watch(events [][]byte, gaps ...time.Duration) sx {
	return sx{target: watchTarget, events: events, gaps: gaps}
}

func TestStreams(t *testing.T) {
	list := sx{target: cmPath, resp: []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[]}`)}
	h := history(10)
	for _, tc := range []struct {
		name    string
		b       []sx
		opts    Options
		want    string // kinds of the differences, comma-separated
		subject string // of the first group
	}{
		{"same bytes", []sx{list, watch(history(10))}, Options{}, "", ""},
		{"other resourceVersions", []sx{list, watch(history(500))}, Options{}, "", ""},
		{"other resourceVersions compared", []sx{list, watch(history(500))}, Options{CompareRV: true},
			"resourceVersion,resourceVersion,resourceVersion,resourceVersion", "configmaps demo/cm-1"},
		{"missing", []sx{list, watch([][]byte{h[0], h[1], h[3]})}, Options{}, "missing", "configmaps demo/cm-2"},
		{"extra", []sx{list, watch(append(append([][]byte{}, h...), ev("ADDED", obj{name: "cm-3", ns: "demo", rv: 99})))}, Options{}, "extra", "configmaps demo/cm-3"},
		{"reordered", []sx{list, watch([][]byte{h[0], h[2], h[1], h[3]})}, Options{}, "reordered", "configmaps demo/cm-2"},
		{"changed", []sx{list, watch([][]byte{h[0], ev("MODIFIED", obj{name: "cm-1", ns: "demo", rv: 12, data: map[string]string{"a": "3"}}), h[2], h[3]})}, Options{}, "changed", "configmaps demo/cm-1"},
		{"changed and ignored", []sx{list, watch([][]byte{h[0], ev("MODIFIED", obj{name: "cm-1", ns: "demo", rv: 12, data: map[string]string{"a": "3"}}), h[2], h[3]})},
			Options{Ignore: []string{".data.a"}}, "", ""},
		{"late", []sx{list, watch(h, 100*time.Millisecond, 100*time.Millisecond, 250*time.Millisecond)}, Options{}, "timing", "watch configmaps -n demo"},
		{"late within tolerance", []sx{list, watch(h, 100*time.Millisecond, 100*time.Millisecond, 250*time.Millisecond)}, Options{TimeTolerance: 200 * time.Millisecond}, "", ""},
		{"timing left out", []sx{list, watch(h, time.Second, time.Second)}, Options{TimeTolerance: -1}, "", ""},
		{"stream status", []sx{list, {target: watchTarget, status: 404, resp: []byte(`{"kind":"Status"}`)}}, Options{}, "status,missing,missing,missing,missing", "watch configmaps -n demo"},
		{"re-watch", []sx{list, watch(h[:2]), {target: cmPath + "?watch=1&resourceVersion=12", events: h[2:]}}, Options{TimeTolerance: -1}, "", ""},
		{"legacy watch path", []sx{list, {target: "/api/v1/watch/namespaces/demo/configmaps?resourceVersion=10", events: h}}, Options{}, "", ""},
		{"extra stream", []sx{list, watch(h), {target: watchTarget, events: h, at: 1200 * time.Millisecond, conn: 1}}, Options{}, "extra", "watch configmaps -n demo"},
		{"list changed", []sx{{target: cmPath + "?limit=500&resourceVersion=0", resp: []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"99"},"items":[{"metadata":{"name":"x"}}]}`)}, watch(h)},
			Options{}, "changed", "configmaps demo (collection)"},
		{"list status", []sx{{target: cmPath, status: 500, resp: list.resp}, watch(h)}, Options{}, "status", "configmaps demo (collection)"},
		{"list missing", []sx{watch(h)}, Options{}, "missing", "configmaps demo (collection)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := writeSession(t, "a.wt", list, watch(history(10)))
			b := writeSession(t, "b.wt", tc.b...)
			rep := mustDiff(t, a, b, tc.opts)
			var got []string
			for _, d := range all(rep) {
				got = append(got, string(d.Kind))
			}
			if strings.Join(got, ",") != tc.want || rep.Same != (tc.want == "") {
				var buf bytes.Buffer
				rep.WriteText(&buf, TextOptions{})
				t.Fatalf("differences %q (same %v); want %q\n%s", strings.Join(got, ","), rep.Same, tc.want, buf.String())
			}
			if tc.subject != "" && rep.Groups[0].Subject != tc.subject {
				t.Errorf("first subject %q; want %q", rep.Groups[0].Subject, tc.subject)
			}
		})
	}
}

func TestStreamTiming(t *testing.T) {
	h := history(10)
	a := writeSession(t, "a.wt", watch(h))
	// B: the same events at half the pace: offsets 0.05, 0.1, 0.15, 0.2 s
	// against 0.1, 0.2, 0.3, 0.4 s: the last two are more than 100 ms off.
	b := writeSession(t, "b.wt", watch(h, 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond))
	rep := mustDiff(t, a, b, Options{})
	if rep.Summary.Events.Timing != 2 || rep.Summary.Streams.Timing != 1 {
		t.Fatalf("summary %+v; want 2 events in 1 stream beyond the tolerance", rep.Summary)
	}
	d := all(rep)[0]
	if d.Kind != KindTiming || d.Count != 2 || d.Delta != -int64(200*time.Millisecond) || *d.A.Seq != 3 || *d.B.Seq != 3 {
		t.Errorf("difference %+v; want 2 events, the last 200ms early", d)
	}
	if d.Detail != "2 events beyond ±100ms; furthest off: DELETED demo/cm-1, by -200ms" || *d.A.Offset != int64(400*time.Millisecond) || *d.B.Offset != int64(200*time.Millisecond) {
		t.Errorf("detail %q", d.Detail)
	}
}

// TestProtobufAndJSON: the same objects in a protobuf stream and a JSON
// stream are the same after normalization.
func TestProtobufAndJSON(t *testing.T) {
	var pb [][]byte
	for _, e := range history(10) {
		m, _ := frame.Peek(frame.JSON, e)
		_, _, o, err := frame.EventObject(frame.JSON, e)
		if err != nil {
			t.Fatal(err)
		}
		pb = append(pb, frame.WatchEvent(frame.Protobuf, m.Type, "v1", "ConfigMap", protoOf(t, o)))
	}
	a := writeSession(t, "a.wt", watch(history(10)))
	b := writeSession(t, "b.wt", sx{target: watchTarget, events: pb, format: frame.Protobuf})
	rep := mustDiff(t, a, b, Options{})
	if !rep.Same || rep.Summary.Events.Compared != 4 || rep.Summary.Events.BytesOnly != 4 {
		var buf bytes.Buffer
		rep.WriteText(&buf, TextOptions{})
		t.Fatalf("JSON vs protobuf:\n%s", buf.String())
	}
	// One changed value in the protobuf stream shows as a JSON diff.
	var cm corev1.ConfigMap
	if err := jsonUnmarshal(obj{name: "cm-2", ns: "demo", rv: 13, data: map[string]string{"new": "x"}}.json(), &cm); err != nil {
		t.Fatal(err)
	}
	pb[2] = frame.WatchEvent(frame.Protobuf, "ADDED", "v1", "ConfigMap", marshalProto(t, &cm))
	b = writeSession(t, "b.wt", sx{target: watchTarget, events: pb, format: frame.Protobuf})
	rep = mustDiff(t, a, b, Options{})
	ds := all(rep)
	if len(ds) != 1 || ds[0].Kind != KindChanged || !strings.Contains(ds[0].Diff, `+  "data": {`) || !strings.Contains(ds[0].Diff, `+    "new": "x"`) {
		t.Fatalf("differences %+v; want the data of cm-2 added", ds)
	}
}

// protoOf encodes a ConfigMap's JSON as the protobuf object message.
func protoOf(t *testing.T, js []byte) []byte {
	t.Helper()
	var cm corev1.ConfigMap
	if err := jsonUnmarshal(js, &cm); err != nil {
		t.Fatal(err)
	}
	return marshalProto(t, &cm)
}

func marshalProto(t *testing.T, o interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := o.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
