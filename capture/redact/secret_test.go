package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wtrace/wtrace/frame"
)

var secretValues = map[string][]byte{
	"password": []byte("hunter2-very-secret"),
	"token":    []byte("corpus-admin-token-0123456789abcdef"),
	"empty":    {},
	"bin":      {0, 1, 2, 250, 251, 252, 253},
}

func testSecret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "demo", ResourceVersion: "42",
			Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{
				lastApplied: `{"apiVersion":"v1","data":{"password":"aHVudGVyMi12ZXJ5LXNlY3JldA=="},"kind":"Secret"}`,
				"note":      "keep me",
			},
		},
		Data:       secretValues,
		StringData: map[string]string{"plain": "plain-text-secret"},
		Type:       corev1.SecretTypeOpaque,
	}
}

// leaked reports the secret values still present in b.
func leaked(b []byte) []string {
	var out []string
	for _, v := range []string{"hunter2-very-secret", "aHVudGVyMi12ZXJ5LXNlY3JldA", "corpus-admin-token", "plain-text-secret", "Y29ycHVzLWFkbWlu"} {
		if bytes.Contains(b, []byte(v)) {
			out = append(out, v)
		}
	}
	return out
}

func jsonEvent(t *testing.T, typ string, obj runtime.Object) []byte {
	o, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"type":"` + typ + `","object":` + string(o) + `}`)
}

func protoSerializer() *protobuf.Serializer {
	return protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
}

func protoEvent(t *testing.T, typ string, obj runtime.Object) []byte {
	var buf bytes.Buffer
	if err := protoSerializer().Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: buf.Bytes()}}
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// body feeds b to a Body in pieces of n bytes and returns what came out.
func body(s *Secrets, o BodyOptions, b []byte, n int, rep *Report) []byte {
	var out []byte
	emit := func(p []byte) { out = append(out, p...) }
	bd := s.NewBody(o, rep)
	for len(b) > 0 {
		k := min(n, len(b))
		bd.Write(b[:k], emit)
		b = b[k:]
	}
	bd.Close(true, emit)
	return out
}

func event(s *Secrets, f frame.Format, b []byte) ([]byte, []int) {
	var rep Report
	out := s.Event(f, b, &rep)
	return out, rep.Lengths()
}

func checkSecret(t *testing.T, got *corev1.Secret, lens []int) {
	t.Helper()
	want := testSecret()
	if got.Name != want.Name || got.Namespace != want.Namespace || got.ResourceVersion != want.ResourceVersion ||
		got.Labels["app"] != "db" || got.Annotations["note"] != "keep me" || got.Type != want.Type {
		t.Errorf("redaction changed more than values: %+v", got.ObjectMeta)
	}
	for k, v := range want.Data {
		g, ok := got.Data[k]
		if !ok {
			t.Errorf("data[%q] missing", k)
			continue
		}
		if len(g) != len(v) {
			t.Errorf("data[%q] has %d bytes; want %d (length kept)", k, len(g), len(v))
		}
		if len(v) > 0 && bytes.Equal(g, v) {
			t.Errorf("data[%q] not redacted", k)
		}
	}
	// The encoded length is kept; JSON escapes make the decoded one differ.
	if a := got.Annotations[lastApplied]; strings.Contains(a, "aHVudGVy") || !strings.HasPrefix(a, "redacted-") {
		t.Errorf("last-applied annotation = %q", a)
	}
	if len(lens) == 0 {
		t.Errorf("no lengths reported")
	}
}

func TestEventJSON(t *testing.T) {
	s := NewSecrets()
	ev := jsonEvent(t, "ADDED", testSecret())
	out, lens := event(s, frame.JSON, ev)
	if len(out) != len(ev) {
		t.Fatalf("length %d; want %d", len(out), len(ev))
	}
	if l := leaked(out); len(l) > 0 {
		t.Fatalf("leaked %v in %s", l, out)
	}
	var we struct {
		Type   string
		Object corev1.Secret
	}
	if err := json.Unmarshal(out, &we); err != nil {
		t.Fatalf("redacted event does not decode: %v\n%s", err, out)
	}
	checkSecret(t, &we.Object, lens)
	// Deterministic within a Secrets: equal values, equal placeholders.
	again, _ := event(s, frame.JSON, ev)
	if !bytes.Equal(out, again) {
		t.Errorf("same event redacted differently")
	}
	if other, _ := event(NewSecrets(), frame.JSON, ev); bytes.Equal(out, other) {
		t.Errorf("two sessions share placeholders")
	}
}

func TestEventProtobuf(t *testing.T) {
	s := NewSecrets()
	ev := protoEvent(t, "MODIFIED", testSecret())
	out, lens := event(s, frame.Protobuf, ev)
	if len(out) != len(ev) {
		t.Fatalf("length %d; want %d", len(out), len(ev))
	}
	if l := leaked(out); len(l) > 0 {
		t.Fatalf("leaked %v", l)
	}
	var we metav1.WatchEvent
	if err := we.Unmarshal(out); err != nil {
		t.Fatal(err)
	}
	obj, _, err := protoSerializer().Decode(we.Object.Raw, nil, nil)
	if err != nil {
		t.Fatalf("redacted object does not decode: %v", err)
	}
	checkSecret(t, obj.(*corev1.Secret), lens)
	if len(lens) != len(secretValues)+2 { // data, stringData, last-applied
		t.Errorf("%d values redacted; want %d", len(lens), len(secretValues)+2)
	}
}

func TestNotSecret(t *testing.T) {
	s := NewSecrets()
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "Secret"}, Data: map[string]string{"k": "Secret value"}}
	for _, tt := range []struct {
		f  frame.Format
		ev []byte
	}{{frame.JSON, jsonEvent(t, "ADDED", cm)}, {frame.Protobuf, protoEvent(t, "ADDED", cm)}} {
		out, lens := event(s, tt.f, tt.ev)
		if !bytes.Equal(out, tt.ev) || lens != nil {
			t.Errorf("%v: ConfigMap event changed", tt.f)
		}
	}
}

func TestBody(t *testing.T) {
	s := NewSecrets()
	list := &corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"},
		Items: []corev1.Secret{*testSecret(), *testSecret()}}
	// The apiserver's JSON lists carry no kind in items.
	for i := range list.Items {
		list.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	jsonList, _ := json.Marshal(list)
	var protoList bytes.Buffer
	if err := protoSerializer().Encode(list, &protoList); err != nil {
		t.Fatal(err)
	}
	jsonSecret, _ := json.Marshal(testSecret())
	tests := []struct {
		name       string
		ct         string
		body       string
		secretPath bool
		wantErr    bool
		decode     func([]byte) error
	}{
		{name: "json-list", ct: "application/json", body: string(jsonList), decode: func(b []byte) error {
			var l corev1.SecretList
			return json.Unmarshal(b, &l)
		}},
		{name: "protobuf-list", ct: "application/vnd.kubernetes.protobuf", body: protoList.String(), decode: func(b []byte) error {
			_, _, err := protoSerializer().Decode(b, nil, nil)
			return err
		}},
		{name: "json-secret", ct: "application/json", body: string(jsonSecret), secretPath: true},
		{name: "merge-patch", ct: "application/merge-patch+json", body: `{"data":{"password":"aHVudGVyMi12ZXJ5LXNlY3JldA=="},"stringData":{"x":"plain-text-secret"}}`, secretPath: true},
		{name: "json-patch", ct: "application/json-patch+json", body: `[{"op":"replace","path":"/data/password","value":"aHVudGVyMi12ZXJ5LXNlY3JldA=="},{"op":"add","path":"/stringData","value":{"x":"plain-text-secret"}}]`, secretPath: true},
		{name: "yaml-apply", ct: "application/apply-patch+yaml", body: "data:\n  password: aHVudGVyMi12ZXJ5LXNlY3JldA==\n", secretPath: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1 << 20} {
				var rep Report
				out := body(s, BodyOptions{ContentType: tt.ct, AssumeSecret: tt.secretPath}, []byte(tt.body), n, &rep)
				fails, _ := rep.Failures()
				if tt.wantErr != (len(fails) > 0) {
					t.Errorf("pieces of %d: failures %v; want some: %v", n, fails, tt.wantErr)
				}
				check(t, tt.body, out, tt.decode)
			}
		})
	}
}

func check(t *testing.T, in string, out []byte, decode func([]byte) error) {
	t.Helper()
	{
		{
			if len(out) != len(in) {
				t.Errorf("length %d; want %d", len(out), len(in))
			}
			if l := leaked(out); len(l) > 0 {
				t.Errorf("leaked %v in %q", l, out)
			}
			if decode != nil {
				if err := decode(out); err != nil {
					t.Errorf("redacted body does not decode: %v", err)
				}
			}
		}
	}
}

func TestSecretPath(t *testing.T) {
	for target, want := range map[string]bool{
		"/api/v1/namespaces/demo/secrets":                 true,
		"/api/v1/namespaces/demo/secrets/db":              true,
		"/api/v1/secrets?watch=true":                      true,
		"/api/v1/watch/namespaces/demo/secrets":           true,
		"/api/v1/namespaces/demo/configmaps?name=secrets": false,
		"/api/v1/namespaces/secrets-team/configmaps":      false,
		// Other spellings: escapes, case, ";" parameters; a path that does
		// not decode counts as a Secret's (fail closed).
		"/api/v1/namespaces/demo/%73ecrets":     true,
		"/api/v1/namespaces/demo/SECRETS/x":     true,
		"/api/v1/namespaces/demo/secrets;x=1/y": true,
		"/api/v1/namespaces/demo/%zz":           true,
		"/api/v1/namespaces/demo/configmaps":    false,
	} {
		if got := SecretPath(target); got != want {
			t.Errorf("SecretPath(%q) = %v; want %v", target, got, want)
		}
	}
}
