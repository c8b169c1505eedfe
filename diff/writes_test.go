package diff

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/frame"
	"k8s.io/apimachinery/pkg/runtime"
)

// controllerRun is the writes a controller makes, as hand-built
// sessions: it creates cm-1, then updates it with an annotation, then
// patches cm-0's labels. Each run numbers resourceVersions, uids and
// timestamps its own way (base).
func controllerRun(base int, annotation string, extra ...sx) []sx {
	cm1 := obj{name: "cm-1", ns: "demo", rv: base + 1, data: map[string]string{"k": "v"}}
	create := cm1
	create.rv = 0
	upd := cm1
	upd.annotations = map[string]string{"example.com/checked": annotation}
	exs := []sx{
		{method: "POST", target: cmPath + "?fieldManager=ctrl", ctype: "application/json", body: createBody("cm-1"), status: 201, resp: cm1.json()},
		{method: "PUT", target: cmPath + "/cm-1?fieldManager=ctrl", ctype: "application/json", body: upd.json(), resp: upd.json()},
		{method: "PATCH", target: cmPath + "/cm-0?fieldManager=ctrl", ctype: "application/merge-patch+json",
			body: []byte(`{"metadata":{"labels":{"seen":"true"}}}`)},
	}
	return append(exs, extra...)
}

// createBody is a typed client's create body: no resourceVersion, a null
// creationTimestamp.
func createBody(name string) []byte {
	return []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"demo","creationTimestamp":null},"data":{"k":"v"}}`)
}

func TestWritesSame(t *testing.T) {
	a := writeSession(t, "a.wt", controllerRun(100, "yes")...)
	b := writeSession(t, "b.wt", controllerRun(5000, "yes")...)
	rep := mustDiff(t, a, b, Options{})
	if !rep.Same || len(all(rep)) != 0 {
		t.Fatalf("same writes, other resourceVersions, uids and timestamps: Same = %v, differences %+v", rep.Same, all(rep))
	}
	if w := rep.Summary.Writes; w.Compared != 3 || w.BytesOnly != 1 {
		t.Errorf("writes = %+v; want 3 compared, 1 differing only in ignored fields (the PUT)", w)
	}
}

// TestWriteChangedAnnotation: one write with another annotation value is
// exactly one write difference, shown as a unified diff of that body —
// and the object's end state, the answer to that write, differs in that
// annotation: the same finding seen at its two levels, in one group.
func TestWriteChangedAnnotation(t *testing.T) {
	a := writeSession(t, "a.wt", controllerRun(100, "yes")...)
	b := writeSession(t, "b.wt", controllerRun(5000, "no")...)
	rep := mustDiff(t, a, b, Options{})
	ds := all(rep)
	if rep.Same || len(ds) != 2 || len(rep.Groups) != 1 || ds[0].Category != CategoryState || ds[0].Kind != KindChanged ||
		!strings.Contains(ds[0].Diff, "-      \"example.com/checked\": \"yes\"\n+      \"example.com/checked\": \"no\"\n") {
		t.Fatalf("differences = %+v; want the end state of cm-1 changed, then its PUT", ds)
	}
	if s := rep.Summary.State; s.Compared != 2 || s.Changed != 1 || s.Differences() != 1 {
		t.Errorf("state = %+v; want 2 objects compared, 1 changed", s)
	}
	d := ds[1]
	if d.Category != CategoryWrite || d.Kind != KindChanged || d.What != "PUT" || d.A.Exchange != 1 || d.B.Exchange != 1 {
		t.Errorf("difference = %+v; want the PUT of exchange 1 changed", d)
	}
	if g := rep.Groups[0]; g.Subject != "configmaps demo/cm-1" || g.Object == nil || g.Object.Name != "cm-1" {
		t.Errorf("group = %q %+v; want configmaps demo/cm-1", g.Subject, g.Object)
	}
	want := `--- a.wt exchange 1
+++ b.wt exchange 1
@@ -7,7 +7,7 @@
   "kind": "ConfigMap",
   "metadata": {
     "annotations": {
-      "example.com/checked": "yes"
+      "example.com/checked": "no"
     },
     "creationTimestamp": "<timestamp>",
     "name": "cm-1",
`
	// The header names the files by their paths; compare from the hunks on.
	got := d.Diff
	if i := strings.Index(got, "@@"); i >= 0 {
		got = "--- a.wt exchange 1\n+++ b.wt exchange 1\n" + got[i:]
	}
	if got != want {
		t.Errorf("diff =\n%s\nwant\n%s", got, want)
	}
	if rep.Summary.Writes.Changed != 1 || rep.Summary.Writes.Compared != 3 {
		t.Errorf("writes = %+v; want 3 compared, 1 changed", rep.Summary.Writes)
	}
}

// TestWriteExtraCreate: one more create in B is reported as extra, under
// the object its body names: an object created in B only (end state),
// by that POST (writes).
func TestWriteExtraCreate(t *testing.T) {
	a := writeSession(t, "a.wt", controllerRun(100, "yes")...)
	b := writeSession(t, "b.wt", controllerRun(5000, "yes",
		sx{method: "POST", target: cmPath, ctype: "application/json", body: createBody("cm-2"), status: 201})...)
	rep := mustDiff(t, a, b, Options{})
	ds := all(rep)
	if len(ds) != 2 || len(rep.Groups) != 1 {
		t.Fatalf("differences = %+v; want exactly two, of one object", ds)
	}
	if d := ds[0]; d.Kind != KindExtra || d.Category != CategoryState || d.What != "created" || d.B == nil || d.B.Exchange != 3 || d.A != nil {
		t.Errorf("difference = %+v; want cm-2 created in b only", d)
	}
	if d := ds[1]; d.Kind != KindExtra || d.Category != CategoryWrite || d.What != "POST" || d.B == nil || d.B.Exchange != 3 || d.A != nil {
		t.Errorf("difference = %+v; want the POST of exchange 3 extra", d)
	}
	if g := rep.Groups[0]; g.Subject != "configmaps demo/cm-2" {
		t.Errorf("subject = %q; want configmaps demo/cm-2", g.Subject)
	}
	if w := rep.Summary.Writes; w.Extra != 1 || w.Compared != 3 || w.Differences() != 1 {
		t.Errorf("writes = %+v", w)
	}
	// And the other way round, it is missing.
	rep = mustDiff(t, b, a, Options{})
	if ds := all(rep); len(ds) != 2 || ds[1].Kind != KindMissing || ds[1].A.Exchange != 3 || ds[0].Kind != KindMissing {
		t.Errorf("B vs A: differences = %+v; want cm-2 and its POST missing", ds)
	}
}

func TestWritesOther(t *testing.T) {
	base := func(b int) []sx { return controllerRun(b, "yes") }
	for _, tc := range []struct {
		name string
		a, b []sx
		opts Options
		want []Kind // the differences, in order
	}{
		// A write answered 409 (or 403, 404, …) is a failed attempt: B did
		// not update cm-1, which ends as it was created.
		{"conflict", base(1), func() []sx {
			x := base(2)
			x[1].status = 409
			return x
		}(), Options{}, []Kind{KindChanged, KindMissing}},
		{"status", base(1), func() []sx {
			x := base(2)
			x[1].status = 201
			return x
		}(), Options{}, []Kind{KindStatus}},
		{"reordered", base(1), func() []sx {
			x := base(2)
			x = append(x, sx{method: "DELETE", target: cmPath + "/cm-1"})
			x[1], x[3] = x[3], x[1] // DELETE before PUT
			return x
		}(), Options{}, []Kind{KindExtra}}, // PUT then DELETE in A? A has no DELETE: extra
		{"reordered verbs", append(base(1), sx{method: "DELETE", target: cmPath + "/cm-1"}), func() []sx {
			x := append(base(2), sx{method: "DELETE", target: cmPath + "/cm-1"})
			x[1], x[3] = x[3], x[1]
			return x
		}(), Options{}, []Kind{KindChanged, KindReordered}}, // cm-1 deleted in A, updated last in B
		{"reordered verbs, writes only", append(base(1), sx{method: "DELETE", target: cmPath + "/cm-1"}), func() []sx {
			x := append(base(2), sx{method: "DELETE", target: cmPath + "/cm-1"})
			x[1], x[3] = x[3], x[1]
			return x
		}(), Options{Only: []Category{CategoryWrite}}, []Kind{KindReordered}},
		{"query", base(1), func() []sx {
			x := base(2)
			x[2].target = cmPath + "/cm-0?fieldManager=other"
			return x
		}(), Options{}, []Kind{KindChanged}},
		{"ignored by pointer", base(1), controllerRun(2, "no"), Options{Ignore: []string{"/metadata/annotations/example.com~1checked"}}, nil},
		{"ignored by dot path", base(1), controllerRun(2, "no"), Options{Ignore: []string{`.metadata.annotations["example.com/checked"]`}}, nil},
		{"ignored by wildcard", base(1), controllerRun(2, "no"), Options{Ignore: []string{`.metadata.annotations.*`}}, nil},
		{"only events", base(1), controllerRun(2, "no"), Options{Only: []Category{CategoryEvent}}, nil},
		{"verb ignored", base(1), func() []sx {
			x := base(2)
			x[2].body = []byte(`{"metadata":{"labels":{"seen":"no"}}}`)
			return x
		}(), Options{IgnoreVerbs: []string{"patch"}}, nil},
		{"resource ignored", base(1), controllerRun(2, "no"), Options{IgnoreResources: []string{"configmaps"}}, nil},
		{"resource of another group", base(1), controllerRun(2, "no"), Options{IgnoreResources: []string{"configmaps.apps"}}, []Kind{KindChanged, KindChanged}},
		{"writes not in the verdict", base(1), controllerRun(2, "no"), Options{Verdict: []Category{CategoryEvent}}, []Kind{KindChanged, KindChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := mustDiff(t, writeSession(t, "a.wt", tc.a...), writeSession(t, "b.wt", tc.b...), tc.opts)
			var got []Kind
			for _, d := range all(rep) {
				got = append(got, d.Kind)
			}
			same := len(tc.want) == 0 || tc.name == "writes not in the verdict"
			if strings.Join(kinds(got), ",") != strings.Join(kinds(tc.want), ",") || rep.Same != same {
				t.Errorf("differences = %+v (same %v); want kinds %v", all(rep), rep.Same, tc.want)
			}
		})
	}
}

func kinds(k []Kind) []string {
	s := make([]string, len(k))
	for i, v := range k {
		s[i] = string(v)
	}
	return s
}

// TestWriteProtobufBody: a create sent as protobuf is the same as one sent
// as JSON with the same object; another value shows as a JSON diff.
func TestWriteProtobufBody(t *testing.T) {
	js := createBody("cm-1")
	pb := func(body []byte) []byte {
		u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: protoOf(t, body)}
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(frame.ProtobufMagic), b...)
	}
	a := writeSession(t, "a.wt", sx{method: "POST", target: cmPath, ctype: "application/json", body: js, status: 201})
	b := writeSession(t, "b.wt", sx{method: "POST", target: cmPath, ctype: "application/vnd.kubernetes.protobuf", body: pb(js), status: 201})
	if rep := mustDiff(t, a, b, Options{}); !rep.Same || rep.Summary.Writes.Compared != 1 {
		t.Fatalf("JSON and protobuf creates: %+v %+v", rep.Summary.Writes, all(rep))
	}
	other := bytes.Replace(js, []byte(`"k":"v"`), []byte(`"k":"w"`), 1)
	b = writeSession(t, "b.wt", sx{method: "POST", target: cmPath, ctype: "application/vnd.kubernetes.protobuf", body: pb(other), status: 201})
	ds := all(mustDiff(t, a, b, Options{}))
	if len(ds) != 1 || !strings.Contains(ds[0].Diff, "-    \"k\": \"v\"\n+    \"k\": \"w\"\n") {
		t.Fatalf("differences %+v", ds)
	}
}

// TestWriteRepeats: a controller that repeated its idempotent writes more
// often in one run differs in nothing: its creates answered 409 are failed
// attempts, its PATCH repeated just after itself changes no state (both
// left out, and counted). A repeat of an earlier write with another in
// between is a write of its own (the object went back), except with
// CollapseRepeats, which compares each object's distinct writes. A repeat
// with another status or body is no repeat.
func TestWriteRepeats(t *testing.T) {
	create409 := sx{method: "POST", target: cmPath + "?fieldManager=ctrl", ctype: "application/json", body: createBody("cm-1"), status: 409}
	patch := sx{method: "PATCH", target: cmPath + "/cm-0?fieldManager=ctrl", ctype: "application/merge-patch+json",
		body: []byte(`{"metadata":{"labels":{"seen":"true"}}}`)}
	other := patch
	other.body = []byte(`{"metadata":{"labels":{"seen":"again"}}}`)
	a := writeSession(t, "a.wt", controllerRun(100, "yes", create409)...)
	b := writeSession(t, "b.wt", controllerRun(5000, "yes", create409, patch, create409, patch)...)
	rep := mustDiff(t, a, b, Options{})
	if w := rep.Summary.Writes; !rep.Same || w.Repeats != 2 || w.Attempts != 3 || w.Compared != 3 {
		t.Errorf("repeated writes: same %v, writes %+v, differences %+v; want the same, 3 compared, 2 repeats, 3 attempts", rep.Same, w, all(rep))
	}
	var text strings.Builder
	rep.WriteText(&text, TextOptions{})
	if !strings.Contains(text.String(), "3 compared, no difference") || !strings.Contains(text.String(), "(2 repeats left out) (3 failed attempts left out)") {
		t.Errorf("report:\n%s", text.String())
	}
	// cm-0 patched, patched otherwise, patched back.
	b = writeSession(t, "b.wt", controllerRun(5000, "yes", other, patch)...)
	if rep := mustDiff(t, a, b, Options{Only: []Category{CategoryWrite}}); rep.Same || rep.Summary.Writes.Extra != 2 {
		t.Errorf("without CollapseRepeats: writes %+v; want 2 extra", rep.Summary.Writes)
	}
	rep = mustDiff(t, a, b, Options{CollapseRepeats: true, Only: []Category{CategoryWrite}})
	if w := rep.Summary.Writes; w.Repeats != 1 || w.Extra != 1 || len(all(rep)) != 1 || all(rep)[0].B.Exchange != 3 {
		t.Errorf("with CollapseRepeats: writes %+v, differences %+v; want the other PATCH extra, 1 repeat", w, all(rep))
	}
	// A write like an earlier one but for its body is none; one answered
	// 404 is a failed attempt (it changed nothing), left out.
	patch404 := patch
	patch404.status = 404
	b = writeSession(t, "b.wt", controllerRun(5000, "yes", create409, patch404, other)...)
	if rep := mustDiff(t, a, b, Options{CollapseRepeats: true}); rep.Summary.Writes.Repeats != 0 || rep.Summary.Writes.Extra != 1 ||
		rep.Summary.Writes.Attempts != 3 || rep.Attempts != (PerSide{1, 2}) {
		t.Errorf("writes %+v, differences %+v; want 1 extra, no repeat", rep.Summary.Writes, all(rep))
	}
}

// TestEndStateCollectionDelete: an object deleted by a DELETE of its
// collection (the namespace controller's) ends deleted, as one deleted by
// name does; a DELETE of a collection with a selector says nothing of
// which objects it took.
func TestEndStateCollectionDelete(t *testing.T) {
	create := sx{method: "POST", target: cmPath, ctype: "application/json", body: createBody("cm-1"), status: 201}
	a := writeSession(t, "a.wt", create, sx{method: "DELETE", target: cmPath + "/cm-1"})
	b := writeSession(t, "b.wt", create, sx{method: "DELETE", target: cmPath})
	rep := mustDiff(t, a, b, Options{Only: []Category{CategoryState}})
	if !rep.Same || len(rep.States) != 1 || rep.States[0].B.State != StateDeleted {
		t.Errorf("deleted by name and by collection: same %v, states %+v", rep.Same, rep.States)
	}
	b = writeSession(t, "b.wt", create, sx{method: "DELETE", target: cmPath + "?labelSelector=app%3Dx"})
	rep = mustDiff(t, a, b, Options{Only: []Category{CategoryState}})
	if rep.Same || rep.States[0].B.State != StateCreated {
		t.Errorf("a DELETE of a collection with a selector: same %v, states %+v", rep.Same, rep.States)
	}
}
