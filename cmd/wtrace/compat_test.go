package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
)

// compatDir holds session files written by released versions of wtrace,
// one directory per version, with what they read as then (see its
// README.md). They are never rewritten.
var compatDir = filepath.Join("..", "..", "testdata", "compat")

// compatNew, when set in the environment, creates the goldens a newly added
// directory of session files lacks. It never touches a golden that exists.
const compatNew = "WTRACE_COMPAT_NEW"

// compatCuts are session files cut short, as a recorder killed mid-block
// leaves them: the first n bytes of a committed file.
var compatCuts = []struct {
	from string
	n    int64
}{
	{"9936756/basic-json.wt", 45000},
	{"5d13ed0/soak-dict.wt", 300000}, // inside a block compressed with the session dictionary
}

// TestCompat: every session file written by an earlier version reads the
// same as it did then — `wtrace events`, `wtrace inspect --json`, and every
// record the reader returns. A golden is compared as a subset: what it says
// must still be said, with the same values; fields added since are fine.
func TestCompat(t *testing.T) {
	type sample struct{ name, path string }
	var samples []sample
	files, err := filepath.Glob(filepath.Join(compatDir, "*", "*.wt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no session files under %s (%v)", compatDir, err)
	}
	for _, f := range files {
		samples = append(samples, sample{strings.TrimSuffix(f, ".wt"), f})
	}
	for _, c := range compatCuts {
		data, err := os.ReadFile(filepath.Join(compatDir, c.from))
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(t.TempDir(), filepath.Base(c.from))
		if err := os.WriteFile(cut, data[:c.n], 0o644); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Join(compatDir, c.from), ".wt") + fmt.Sprintf("-cut%d", c.n)
		samples = append(samples, sample{name, cut})
	}
	for _, s := range samples {
		rel, _ := filepath.Rel(compatDir, s.name)
		t.Run(rel, func(t *testing.T) {
			out, errOut, code := wtrace(t, "events", s.path)
			if damaged := strings.Contains(rel, "-cut"); code != 0 && !damaged || damaged && code != 1 {
				t.Errorf("events %s: exit %d\n%s", s.path, code, errOut)
			}
			compareGolden(t, s.name+".events.jsonl.gz", []byte(out), true)

			out, errOut, code = wtrace(t, "inspect", "--json", s.path)
			if code != 0 {
				t.Errorf("inspect --json %s: exit %d\n%s", s.path, code, errOut)
			}
			compareIndex(t, s.name+".index.json.gz", s.path, []byte(out))

			compareGolden(t, s.name+".records.jsonl.gz", recordDigest(t, s.path), true)
		})
	}
}

// compareIndex checks the index golden, written as `inspect --json`
// printed formats.Index when the file was written (Go field names), two
// ways: the index read today covers it, field by field (the same check as
// ever, on formats.Index); and the golden converted to today's schema
// (export.SessionOf of the golden decoded into formats.Index, refusing any
// field that does not decode) is covered by today's `inspect --json`.
func compareIndex(t *testing.T, golden, path string, inspectOut []byte) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx, err := json.Marshal(f.Index())
	if err != nil {
		t.Fatal(err)
	}
	compareGolden(t, golden, idx, false)

	want := readGolden(t, golden)
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	var old formats.Index
	if err := dec.Decode(&old); err != nil {
		t.Fatalf("%s does not decode into formats.Index: %v", golden, err)
	}
	conv, err := json.Marshal(export.SessionOf(&old))
	if err != nil {
		t.Fatal(err)
	}
	wantVal, gotVal := jsonValue(t, golden+" in today's schema", conv), jsonValue(t, "inspect --json", inspectOut)
	delete(wantVal.(map[string]any), "clean") // the golden did not say (it is no field of formats.Index)
	if err := covers(wantVal, gotVal, ""); err != nil {
		t.Errorf("inspect --json (today's schema) does not say what %s said: %v", golden, err)
	}
}

// readGolden returns the uncompressed content of a gzip'd golden.
func readGolden(t *testing.T, golden string) []byte {
	t.Helper()
	zdata, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zdata))
	if err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	return b
}

// recordDigest returns one JSON line per record of the session at path (or
// per damaged region): its type and fields, byte slices replaced by their
// length and SHA-256.
func recordDigest(t *testing.T, path string) []byte {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for r, err := range f.Records().All() {
		var de *formats.DamageError
		switch {
		case errors.As(err, &de):
			enc.Encode(map[string]any{"damage": true})
			continue
		case err != nil:
			t.Fatalf("%s: %v", path, err)
		}
		m := digestFields(reflect.ValueOf(r).Elem())
		m["record"] = r.Type().String()
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// digestFields maps a record's exported fields to JSON values, with byte
// slices as {"len": n, "sha256": hex}.
func digestFields(v reflect.Value) map[string]any {
	m := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if b, ok := fv.Interface().([]byte); ok {
			sum := sha256.Sum256(b)
			m[f.Name] = map[string]any{"len": len(b), "sha256": hex.EncodeToString(sum[:])}
			continue
		}
		m[f.Name] = fv.Interface()
	}
	return m
}

// compareGolden checks got against the gzip'd golden file: each JSON value
// of the golden (each line, if lines) must be covered by got's (see
// covers).
func compareGolden(t *testing.T, golden string, got []byte, lines bool) {
	t.Helper()
	zdata, err := os.ReadFile(golden)
	if errors.Is(err, os.ErrNotExist) && os.Getenv(compatNew) != "" {
		writeGzip(t, golden, got)
		t.Logf("created %s", golden)
		return
	}
	if err != nil {
		t.Fatalf("%v\n(goldens of a newly added directory are created with %s=1 go test -run TestCompat ./cmd/wtrace)", err, compatNew)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zdata))
	if err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	want, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	wantVals, gotVals := []any{}, []any{}
	if lines {
		wantVals, gotVals = jsonLines(t, golden, want), jsonLines(t, "output", got)
	} else {
		wantVals, gotVals = append(wantVals, jsonValue(t, golden, want)), append(gotVals, jsonValue(t, "output", got))
	}
	if len(gotVals) != len(wantVals) {
		t.Errorf("%s: %d values; the golden has %d", golden, len(gotVals), len(wantVals))
		return
	}
	bad := 0
	for i := range wantVals {
		if err := covers(wantVals[i], gotVals[i], ""); err != nil {
			if bad++; bad <= 5 {
				t.Errorf("%s: value %d: %v", golden, i, err)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d values differ in all", golden, bad)
	}
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsonValue(t *testing.T, what string, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func jsonLines(t *testing.T, what string, b []byte) []any {
	t.Helper()
	var vs []any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		vs = append(vs, jsonValue(t, what, sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return vs
}

// covers reports whether got says everything want says: the same scalars,
// arrays of the same length whose elements cover, objects holding every
// member of want (and perhaps more) with covering values.
func covers(want, got any, at string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v; want an object", orRoot(at), got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing (want %v)", orRoot(at), k, wv)
			}
			if err := covers(wv, gv, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v; want %d elements", orRoot(at), got, len(w))
		}
		for i := range w {
			if err := covers(w[i], g[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if want != got {
		return fmt.Errorf("%s: got %v; want %v", orRoot(at), got, want)
	}
	return nil
}

func orRoot(at string) string {
	if at == "" {
		return "(root)"
	}
	return at
}

func TestCovers(t *testing.T) {
	for _, tt := range []struct {
		want, got string
		ok        bool
	}{
		{`{"a":1,"b":[1,{"c":"x"}]}`, `{"a":1,"b":[1,{"c":"x","d":2}],"e":null}`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		{`{"a":[1,2]}`, `{"a":[1]}`, false},
		{`{"a":null}`, `{"a":[]}`, false},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`[{"a":1}]`, `[{"a":1}]`, true},
	} {
		err := covers(jsonValue(t, "want", []byte(tt.want)), jsonValue(t, "got", []byte(tt.got)), "")
		if (err == nil) != tt.ok {
			t.Errorf("covers(%s, %s) = %v; want ok %v", tt.want, tt.got, err, tt.ok)
		}
	}
}
