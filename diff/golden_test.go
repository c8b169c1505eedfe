package diff

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata and the fuzz seed corpora of testdata/fuzz")

// goldenSessions are two sessions with one difference of each kind.
func goldenSessions(t *testing.T) (string, string) {
	h := history(10)
	list := sx{target: cmPath, resp: []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[]}`)}
	a := writeSession(t, "a.wt", append([]sx{list, watch(h), {target: "/healthz", respType: "text/plain", resp: []byte("ok")}}, controllerRun(100, "yes")...)...)
	changed := ev("MODIFIED", obj{name: "cm-1", ns: "demo", rv: 512, data: map[string]string{"a": "3"}})
	bx := controllerRun(500, "no", sx{method: "POST", target: cmPath, ctype: "application/json", body: createBody("cm-9"), status: 201})
	bx[2].status = 409
	b := writeSession(t, "b.wt", append([]sx{
		{target: cmPath + "?limit=500&resourceVersion=0", status: 500, resp: []byte(`{"kind":"Status","code":500}`)},
		watch([][]byte{h[0], changed, h[3], h[2], ev("ADDED", obj{name: "cm-3", ns: "demo", rv: 520})}, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 400*time.Millisecond),
		{target: "/version", resp: []byte(`{"major":"1"}`)},
	}, bx...)...)
	return a, b
}

// TestReportGolden: the JSON and the text of a report with one
// difference of each kind, as testdata/report.golden.{json,txt} hold them
// (go test ./diff -update rewrites them).
func TestReportGolden(t *testing.T) {
	a, b := goldenSessions(t)
	fa, err := formats.Open(a, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := formats.Open(b, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	rep, err := Files(fa, "a.wt", fb, "b.wt", Options{})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"report.golden.json": append(js, '\n'), "report.golden.txt": txt.Bytes()} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./diff -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs (go test ./diff -update rewrites it); got:\n%s", path, got)
		}
	}
	// Every kind and category shows up once at least.
	seen := map[string]bool{}
	for _, d := range all(rep) {
		seen[string(d.Category)] = true
		seen[string(d.Kind)] = true
	}
	for _, k := range []string{"write", "event", "stream", "exchange", "missing", "extra", "reordered", "changed", "status", "timing"} {
		if !seen[k] {
			t.Errorf("the golden report has no %s difference", k)
		}
	}
}

// TestGenSeeds writes the seed corpora of the fuzz targets from real
// recordings (the corpus captures) when run with -update.
func TestGenSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	write := func(target string, i int, content string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte("go test fuzz v1\n"+content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{".metadata.labels.x", "/data/k", `.metadata.annotations["a.b/c"]`, ".items[*].metadata.name", "/metadata/ownerReferences/0/uid"}
	n := 0
	for _, sc := range []string{"basic-json", "multi-watch", "protobuf"} {
		f, err := formats.Open(wttest.RecordCorpus(t, sc, false), formats.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for ev, err := range f.Events() {
			if err != nil || k >= 2 {
				break
			}
			c, _ := newComparer(Options{})
			e := &event{format: ev.Format, data: ev.Data}
			doc, err := c.eventDoc(e)
			if err != nil {
				t.Fatalf("%s: %v", sc, err)
			}
			write("FuzzNormalize", n, fmt.Sprintf("[]byte(%q)\nstring(%q)\n", doc, paths[n%len(paths)]))
			n++
			k++
		}
		f.Close()
	}
	for i, p := range paths {
		write("FuzzParseIgnore", i, fmt.Sprintf("string(%q)\n", p))
	}
	// Protobuf bodies: real protobuf events' objects in their envelope.
	f, err := formats.Open(wttest.RecordCorpus(t, "protobuf", false), formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	i := 0
	for ev, err := range f.Events() {
		if err != nil || i >= 3 {
			break
		}
		if ev.Format.String() != "protobuf" {
			continue
		}
		obj := protoEnvelope(t, ev.Data)
		write("FuzzProtobuf", i, fmt.Sprintf("[]byte(%q)\n", obj))
		i++
	}
}

// protoEnvelope returns the object of a protobuf watch event as a body:
// "k8s\x00" and its runtime.Unknown envelope.
func protoEnvelope(t *testing.T, data []byte) []byte {
	t.Helper()
	apiVersion, kind, obj, err := frame.EventObject(frame.Protobuf, data)
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: obj}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(frame.ProtobufMagic), b...)
}
