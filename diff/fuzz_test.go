package diff

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"testing"
	"unicode/utf8"
)

// FuzzNormalize: the canonical hash and the tree never panic on any
// bytes and any ignore path, and agree: a document's rendered tree hashes
// as the document does (for valid UTF-8 that encoding/json decodes, and
// paths without element indexes, which removing elements shifts).
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"1","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"x":"1"}}`), ".metadata.labels.x")
	f.Add([]byte(`{"kind":"List","items":[{"metadata":{"labels":{"x":"1"}}}]}`), ".metadata.labels.x")
	f.Add([]byte(`{"a":[1,2,{"b":null}],"a":"dup","lastProbeTime":null}`), "/a/*")
	f.Add([]byte(`{"s":"\u00e9\"","n":-1.5e3,"t":true,"f":false}`), `.s["x"]`)
	f.Add([]byte(`[[[[{}]]]]`), "/0")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		var ignore []string
		if path != "" {
			ignore = []string{path}
		}
		r, err := newRules(ignore)
		if err != nil {
			r = &rules{}
		}
		h := newHasher(r, maphash.MakeSeed())
		sum, herr := h.sum(data)
		tr, terr := r.tree(data, nil)
		if terr != nil {
			return
		}
		out := render(tr)
		if herr != nil || !utf8.Valid(data) {
			return
		}
		for _, p := range r.paths {
			for _, s := range p {
				if _, err := strconv.Atoi(s); err == nil {
					return
				}
			}
		}
		again, err := h.sum(out)
		if err != nil {
			t.Fatalf("the rendered tree does not hash: %v\n%s", err, out)
		}
		if again != sum {
			t.Fatalf("hash(document) != hash(rendered tree)\n%s\n%s", data, out)
		}
		if !bytes.Equal(render(mustTree(t, r, out)), out) {
			t.Fatalf("rendering is not stable:\n%s", out)
		}
	})
}

func mustTree(t *testing.T, r *rules, b []byte) any {
	v, err := r.tree(b, nil)
	if err != nil {
		t.Fatalf("tree of a rendered tree: %v\n%s", err, b)
	}
	return v
}

// FuzzParseIgnore: ignore paths never panic, and a path that parses
// applies to any document without panicking.
func FuzzParseIgnore(f *testing.F) {
	for _, s := range []string{"/metadata/labels/x", ".metadata.labels.x", `.a["b.c"][0][*].d`, "/a~1b/~0", ".a[", `.a["x]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := newRules([]string{s})
		if err != nil {
			return
		}
		h := newHasher(r, maphash.MakeSeed())
		h.sum([]byte(`{"metadata":{"labels":{"x":"1"}},"items":[{"a":[1,{"b":2}]}]}`))
	})
}

// FuzzProtobuf: decoding protobuf bodies of any bytes never panics.
func FuzzProtobuf(f *testing.F) {
	f.Add([]byte("k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Status\x12\x00"))
	f.Add([]byte("k8s\x00"))
	f.Add([]byte("k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x04\x0a\x02\x0a\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		protoBodyJSON(b)
	})
}
