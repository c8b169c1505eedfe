package redact

import (
	"strings"
	"testing"
)

// TestListed: listed is the allocation-free form of the check it replaced.
func TestListed(t *testing.T) {
	fields := []string{"", "a", "a, b", "data.x, data.y", "x, y, z", "ab, b", "a, , b", ", a", "a, "}
	probes := []string{"a", "b", "ab", "data.x", "data.y", "x, y", "y", "z", ", ", "a, b", " b", "a,", "data"}
	for _, f := range fields {
		for _, p := range probes {
			want := strings.Contains(", "+f+", ", ", "+p+", ")
			if got := listed(f, p); got != want {
				t.Errorf("listed(%q, %q) = %v; want %v", f, p, got, want)
			}
		}
	}
}

// TestReportReset: a Report reset for reuse reports only what was added
// after.
func TestReportReset(t *testing.T) {
	var r Report
	r.add(1, "Secret ns/a", "data.x", 1, 5)
	r.fail(3, 4, "bad")
	r.Reset()
	if !r.Empty() || len(r.Lengths()) != 0 || len(r.failures) != 0 {
		t.Fatalf("after Reset: %+v", r)
	}
	r.add(1, "Secret ns/b", "data.y", 1, 7)
	if got := r.Redactions(); len(got) != 1 || got[0].Object != "Secret ns/b" || got[0].Fields != "data.y" || got[0].Count != 1 || got[0].Bytes != 7 {
		t.Fatalf("after Reset and add: %+v", got)
	}
}

// TestObjectNameBytes: both forms name objects alike.
func TestObjectNameBytes(t *testing.T) {
	for _, tc := range [][3]string{{"Secret", "ns", "a"}, {"Secret", "", "a"}, {"", "ns", "a"}, {"Secret", "ns", ""}, {"", "", ""}} {
		if got, want := objectNameBytes(tc[0], []byte(tc[1]), []byte(tc[2])), objectName(tc[0], tc[1], tc[2]); got != want {
			t.Errorf("objectNameBytes%q = %q; want %q", tc, got, want)
		}
	}
}
