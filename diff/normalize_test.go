package diff

import (
	"bytes"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"reflect"
	"strings"
	"testing"
)

func TestParseIgnore(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"/metadata/labels/x", []string{"metadata", "labels", "x"}, false},
		{"/metadata/annotations/a.b~1c~0d", []string{"metadata", "annotations", "a.b/c~d"}, false},
		{"/spec/containers/0/image", []string{"spec", "containers", "0", "image"}, false},
		{"/a/~2", nil, true},
		{".metadata.labels.x", []string{"metadata", "labels", "x"}, false},
		{`.metadata.annotations["a.b/c"]`, []string{"metadata", "annotations", "a.b/c"}, false},
		{`.metadata.annotations["a]b"].x`, []string{"metadata", "annotations", "a]b", "x"}, false},
		{".status.conditions[*].reason", []string{"status", "conditions", "*", "reason"}, false},
		{".status.conditions[].reason", []string{"status", "conditions", "*", "reason"}, false},
		{".spec.containers[0].image", []string{"spec", "containers", "0", "image"}, false},
		{".metadata.*", []string{"metadata", "*"}, false},
		{".a..b", nil, true},
		{".a[x]", nil, true},
		{".a[", nil, true},
		{`.a["x]`, nil, true},
		{"metadata.labels", nil, true},
		{"", nil, true},
		{"/", nil, true},
		{".", nil, true},
	} {
		got, err := parseIgnore(tc.in)
		if (err != nil) != tc.err || (err == nil && !reflect.DeepEqual([]string(got), tc.want)) {
			t.Errorf("parseIgnore(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrIgnorePath) {
			t.Errorf("parseIgnore(%q): error %v does not wrap ErrIgnorePath", tc.in, err)
		}
	}
}

// TestNormalize: pairs of documents, the same or not after
// normalization; the canonical hash and the rendered tree must agree.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   string
		ignore []string
		same   bool
	}{
		{"member order", `{"a":1,"b":{"c":[1,2],"d":"x"}}`, `{"b":{"d":"x","c":[1,2]},"a":1}`, nil, true},
		{"whitespace", `{"a": [1, 2]}`, "{\"a\":[1,2]}\n", nil, true},
		{"escapes", `{"a":"\u00e9\/"}`, `{"a":"é/"}`, nil, true},
		{"element order", `{"a":[1,2]}`, `{"a":[2,1]}`, nil, false},
		{"number text", `{"a":1.0}`, `{"a":1}`, nil, false},
		{"value", `{"a":"x"}`, `{"a":"y"}`, nil, false},
		{"null and absent", `{"a":null}`, `{}`, nil, false},
		{"metadata", `{"metadata":{"name":"x","resourceVersion":"1","uid":"u1","generation":3,"managedFields":[{"a":1}],"creationTimestamp":"2026-01-01T00:00:00Z"}}`,
			`{"metadata":{"name":"x","resourceVersion":"2","uid":"u2","generation":4,"creationTimestamp":"2027-01-01T00:00:00Z"}}`, nil, true},
		{"generation outside metadata", `{"spec":{"generation":1}}`, `{"spec":{"generation":2}}`, nil, false},
		{"owner uid", `{"metadata":{"ownerReferences":[{"name":"o","uid":"1"}]}}`, `{"metadata":{"ownerReferences":[{"name":"o","uid":"2"}]}}`, nil, true},
		{"timestamps", `{"status":{"conditions":[{"type":"Ready","lastTransitionTime":"2026-01-01T00:00:00Z","lastProbeTime":null}],"startedAt":"2026-01-01T00:00:00Z"}}`,
			`{"status":{"conditions":[{"type":"Ready","lastTransitionTime":"2026-02-01T10:00:00Z"}],"startedAt":"2026-03-01T00:00:00.5Z"}}`, nil, true},
		{"timestamp set or not", `{"status":{"lastProbeTime":null}}`, `{"status":{"lastProbeTime":"2026-02-01T10:00:00Z"}}`, nil, false},
		{"timestamp present or not", `{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}}`, `{"metadata":{}}`, nil, false},
		{"not a time", `{"spec":{"startTime":"soon"}}`, `{"spec":{"startTime":"later"}}`, nil, false},
		{"redacted", `{"stringData":{"k":"redacted-0123456789abcdefredacted-01"}}`, `{"stringData":{"k":"redacted-fedcba9876543210redacted-fe"}}`, nil, true},
		{"redacted, another length", `{"stringData":{"k":"redacted-0123456789abcdefredacted-01"}}`, `{"stringData":{"k":"redacted-fedcba9876543210redacted-f"}}`, nil, false},
		{"redacted base64", `{"data":{"k":"` + b64("redacted-0123456789abcdefred") + `"}}`, `{"data":{"k":"` + b64("redacted-aaaaaaaaaaaaaaaared") + `"}}`, nil, true},
		{"not a placeholder", `{"data":{"k":"redacted-0123456789abcdefXX"}}`, `{"data":{"k":"redacted-aaaaaaaaaaaaaaaaXX"}}`, nil, false},
		{"ignored label", `{"metadata":{"labels":{"x":"1","y":"2"}}}`, `{"metadata":{"labels":{"y":"2"}}}`, []string{".metadata.labels.x"}, true},
		{"ignored elsewhere", `{"metadata":{"labels":{"x":"1","y":"2"}}}`, `{"metadata":{"labels":{"y":"3"}}}`, []string{".metadata.labels.x"}, false},
		{"ignored element", `{"a":[1,2,3]}`, `{"a":[1,5,3]}`, []string{"/a/1"}, true},
		{"ignored wildcard", `{"s":{"c":[{"r":"a","t":1},{"r":"b","t":2}]}}`, `{"s":{"c":[{"r":"x","t":1},{"r":"y","t":2}]}}`, []string{".s.c[*].r"}, true},
		{"list items", `{"kind":"List","items":[{"metadata":{"labels":{"x":"1"}}},{"metadata":{"labels":{"x":"2"}}}]}`,
			`{"kind":"List","items":[{"metadata":{"labels":{"x":"3"}}},{"metadata":{"labels":{}}}]}`, []string{".metadata.labels.x"}, true},
		{"not in nested items", `{"spec":{"items":[{"x":1}]}}`, `{"spec":{"items":[{"x":2}]}}`, []string{".x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRules(tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			h := newHasher(r, maphash.MakeSeed())
			ha, err := h.sum([]byte(tc.a))
			if err != nil {
				t.Fatalf("sum(%s): %v", tc.a, err)
			}
			hb, err := h.sum([]byte(tc.b))
			if err != nil {
				t.Fatalf("sum(%s): %v", tc.b, err)
			}
			ta, err := r.tree([]byte(tc.a), nil)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := r.tree([]byte(tc.b), nil)
			if err != nil {
				t.Fatal(err)
			}
			ra, rb := render(ta), render(tb)
			if (ha == hb) != tc.same || bytes.Equal(ra, rb) != tc.same {
				t.Errorf("same by hash %v, by tree %v; want %v\n%s\n%s", ha == hb, bytes.Equal(ra, rb), tc.same, ra, rb)
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestHashErrors(t *testing.T) {
	h := newHasher(&rules{}, maphash.MakeSeed())
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":}`, `[1,]`, `{"a":1}x`, `"abc`, `nul`, `{"a":1,}`, `@`, strings.Repeat("[", maxDepth+1)} {
		if _, err := h.sum([]byte(in)); err == nil {
			t.Errorf("sum(%.20q) = nil error; want one", in)
		}
	}
}

func TestUnified(t *testing.T) {
	// Changes 7 lines apart make two hunks (6 apart would share one,
	// as with diff -u).
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	b := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\n"
	want := `--- A
+++ B
@@ -1,7 +1,7 @@
 a
 b
 c
-d
+D
 e
 f
 g
@@ -9,3 +9,4 @@
 i
 j
 k
+l
`
	if got := unified([]byte(a), []byte(b), "A", "B"); got != want {
		t.Errorf("unified =\n%s\nwant\n%s", got, want)
	}
	if got := unified([]byte(a), []byte(a), "A", "B"); got != "" {
		t.Errorf("unified of equal texts = %q", got)
	}
	if got := unified(nil, []byte("x\n"), "A", "B"); got != "--- A\n+++ B\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("unified from nothing = %q", got)
	}
	// Far apart beyond the edit limit: replaced whole, and cut.
	var la, lb []string
	for i := 0; i < 2*maxEditDistance; i++ {
		la = append(la, "a")
		lb = append(lb, "b")
	}
	got := unified([]byte(strings.Join(la, "\n")), []byte(strings.Join(lb, "\n")), "A", "B")
	if !strings.Contains(got, "-a\n") || !strings.Contains(got, "more diff lines") || strings.Count(got, "\n") > maxDiffLines+4 {
		t.Errorf("unified of different texts: %d lines, ends %q", strings.Count(got, "\n"), got[len(got)-40:])
	}
}
