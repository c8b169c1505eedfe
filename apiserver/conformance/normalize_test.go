package conformance

import "testing"

// TestGoValues: what a message prints of Go values is compared by type
// name; the rest of the message as it is.
func TestGoValues(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Invalid value: core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:\"\"}, Spec:core.PodSpec{X:[]core.Volume(nil)}}: field is immutable",
			"Invalid value: <PodTemplateSpec>: field is immutable"},
		{"Invalid value: v1.PodTemplateSpec{Spec:v1.PodSpec{}}: field is immutable", "Invalid value: <PodTemplateSpec>: field is immutable"},
		{"may not change (negative)\n  core.PodSpec{\n- \tVolumes: []core.Volume{\n- \t},\n+ \tVolumes: nil,\n  }\n",
			"may not change (negative)\n<diff of PodSpec>"},
		{"may not change (negative)\n\u00a0\u00a0core.PodSpec{\n-\u00a0\tVolumes: nil,\n\u00a0\u00a0}\n", "may not change (negative)\n<diff of PodSpec>"},
		{"may not change (negative)\n  v1.PodSpec{\n- \tVolumes: nil,\n  }\n", "may not change (negative)\n<diff of PodSpec>"},
		{"Invalid value: v1.ObjectMeta{Name:\"a\", Labels:map[string]string{\"a\":\"1\"}}: must be empty", "Invalid value: <ObjectMeta>: must be empty"},
		{"plain message {with braces}", "plain message {with braces}"},
		{"unclosed core.PodSpec{Volumes", "unclosed core.PodSpec{Volumes"},
	} {
		if got := goValues(c.in); got != c.want {
			t.Errorf("goValues(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
