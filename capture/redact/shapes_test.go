package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wtrace/wtrace/frame"
)

// Planted values: none of them (nor a 6-byte piece of them) may survive
// redaction. Their middles are not hex: a placeholder is "redacted-" and
// hex, and a plant's "d-5f3…" once matched a placeholder's "d-5f3…" (in
// base64, 1 run in about 4,000: TestBodyCuts failed in CI on no hole).
const (
	plantPassword = "Zq7Kp4Wd-5g3q9x1z-Xv"
	plantString   = "Yr8Ls5Ts-8h2k4m7p-Qw"
	plantToken    = "Jt3Nm6Tk-0u7w2y9r-Pz"
	plantReview   = "Hv2Bq9Rv-6j1s9o3t-Lm"
	plantApplied  = "Gx5Cw1Ap-3n9g0k4i-Ns"
)

func plants() []string {
	return []string{plantPassword, plantString, plantToken, plantReview, plantApplied,
		base64.StdEncoding.EncodeToString([]byte(plantPassword)),
		base64.StdEncoding.EncodeToString([]byte(plantApplied))}
}

// survivors returns the planted values of which a piece of min bytes is
// in b.
func survivors(b []byte, min int) []string {
	var out []string
	for _, p := range plants() {
		for i := 0; i+min <= len(p); i++ {
			if bytes.Contains(b, []byte(p[i:i+min])) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func plantedSecret(name string) *corev1.Secret {
	applied, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": "demo"},
		"data":     map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(plantApplied))}})
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", ResourceVersion: "7",
			Annotations: map[string]string{lastApplied: string(applied), "keep": "kept-annotation"}},
		Data:       map[string][]byte{"password": []byte(plantPassword)},
		StringData: map[string]string{"plain": plantString},
		Type:       corev1.SecretTypeOpaque,
	}
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = authnv1.AddToScheme(s)
	_ = appsv1.AddToScheme(s)
	_ = certv1.AddToScheme(s)
	metav1.AddMetaToScheme(s)
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
}

func pb(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(testScheme(), testScheme()).Encode(obj, &buf); err != nil {
		t.Fatalf("protobuf encode %T: %v", obj, err)
	}
	return buf.Bytes()
}

func js(t testing.TB, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sorted encodes obj the way unstructured objects are served: members in
// key order, so "data" comes before "kind".
func sorted(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return js(t, u)
}

func kindless(s *corev1.Secret) corev1.Secret {
	c := *s
	c.TypeMeta = metav1.TypeMeta{}
	return c
}

func pom(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
		ObjectMeta: s.ObjectMeta}
}

// shape is one way a credential reaches the wire.
type shape struct {
	name   string
	ct     string
	body   []byte
	assume bool
	event  frame.Format // also a watch event of this format (frame.Unknown: no)
}

func shapes(t testing.TB) []shape {
	s1, s2 := plantedSecret("db"), plantedSecret("api")
	list := &corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []corev1.Secret{kindless(s1), kindless(s2)}}
	v1list := &corev1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"},
		Items: []runtime.RawExtension{{Object: s1}, {Object: list}}}
	v1listPB := &corev1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"},
		Items: []runtime.RawExtension{{Raw: pb(t, s1)}, {Raw: pb(t, list)}, {Raw: js(t, s2)}}}
	table := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}},
		Rows: []metav1.TableRow{{Cells: []any{"db"}, Object: runtime.RawExtension{Object: s1}},
			{Cells: []any{"api"}, Object: runtime.RawExtension{Object: pom(s2)}}}}
	pomList := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"},
		Items: []metav1.PartialObjectMetadata{*pom(s1), *pom(s2)}}
	tr := &authnv1.TokenRequest{TypeMeta: metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "demo"},
		Spec:       authnv1.TokenRequestSpec{Audiences: []string{"api"}},
		Status:     authnv1.TokenRequestStatus{Token: plantToken}}
	review := &authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"},
		Spec: authnv1.TokenReviewSpec{Token: plantReview}}
	rev := &appsv1.ControllerRevision{TypeMeta: metav1.TypeMeta{Kind: "ControllerRevision", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "demo"}, Data: runtime.RawExtension{Raw: js(t, s1)}, Revision: 1}
	admission := map[string]any{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
		"request": map[string]any{"uid": "1", "object": s1, "oldObject": s2}}
	deep := strings.Repeat(`{"a":`, MaxDepth+5) + string(js(t, s1)) + strings.Repeat(`}`, MaxDepth+5)
	tableJSON := js(t, table)
	return []shape{
		{name: "secret", ct: "application/json", body: js(t, s1), event: frame.JSON},
		{name: "secret-sorted-keys", ct: "application/json", body: sorted(t, s1), event: frame.JSON},
		{name: "secret-escaped-kind", ct: "application/json", body: bytes.Replace(js(t, s1), []byte(`"kind":"Secret"`), []byte(`"kind":"\u0053ecret"`), 1), event: frame.JSON},
		{name: "secretlist", ct: "application/json", body: js(t, list)},
		{name: "secretlist-sorted-keys", ct: "application/json", body: sorted(t, list)},
		{name: "v1-list-nested", ct: "application/json", body: js(t, v1list)},
		{name: "table", ct: "application/json;as=Table;v=v1;g=meta.k8s.io", body: tableJSON},
		{name: "table-watch-event", ct: "application/json", body: []byte(`{"type":"ADDED","object":` + string(tableJSON) + `}`), event: frame.JSON},
		{name: "pom", ct: "application/json", body: js(t, pom(s1)), event: frame.JSON},
		{name: "pom-list", ct: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", body: js(t, pomList)},
		{name: "tokenrequest", ct: "application/json", body: js(t, tr)},
		{name: "tokenreview", ct: "application/json", body: js(t, review)},
		{name: "controllerrevision", ct: "application/json", body: js(t, rev)},
		{name: "admissionreview", ct: "application/json", body: js(t, admission)},
		{name: "too-deep", ct: "application/json", body: []byte(deep)},
		{name: "merge-patch", ct: "application/merge-patch+json", assume: true,
			body: []byte(`{"data":{"password":"` + base64.StdEncoding.EncodeToString([]byte(plantPassword)) + `"},"stringData":{"plain":"` + plantString + `"}}`)},
		{name: "json-patch", ct: "application/json-patch+json", assume: true,
			body: []byte(`[{"op":"replace","path":"/data/password","value":"` + base64.StdEncoding.EncodeToString([]byte(plantPassword)) + `"},{"op":"add","path":"/stringData","value":{"plain":"` + plantString + `"}}]`)},
		{name: "yaml-apply", ct: "application/apply-patch+yaml", assume: true,
			body: []byte("apiVersion: v1\nkind: Secret\nstringData:\n  plain: " + plantString + "\n")},
		{name: "yaml-secret-response", ct: "application/yaml",
			body: []byte("apiVersion: v1\nstringData:\n  plain: " + plantString + "\nkind: Secret\n")},
		{name: "pb-secret", ct: "application/vnd.kubernetes.protobuf", body: pb(t, s1)},
		{name: "pb-secretlist", ct: "application/vnd.kubernetes.protobuf", body: pb(t, list)},
		{name: "pb-v1-list", ct: "application/vnd.kubernetes.protobuf", body: pb(t, v1listPB)},
		{name: "pb-pom", ct: "application/vnd.kubernetes.protobuf", body: pb(t, pom(s1))},
		{name: "pb-pom-list", ct: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", body: pb(t, pomList)},
		{name: "pb-tokenrequest", ct: "application/vnd.kubernetes.protobuf", body: pb(t, tr)},
		{name: "pb-tokenreview", ct: "application/vnd.kubernetes.protobuf", body: pb(t, review)},
		{name: "pb-controllerrevision", ct: "application/vnd.kubernetes.protobuf", body: pb(t, rev)},
	}
}

// TestShapes: every shape, whole and in pieces of 1, 7 and 4096 bytes,
// keeps its length and loses every planted value.
func TestShapes(t *testing.T) {
	s := NewSecrets()
	for _, sh := range shapes(t) {
		t.Run(sh.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 4096, len(sh.body)} {
				var rep Report
				out := body(s, BodyOptions{ContentType: sh.ct, AssumeSecret: sh.assume}, sh.body, n, &rep)
				if len(out) != len(sh.body) {
					t.Fatalf("pieces of %d: length %d; want %d", n, len(out), len(sh.body))
				}
				if l := survivors(out, 12); len(l) > 0 {
					t.Fatalf("pieces of %d: %v survived in\n%s", n, l, clip(out))
				}
				if rep.Empty() {
					t.Errorf("pieces of %d: nothing reported", n)
				}
				if !strings.HasPrefix(sh.name, "too-deep") && !strings.HasPrefix(sh.name, "yaml") && bytes.Contains(sh.body, []byte("kept-annotation")) && !bytes.Contains(out, []byte("kept-annotation")) {
					t.Errorf("pieces of %d: an unrelated annotation was lost", n)
				}
			}
			if sh.event != frame.Unknown {
				var rep Report
				out := s.Event(sh.event, sh.body, &rep)
				if len(out) != len(sh.body) || len(survivors(out, 12)) > 0 {
					t.Errorf("Event: length %d (want %d), survivors %v", len(out), len(sh.body), survivors(out, 12))
				}
			}
		})
	}
}

// TestShapesDecode: what clients decode from redacted objects.
func TestShapesDecode(t *testing.T) {
	s := NewSecrets()
	for _, sh := range shapes(t) {
		if sh.assume || strings.HasPrefix(sh.name, "too-deep") || strings.HasPrefix(sh.name, "yaml") {
			continue
		}
		var rep Report
		out := body(s, BodyOptions{ContentType: sh.ct}, sh.body, 5, &rep)
		if strings.HasPrefix(sh.name, "pb-") {
			if _, _, err := protobuf.NewSerializer(testScheme(), testScheme()).Decode(out, nil, nil); err != nil {
				t.Errorf("%s: redacted protobuf does not decode: %v", sh.name, err)
			}
			continue
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Errorf("%s: redacted JSON does not decode: %v", sh.name, err)
		}
	}
	// A redacted Secret keeps its data keys and lengths, valid base64.
	var rep Report
	in := js(t, plantedSecret("db"))
	out := body(s, BodyOptions{ContentType: "application/json"}, in, 3, &rep)
	var got corev1.Secret
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data["password"]) != len(plantPassword) || got.StringData["plain"] == plantString || len(got.StringData["plain"]) != len(plantString) {
		t.Errorf("redacted Secret: %+v", got)
	}
	found := false
	for _, l := range rep.Redactions() {
		found = found || l.Object == "Secret demo/db" && strings.Contains(l.Fields, "data.password")
	}
	if !found {
		t.Errorf("report = %+v; want a line for Secret demo/db data.password", rep.Redactions())
	}
}

// TestKept: what is not a credential is not touched.
func TestKept(t *testing.T) {
	s := NewSecrets()
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "Secret", Namespace: "demo", Annotations: map[string]string{lastApplied: `{"kind":"ConfigMap","data":{"k":"v"}}`}},
		Data:       map[string]string{"kubeconfig": "users:\n- user:\n    token: " + plantToken, "data": "Secret"}}
	csr := &certv1.CertificateSigningRequest{TypeMeta: metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"},
		Status: certv1.CertificateSigningRequestStatus{Certificate: []byte("-----BEGIN CERTIFICATE-----")}}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}}}}}
	for _, obj := range []runtime.Object{cm, csr, pod, &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, Items: []corev1.ConfigMap{*cm}}} {
		for _, b := range [][]byte{js(t, obj), pb(t, obj)} {
			var rep Report
			if out := body(s, BodyOptions{ContentType: "application/json"}, b, 3, &rep); !bytes.Equal(out, b) || !rep.Empty() {
				t.Errorf("%T changed: %+v", obj, rep.Redactions())
			}
		}
		ev := []byte(`{"type":"ADDED","object":` + string(js(t, obj)) + `}`)
		var rep Report
		if out := s.Event(frame.JSON, ev, &rep); !bytes.Equal(out, ev) {
			t.Errorf("%T event changed", obj)
		}
	}
}

// TestTailCuts cuts a watch event of each JSON shape at every byte: the
// partial event must lose every planted value, however little of it is
// there.
func TestTailCuts(t *testing.T) {
	s := NewSecrets()
	for _, sh := range shapes(t) {
		if sh.event != frame.JSON {
			continue
		}
		ev := []byte(`{"type":"ADDED","object":` + string(sh.body) + `}`)
		for cut := 1; cut < len(ev); cut++ {
			var rep Report
			out := s.Tail(frame.JSON, ev[:cut], &rep)
			if len(out) != cut {
				t.Fatalf("%s cut at %d: length %d", sh.name, cut, len(out))
			}
			if l := survivors(out, 6); len(l) > 0 {
				t.Fatalf("%s cut at %d: %v survived in %s", sh.name, cut, l, clip(out))
			}
		}
	}
}

// TestBodyCuts: a body cut (a truncated capture) or with bytes lost keeps
// no planted value.
func TestBodyCuts(t *testing.T) {
	s := NewSecrets()
	for _, sh := range shapes(t) {
		step := max(1, len(sh.body)/97)
		for cut := 1; cut < len(sh.body); cut += step {
			for _, gap := range []bool{false, true} {
				var out []byte
				emit := func(p []byte) { out = append(out, p...) }
				var rep Report
				bd := s.NewBody(BodyOptions{ContentType: sh.ct, AssumeSecret: sh.assume}, &rep)
				bd.Write(sh.body[:cut], emit)
				if gap {
					bd.Gap(10, emit)
					if cut+10 < len(sh.body) {
						bd.Write(sh.body[cut+10:], emit)
					}
				}
				bd.Close(false, emit)
				if l := survivors(out, 6); len(l) > 0 {
					t.Fatalf("%s cut at %d (gap %v): %v survived in %s", sh.name, cut, gap, l, clip(out))
				}
			}
		}
	}
}

// TestMidstream: a body whose beginning was not captured is replaced.
func TestMidstream(t *testing.T) {
	s := NewSecrets()
	b := js(t, &corev1.SecretList{Items: []corev1.Secret{kindless(plantedSecret("x"))}})
	var rep Report
	out := body(s, BodyOptions{Midstream: true}, b[10:], 4, &rep)
	if len(out) != len(b)-10 || len(survivors(out, 6)) > 0 || rep.Empty() {
		t.Errorf("midstream body: %s", clip(out))
	}
}

func TestTarget(t *testing.T) {
	for _, tt := range []struct {
		in   string
		gone string // "" : unchanged
	}{
		{"/api/v1/pods?watch=true&resourceVersion=5", ""},
		{"/api/v1/namespaces/demo/secrets?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ&limit=500", ""},
		{"/api/v1/pods?access_token=abc123&watch=1", "abc123"},
		{"/api/v1/pods?watch=1&token=" + plantToken, plantToken},
		{"/x?Api%4Bey=v4lue", "v4lue"},
		{"/x?q=Bearer%20abc987", "abc987"},
		{"/x?q=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", "c2lnbmF0dXJl"},
		{"http://user:pw9@host/x", "pw9"},
	} {
		var rep Report
		got := Target(tt.in, &rep)
		switch {
		case len(got) != len(tt.in):
			t.Errorf("Target(%q) = %q: length changed", tt.in, got)
		case tt.gone == "" && (got != tt.in || !rep.Empty()):
			t.Errorf("Target(%q) = %q; want it unchanged", tt.in, got)
		case tt.gone != "" && (strings.Contains(got, tt.gone) || rep.Empty()):
			t.Errorf("Target(%q) = %q keeps %q", tt.in, got, tt.gone)
		}
	}
}

func TestHeaders(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		secret      bool
	}{
		{"Authorization", "Bearer x", true},
		{"X-Custom", "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.sig", true},
		{"X-Forwarded-Auth", "Basic dXNlcjpwYXNz", true},
		{"X-Anything", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", true},
		{"X-Vault-Token", "s.abc", true},
		{"Sec-WebSocket-Protocol", "base64url.bearer.authorization.k8s.io.abc", true},
		{"Content-Type", "application/json", false},
		{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io", false},
		{"User-Agent", "kubectl/v1.33.0 (linux/amd64) kubernetes/abc", false},
		{"Audit-Id", "0f1e2d3c", false},
	} {
		if got := Header(tt.name, tt.value); got.Redacted != tt.secret || tt.secret && got.Value != "" {
			t.Errorf("Header(%q, %q) = %+v; want redacted %v", tt.name, tt.value, got, tt.secret)
		}
	}
}

func clip(b []byte) string {
	if len(b) > 600 {
		return fmt.Sprintf("%q…", b[:600])
	}
	return fmt.Sprintf("%q", b)
}

var _ = scheme.Scheme

// TestHostileJSON: what cannot hide a value behind a valid beginning.
func TestHostileJSON(t *testing.T) {
	s := NewSecrets()
	sec := js(t, plantedSecret("db"))
	for name, b := range map[string][]byte{
		"long-literal":     []byte(`{"kind":"Secret","data":{"k":` + strings.Repeat("1", 100) + plantPassword + `}}`),
		"whitespace-first": append(bytes.Repeat([]byte(" "), maxSniff+10), sec...),
		"bom":              append([]byte("\xef\xbb\xbf"), sec...),
		"escaped-key":      bytes.Replace(sec, []byte(`"data"`), []byte(`"d\u0061ta"`), 1),
	} {
		for _, n := range []int{7, 1 << 20} {
			var rep Report
			out := body(s, BodyOptions{ContentType: "application/json"}, b, n, &rep)
			if len(out) != len(b) || len(survivors(out, 8)) > 0 {
				t.Errorf("%s (pieces of %d): %v survived", name, n, survivors(out, 8))
			}
		}
	}
}
