package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kcbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// The values the quoted manifests below hold.
const (
	qPlain = "quoted-plain-4f1c9e"    // stringData
	qData  = "quoted-password-8b2d7a" // data, base64 in JSON
)

var qData64 = base64.StdEncoding.EncodeToString([]byte(qData))

func quotedLeaks(b []byte) []string {
	var out []string
	for _, v := range []string{qPlain, qData, qData64} {
		if bytes.Contains(b, []byte(v)) {
			out = append(out, v)
		}
	}
	return out
}

// quotedSecretJSON is a Secret manifest as kubectl and admission errors
// print it.
func quotedSecretJSON() string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "db", "namespace": "demo"}, "type": "Opaque",
		"data": map[string]string{"password": qData64}, "stringData": map[string]string{"plain": qPlain}})
	return string(b)
}

// quotedMessages are Event messages that quote a Secret manifest, and
// how each is redacted: in place (the JSON parses), or replaced whole
// (fail closed: the manifest is not JSON, or is cut).
var quotedMessages = []struct {
	name  string
	msg   string
	whole bool
}{
	{"admission", `admission webhook "deny.example.com" denied the request: ` + quotedSecretJSON(), false},
	// kubectl apply's report of a patch that failed: the patch has no
	// kind (it is the Secret's: the text names the kind Secret), and
	// its last-applied-configuration quotes the manifest once more.
	{"apply", "error when applying patch:\n" + `{"data":{"password":"` + qData64 + `"},"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":` +
		jsonString(quotedSecretJSON()+"\n") + `}},"stringData":{"plain":"` + qPlain + `"}}` +
		"\nto:\nResource: \"/v1, Resource=secrets\", GroupVersionKind: \"/v1, Kind=Secret\"\nName: \"db\", Namespace: \"demo\"\nfor: \"db.yaml\": error when patching \"db.yaml\": Timeout", false},
	{"json-patch", `failed to patch Secret demo/db with [{"op":"replace","path":"/data/password","value":"` + qData64 + `"}] (Kind=Secret): conflict`, false},
	{"yaml", "failed to apply manifest:\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + qPlain + "\n", true},
	{"cut", "admission webhook denied: " + quotedSecretJSON()[:len(quotedSecretJSON())-40], true},
	{"escaped-kind", "apiVersion: v1\nkind: \"\\x53ecret\"\ndata:\n  password: " + qData64 + "\n", true},
	{"go-value", "cannot update &Secret{ObjectMeta:{db demo 0 } Data:map[string][]byte{password: " + qData + "}}", true},
	{"quoted-twice", "failed: " + jsonString(`{"message":`+jsonString("kind: Secret\nstringData:\n  p: "+qPlain)+`}`), true},
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func quotedEvent(t *testing.T, msg string) []byte {
	t.Helper()
	return jsonEvent(t, "ADDED", &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:     metav1.ObjectMeta{Name: "db.17f", Namespace: "demo", ResourceVersion: "9"},
		InvolvedObject: corev1.ObjectReference{Kind: "Secret", Namespace: "demo", Name: "db"},
		Reason:         "FailedApply", Message: msg, Type: "Warning"})
}

// TestQuotedSecret: an Event whose message quotes a Secret manifest keeps
// none of its values — JSON quoted in the message redacted in place, the
// event's length and JSON validity kept; a manifest that cannot be
// parsed (YAML, cut short, spelled with escapes, Go's %v) replaces the
// whole message — in watch events, and in bodies streamed a byte at a
// time.
func TestQuotedSecret(t *testing.T) {
	s := NewSecrets()
	for _, tc := range quotedMessages {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.msg, qPlain) && !strings.Contains(tc.msg, qData) && !strings.Contains(tc.msg, qData64) {
				t.Fatalf("the message holds no planted value: %s", tc.msg)
			}
			ev := quotedEvent(t, tc.msg)
			var rep Report
			out := s.Event(frame.JSON, ev, &rep)
			checkQuoted(t, ev, out, &rep, tc.whole)
			for _, n := range []int{1, 7, len(ev)} {
				var brep Report
				got := body(s, BodyOptions{ContentType: "application/json"}, ev, n, &brep)
				if l := quotedLeaks(got); len(l) > 0 || len(got) != len(ev) {
					t.Errorf("Body in pieces of %d: %d bytes, leaked %v", n, len(got), l)
				}
				if n == 1 && !bytes.Equal(got, out) {
					t.Errorf("Body in pieces of 1 differs from Event:\n%s\n%s", got, out)
				}
			}
		})
	}
}

func checkQuoted(t *testing.T, ev, out []byte, rep *Report, whole bool) {
	t.Helper()
	if len(out) != len(ev) {
		t.Fatalf("length %d; want %d", len(out), len(ev))
	}
	if l := quotedLeaks(out); len(l) > 0 {
		t.Fatalf("leaked %v in %s", l, out)
	}
	var got struct {
		Object corev1.Event
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the redacted event is no longer JSON: %v\n%s", err, out)
	}
	if got.Object.Name != "db.17f" || got.Object.Reason != "FailedApply" || got.Object.InvolvedObject.Name != "db" {
		t.Errorf("redaction changed more than the message: %+v", got.Object)
	}
	unparsed := false
	for _, r := range rep.Redactions() {
		unparsed = unparsed || r.Reason == formats.RedactUnparsed
	}
	switch {
	case whole && (!unparsed || strings.Contains(got.Object.Message, "Secret")):
		t.Errorf("message %q, redactions %+v; want it replaced whole (fail closed)", got.Object.Message, rep.Redactions())
	case !whole && (unparsed || !strings.Contains(got.Object.Message, "Secret")):
		t.Errorf("message %q, redactions %+v; want its values replaced in place", got.Object.Message, rep.Redactions())
	}
}

// TestQuotedKept: messages that speak of Secrets without quoting one are
// kept byte for byte.
func TestQuotedKept(t *testing.T) {
	s := NewSecrets()
	for _, msg := range []string{
		`MountVolume.SetUp failed for volume "creds" : secret "db" not found`,
		`Secret demo/db updated`,
		`Error from server (NotFound): secrets "db" not found`,
		`failed to sync secret cache: timed out waiting for the condition`,
		`kind: ConfigMap, data: {"k":"v"}, a kind word, Kind=Deployment`,
		`{"apiVersion":"v1","kind":"ConfigMap","data":{"password":"kept"}}`,
		`GroupVersionKind: "/v1, Kind=SecretProviderClass" {"spec":{"x":"kept"}}`,
	} {
		ev := quotedEvent(t, msg)
		var rep Report
		if out := s.Event(frame.JSON, ev, &rep); !bytes.Equal(out, ev) || !rep.Empty() {
			t.Errorf("message %q changed: %s (%+v)", msg, out, rep.Redactions())
		}
	}
}

// TestQuotedDepth: quoting nested past maxQuotedDepth fails closed.
func TestQuotedDepth(t *testing.T) {
	v := `{"kind":"Secret","stringData":{"p":"` + qPlain + `"}}`
	for range maxQuotedDepth + 2 {
		v = fmt.Sprintf(`{"message":%s}`, jsonString(v))
	}
	var rep Report
	out := NewSecrets().Event(frame.JSON, []byte(v), &rep)
	if l := quotedLeaks(out); len(l) > 0 || len(out) != len(v) {
		t.Fatalf("leaked %v (%d bytes of %d)", l, len(out), len(v))
	}
}

func TestSecretMentions(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{`"kind":"Secret"`, 1},
		{`kind: Secret`, 1},
		{`\"kind\": \"SecretList\"`, 1},
		{`GroupVersionKind: "/v1, Kind=Secret"`, 0},
		{`TypeMeta:{Kind:Secret APIVersion:v1}`, 1},
		{`kind: \u0053ecret`, 1},
		{`kind: "\\x53ecret"`, 1},
		{`&Secret{ObjectMeta:{}}`, 1},
		{`kind: SecretProviderClass`, 0},
		{`subkind: Secret`, 0},
		{`kind Secret`, 0},
		{`secret "db" not found`, 0},
		{`MySecret{}`, 0},
	} {
		if got := len(secretMentions([]byte(tt.text))); got != tt.want {
			t.Errorf("secretMentions(%q) = %d; want %d", tt.text, got, tt.want)
		}
	}
}

func TestUnquoteRequote(t *testing.T) {
	for _, s := range []string{"plain", `a"b\c`, "tab\there\n", "é ü 😀", "\u2028", string([]byte{0x7f})} {
		raw := []byte(jsonString(s))
		raw = raw[1 : len(raw)-1]
		text, at := unquote(raw)
		if string(text) != s {
			t.Errorf("unquote(%q) = %q; want %q", raw, text, s)
		}
		out := bytes.Clone(text)
		for i := range out {
			out[i] = 'x'
		}
		got := bytes.Clone(raw)
		requote(got, text, out, at)
		if len(got) != len(raw) || bytes.ContainsAny(got, `"\`) && at != nil {
			t.Errorf("requote(%q) = %q", raw, got)
		}
	}
	// A lone surrogate, as encoding/json decodes it.
	if text, _ := unquote([]byte(`\ud800x`)); string(text) != "\ufffdx" {
		t.Errorf("unquote(lone surrogate) = %q", text)
	}
}

// TestQuotedSecretEncodings: the same Events as watch events in protobuf
// (a typed message: the message field found without its schema) and
// CBOR (apimachinery's own serializers) keep none of the values either:
// in place where the quoted JSON parses, the field filled where not.
func TestQuotedSecretEncodings(t *testing.T) {
	s := NewSecrets()
	cs := kcbor.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, tc := range quotedMessages {
		ev := &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
			ObjectMeta:     metav1.ObjectMeta{Name: "db.17f", Namespace: "demo", ResourceVersion: "9"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "web"},
			Reason:         "FailedApply", Message: tc.msg, Type: "Warning"}
		var cb bytes.Buffer
		if err := cs.Encode(ev, &cb); err != nil {
			t.Fatal(err)
		}
		for _, enc := range []struct {
			f    frame.Format
			data []byte
		}{{frame.Protobuf, protoEvent(t, "ADDED", ev)}, {frame.CBOR, cb.Bytes()}} {
			t.Run(tc.name+"/"+enc.f.String(), func(t *testing.T) {
				var rep Report
				out := s.Event(enc.f, enc.data, &rep)
				if l := quotedLeaks(out); len(l) > 0 || len(out) != len(enc.data) {
					t.Fatalf("%d bytes of %d, leaked %v", len(out), len(enc.data), l)
				}
				var got corev1.Event
				if enc.f == frame.CBOR {
					if _, _, err := cs.Decode(out, nil, &got); err != nil {
						t.Fatalf("the redacted event no longer decodes: %v", err)
					}
				} else {
					var we metav1.WatchEvent
					if err := we.Unmarshal(out); err != nil {
						t.Fatalf("the redacted event no longer decodes: %v", err)
					}
					if _, _, err := protoSerializer().Decode(we.Object.Raw, nil, &got); err != nil {
						t.Fatalf("the redacted object no longer decodes: %v", err)
					}
				}
				if got.Name != "db.17f" || got.InvolvedObject.Name != "web" || got.Reason != "FailedApply" {
					t.Errorf("redaction changed more than the message: %+v", got)
				}
				if inPlace := strings.Contains(got.Message, "Secret"); inPlace == tc.whole {
					t.Errorf("message %q; want it replaced %s", got.Message, map[bool]string{true: "whole", false: "in place"}[tc.whole])
				}
			})
		}
	}
}

// TestTextBodies: a Secret's JSON served as text/plain (through a
// service's proxy) is judged as JSON; a log's lines are kept, its JSON
// lines walked, a line whose value does not parse replaced to its end
// only if it may hold a credential — streamed in pieces of any size.
func TestTextBodies(t *testing.T) {
	s := NewSecrets()
	secret := quotedSecretJSON()
	var pretty bytes.Buffer
	json.Indent(&pretty, []byte(secret), "", "  ")
	cut := strings.Index(secret, `"password":`) + len(`"password":`)
	for _, tc := range []struct {
		name, body string
		kept       bool // byte for byte, nothing reported
		unparsed   bool // a fail-closed region reported
	}{
		{"secret", secret, false, false},
		{"pretty secret", pretty.String() + "\n", false, false},
		{"secret list", `{"kind":"SecretList","apiVersion":"v1","items":[` + secret + `]}`, false, false},
		{"log", "[INFO] starting\n{\"level\":\"info\",\"msg\":\"ready\"}\n[2024-01-01 12:00:00] ok {not json}\n  {\"a\":1} trailing text\n", true, false},
		{"log with a secret line", "[INFO] dumping\n" + secret + "\n[INFO] done\n", false, false},
		{"broken secret line", "[INFO] dumping\n" + secret[:cut] + " oops " + secret[cut:] + "\n[INFO] done\n", false, true},
		{"html", "<html>\n<script>\n[1,2].map(x => {x})\n</script>\n</html>\n", true, false},
		{"yaml kept as before", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []byte
			for _, n := range []int{1, 5, 64, len(tc.body)} {
				var rep Report
				got := body(s, BodyOptions{ContentType: "text/plain; charset=utf-8"}, []byte(tc.body), n, &rep)
				if len(got) != len(tc.body) {
					t.Fatalf("pieces of %d: %d bytes; want %d", n, len(got), len(tc.body))
				}
				if l := quotedLeaks(got); len(l) > 0 {
					t.Fatalf("pieces of %d: leaked %v in %s", n, l, got)
				}
				if tc.kept && (string(got) != tc.body || !rep.Empty()) {
					t.Errorf("pieces of %d: changed:\n%s\n%+v", n, got, rep.Redactions())
				}
				fails, _ := rep.Failures()
				if (len(fails) > 0) != tc.unparsed {
					t.Errorf("pieces of %d: failures %+v; want some: %v", n, fails, tc.unparsed)
				}
				if first == nil {
					first = got
				} else if !bytes.Equal(got, first) {
					t.Errorf("pieces of %d differ from pieces of 1:\n%s\n%s", n, got, first)
				}
			}
			if strings.Contains(tc.name, "line") && !strings.Contains(string(first), "[INFO] done\n") {
				t.Errorf("the lines after the JSON are not kept: %s", first)
			}
		})
	}
}

// TestQuotedSecretProtobufBody: a LIST of Events answered in protobuf
// (a typed list, read an item at a time) keeps none of the quoted values,
// in pieces of any size, and still decodes; a list that quotes nothing
// is kept byte for byte.
func TestQuotedSecretProtobufBody(t *testing.T) {
	s := NewSecrets()
	list := func(msgs []string) []byte {
		l := &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "30"}}
		for i, m := range msgs {
			l.Items = append(l.Items, corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e.%d", i), Namespace: "demo"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Reason: "Failed", Message: m})
		}
		var b bytes.Buffer
		if err := protoSerializer().Encode(l, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var msgs []string
	for _, tc := range quotedMessages {
		msgs = append(msgs, tc.msg)
	}
	quoting := list(msgs)
	plain := list([]string{`Back-off restarting failed container`, `secret "db" not found`, strings.Repeat("x", 5000)})
	for _, n := range []int{1, 100, len(quoting)} {
		var rep Report
		out := body(s, BodyOptions{ContentType: "application/vnd.kubernetes.protobuf"}, quoting, n, &rep)
		if l := quotedLeaks(out); len(l) > 0 || len(out) != len(quoting) {
			t.Fatalf("pieces of %d: %d bytes of %d, leaked %v", n, len(out), len(quoting), l)
		}
		var got corev1.EventList
		if _, _, err := protoSerializer().Decode(out, nil, &got); err != nil || len(got.Items) != len(msgs) {
			t.Fatalf("pieces of %d: the redacted list does not decode: %v (%d items)", n, err, len(got.Items))
		}
		for i, tc := range quotedMessages {
			if inPlace := strings.Contains(got.Items[i].Message, "Secret"); inPlace == tc.whole {
				t.Errorf("pieces of %d: %s: message %q", n, tc.name, got.Items[i].Message)
			}
		}
		var prep Report
		if out := body(s, BodyOptions{ContentType: "application/vnd.kubernetes.protobuf"}, plain, n, &prep); !bytes.Equal(out, plain) || !prep.Empty() {
			t.Errorf("pieces of %d: a list quoting nothing changed (%+v)", n, prep.Redactions())
		}
	}
}
