package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/frame"
)

// Secrets in disguise (issue 27 item 5): each shape below held a Secret's
// value that redaction kept. Each is fed as a body (whole and in pieces of
// 7 bytes) or as a watch event; no piece of 8 bytes of a planted value may
// survive, and the output keeps the input's length.
func TestDisguisedSecrets(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	secretJSON := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"demo"},"data":{"password":%q},"stringData":{"plain":%q}}`,
		b64([]byte(plantPassword)), plantString)
	secretYAML := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: %s\n", b64([]byte(plantPassword)))
	// A custom resource embedding a Secret, applied with kubectl apply:
	// the annotation holds the whole object as applied.
	cr := func(kind string) string {
		obj := fmt.Sprintf(`{"apiVersion":"work.example.com/v1","kind":%q,"metadata":{"name":"mw","namespace":"demo"},"spec":{"workload":{"manifests":[%s]}}}`, kind, secretJSON)
		ann, _ := json.Marshal(obj)
		return fmt.Sprintf(`{"apiVersion":"work.example.com/v1","kind":%q,"metadata":{"name":"mw","namespace":"demo","annotations":{%q:%s}},"spec":{"workload":{"manifests":[%s]}}}`,
			kind, lastApplied, ann, secretJSON)
	}
	for _, tc := range []struct {
		name string
		o    BodyOptions
		in   string
	}{
		{"last-applied of a custom resource", BodyOptions{ContentType: "application/json"}, cr("ManifestWork")},
		{"last-applied of a List item", BodyOptions{ContentType: "application/json"},
			`{"kind":"ManifestWorkList","apiVersion":"work.example.com/v1","items":[` + cr("ManifestWork") + `]}`},
		{"JSON Secret served as text/plain on a Secret path", BodyOptions{ContentType: "text/plain; charset=utf-8", SecretPath: true}, secretJSON},
		{"JSON Secret with no Content-Type on a Secret path", BodyOptions{SecretPath: true}, secretJSON},
		{"YAML Secret served as text/plain on a Secret path", BodyOptions{ContentType: "text/plain", SecretPath: true}, secretYAML},
		{"YAML Secret with no Content-Type on a Secret path", BodyOptions{SecretPath: true}, secretYAML},
		// !!binary base64 of "kind" and "Secret": no "secret" to be seen.
		{"YAML with !!binary keys", BodyOptions{ContentType: "application/yaml"},
			"apiVersion: v1\n!!binary a2luZA==: !!binary U2VjcmV0\nmetadata: {name: db}\n!!binary ZGF0YQ==:\n  password: " + b64([]byte(plantPassword)) + "\n"},
		{"YAML in UTF-16", BodyOptions{ContentType: "application/yaml"}, utf16LE("apiVersion: v1\nkind: Sec" + "ret\ndata:\n  password: " + b64([]byte(plantPassword)) + "\n")},
		{"form-encoded object", BodyOptions{ContentType: "application/x-www-form-urlencoded"}, url.Values{"object": {secretJSON}}.Encode()},
		{"form-encoded object, whole", BodyOptions{ContentType: "application/x-www-form-urlencoded"}, url.QueryEscape(secretJSON)},
		{"form-encoded password", BodyOptions{ContentType: "application/x-www-form-urlencoded"}, "user=admin&pw=" + plantPassword},
		// The apiserver's decoder keeps the last of repeated members.
		{"a kind after the data", BodyOptions{ContentType: "application/json"},
			fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":%q},"stringData":{"plain":%q},"kind":"Secret"}`, b64([]byte(plantPassword)), plantString)},
		{"a kind after the data, in an item", BodyOptions{ContentType: "application/json"},
			fmt.Sprintf(`{"kind":"List","apiVersion":"v1","items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":%q},"kind":"Secret"}]}`, b64([]byte(plantPassword)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSecrets()
			for _, n := range []int{len(tc.in), 7} {
				var rep Report
				out := body(s, tc.o, []byte(tc.in), n, &rep)
				if len(out) != len(tc.in) {
					t.Fatalf("pieces of %d: %d bytes out of %d", n, len(out), len(tc.in))
				}
				if sv := survivors(out, 8); len(sv) > 0 {
					t.Errorf("pieces of %d: %v survived in\n%q", n, sv, out)
				}
			}
			if tc.o.ContentType == "application/json" {
				ev := []byte(`{"type":"ADDED","object":` + tc.in + `}`)
				out, _ := event(s, frame.JSON, ev)
				if sv := survivors(out, 8); len(sv) > 0 {
					t.Errorf("as a watch event: %v survived in\n%q", sv, out)
				}
			}
		})
	}
}

func utf16LE(s string) string {
	b := []byte{0xff, 0xfe}
	for _, r := range s {
		b = append(b, byte(r), 0)
	}
	return string(b)
}

// TestLastAppliedProtobuf: a typed object (here a ConfigMap) whose
// last-applied-configuration annotation copies a Secret, in a protobuf
// watch event: judged by content as in JSON.
func TestLastAppliedProtobuf(t *testing.T) {
	secret := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":%q}}`,
		base64.StdEncoding.EncodeToString([]byte(plantPassword)))
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "demo", Annotations: map[string]string{lastApplied: secret, "keep": "kept"}},
		Data:       map[string]string{"k": "v"}}
	ev := protoEvent(t, "ADDED", cm)
	out, _ := event(NewSecrets(), frame.Protobuf, ev)
	if sv := survivors(out, 8); len(sv) > 0 {
		t.Errorf("%v survived in %q", sv, out)
	}
	if len(out) != len(ev) {
		t.Errorf("%d bytes out of %d", len(out), len(ev))
	}
	// A ConfigMap's own annotation that copies a ConfigMap is kept.
	cm.Annotations[lastApplied] = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"k":"v"}}`
	ev = protoEvent(t, "ADDED", cm)
	if out, _ := event(NewSecrets(), frame.Protobuf, ev); string(out) != string(ev) {
		t.Errorf("a ConfigMap's own last-applied-configuration was changed: %q", out)
	}
}

// TestLastAppliedProtobufBody: the same in a protobuf LIST of a typed kind,
// streamed (its items are not held: only an annotation's value is, until
// whole), fed whole and in pieces of 7 bytes; a benign annotation goes
// through unchanged.
func TestLastAppliedProtobufBody(t *testing.T) {
	secret := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":%q}}`,
		base64.StdEncoding.EncodeToString([]byte(plantPassword)))
	benign := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"k":"v"}}`
	list := func(ann string) []byte {
		l := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}}
		for i := range 3 {
			a := benign
			if i == 1 {
				a = ann
			}
			l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "demo",
				Annotations: map[string]string{lastApplied: a}}, Data: map[string]string{"k": strings.Repeat("v", 100*i)}})
		}
		return pb(t, l)
	}
	o := BodyOptions{ContentType: "application/vnd.kubernetes.protobuf"}
	for _, n := range []int{1 << 20, 7, 1} {
		in := list(secret)
		var rep Report
		out := body(NewSecrets(), o, in, n, &rep)
		if len(out) != len(in) {
			t.Fatalf("pieces of %d: %d bytes out of %d", n, len(out), len(in))
		}
		if sv := survivors(out, 8); len(sv) > 0 {
			t.Errorf("pieces of %d: %v survived", n, sv)
		}
		if !bytes.Contains(out, []byte(benign)) {
			t.Errorf("pieces of %d: the benign annotations were changed", n)
		}
		in = list(benign)
		if out := body(NewSecrets(), o, in, n, &rep); !bytes.Equal(out, in) {
			t.Errorf("pieces of %d: a list of benign annotations was changed", n)
		}
	}
}
