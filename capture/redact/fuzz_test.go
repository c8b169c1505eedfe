package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/frame"
)

// fuzzTemplates are documents with a slot (@V@ for a raw value, @B@ for
// its base64) where the redactor must replace the value, whatever it is.
var fuzzTemplates = []struct {
	ct, doc string
	assume  bool
}{
	{"application/json", `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"},"data":{"k":"@B@"}}`, false},
	{"application/json", `{"apiVersion":"v1","data":{"k":"@B@"},"kind":"Secret","metadata":{"name":"x"}}`, false},
	{"application/json", `{"kind":"Secret","stringData":{"k":"@V@"}}`, false},
	{"application/json", `{"apiVersion":"v1","items":[{"data":{"k":"@B@"}}],"kind":"SecretList"}`, false},
	{"application/json", `{"kind":"List","items":[{"kind":"SecretList","items":[{"stringData":{"k":"@V@"}}]}]}`, false},
	{"application/json", `{"kind":"Table","rows":[{"cells":["x"],"object":{"kind":"Secret","data":{"k":"@B@"}}}]}`, false},
	{"application/json", `{"kind":"PartialObjectMetadataList","items":[{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"kind\":\"Secret\",\"stringData\":{\"k\":\"@V@\"}}"}}}]}`, false},
	{"application/json", `{"type":"ADDED","object":{"kind":"TokenRequest","status":{"token":"@V@"}}}`, false},
	{"application/json", `{"kind":"TokenReview","spec":{"token":"@V@"}}`, false},
	{"application/merge-patch+json", `{"stringData":{"k":"@V@"}}`, true},
	{"application/json-patch+json", `[{"op":"add","path":"/data/k","value":"@B@"}]`, true},
	{"application/yaml", "kind: Secret\nstringData:\n  k: @V@\n", false},
	// Secrets quoted in text, and served as text.
	{"application/json", `{"kind":"Event","message":"admission denied: {\"kind\":\"Secret\",\"stringData\":{\"k\":\"@V@\"}}"}`, false},
	{"application/json", `{"kind":"Event","message":"failed:\nkind: Secret\nstringData:\n  k: @V@\n"}`, false},
	{"text/plain", `{"kind":"Secret","stringData":{"k":"@V@"}}`, false},
}

// fill puts value into a template, escaped for JSON where it goes into a
// JSON string (twice inside the last-applied annotation).
func fillTemplate(doc, ct, value string) (string, []string) {
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	v := value
	if strings.Contains(ct, "json") || strings.HasPrefix(ct, "text/") {
		q, _ := json.Marshal(value)
		v = string(q[1 : len(q)-1])
		if strings.Contains(doc, `\"@V@\"`) {
			q2, _ := json.Marshal(v)
			v = string(q2[1 : len(q2)-1])
		}
	}
	out := strings.ReplaceAll(strings.ReplaceAll(doc, "@V@", v), "@B@", b64)
	return out, []string{v, b64}
}

// FuzzBody: any bytes, in any pieces, come out with the same length and no
// panic; a value planted in any shape, in any pieces, cut anywhere, does
// not come out.
func FuzzBody(f *testing.F) {
	f.Add([]byte(`{"kind":"Secret","data":{"a":"YWJj"}}`), "hunter2-hunter2", uint8(0), uint8(3), uint16(0))
	f.Add([]byte(`{"kind":"SecretList","items":[{"data":{"a":"YWJj"}}]}`), "correct horse battery", uint8(3), uint8(1), uint16(40))
	f.Add([]byte("k8s\x00\x0a\x08\x12\x06Secret\x12\x04\x12\x02\x12\x00"), "s3cr3t-value", uint8(6), uint8(0), uint16(17))
	f.Add([]byte(strings.Repeat("[", 20000)), "\u00e9\"\\\x00quote", uint8(9), uint8(7), uint16(0))
	s := NewSecrets()
	f.Fuzz(func(t *testing.T, data []byte, value string, shape, piece uint8, cut uint16) {
		n := int(piece%16) + 1
		for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf", "application/yaml", "text/plain", ""} {
			var rep Report
			out := body(s, BodyOptions{ContentType: ct, AssumeSecret: shape&1 == 1}, data, n, &rep)
			if len(out) != len(data) {
				t.Fatalf("Body(%q) in pieces of %d: length %d → %d", ct, n, len(data), len(out))
			}
		}
		for _, fm := range []frame.Format{frame.JSON, frame.Protobuf} {
			var rep Report
			if out := s.Event(fm, data, &rep); len(out) != len(data) {
				t.Fatalf("Event(%v): length %d → %d", fm, len(data), len(out))
			}
			if out := s.Tail(fm, data, &rep); len(out) != len(data) {
				t.Fatalf("Tail(%v): length %d → %d", fm, len(data), len(out))
			}
		}

		if len(value) < 8 || strings.ContainsAny(value, "\r\n:#{}[]&*!|>'%@`,") {
			return // too short to grep for; or YAML structure
		}
		tp := fuzzTemplates[int(shape)%len(fuzzTemplates)]
		doc, forms := fillTemplate(tp.doc, tp.ct, value)
		for _, form := range forms {
			if strings.Count(doc, form) != strings.Count(tp.doc, "@V@")+strings.Count(tp.doc, "@B@") && strings.Contains(strings.NewReplacer("@V@", "", "@B@", "").Replace(tp.doc), form) {
				return // the value is part of the template's own text
			}
		}
		in := []byte(doc)
		if c := int(cut); c > 0 && c < len(in) {
			in = in[:c]
		}
		var out []byte
		emit := func(p []byte) { out = append(out, p...) }
		var rep Report
		bd := s.NewBody(BodyOptions{ContentType: tp.ct, AssumeSecret: tp.assume}, &rep)
		for p := in; len(p) > 0; {
			k := min(n, len(p))
			bd.Write(p[:k], emit)
			p = p[k:]
		}
		bd.Close(len(in) == len(doc), emit)
		if len(out) != len(in) {
			t.Fatalf("%s: length %d → %d", doc, len(in), len(out))
		}
		for _, form := range forms {
			if len(form) >= 8 && bytes.Contains(out, []byte(form)) {
				t.Fatalf("%q survived in %q (from %q)", form, out, in)
			}
		}
	})
}
