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

// TestStable: a run must reproduce the coverage table but for what "What
// differs" says of each cell after naming it.
func TestStable(t *testing.T) {
	a := "# T\n\n| r | same |\n\n## What differs\n\n- v1 x watch (differs): bookmarks: body differs at 3.object.\n"
	b := "# T\n\n| r | same |\n\n## What differs\n\n- v1 x watch (differs): expired resourceVersion: body differs at (the whole body).\n"
	c := "# T\n\n| r | differs |\n\n## What differs\n\n- v1 x watch (differs): bookmarks: body differs at 3.object.\n"
	d := "# T\n\n| r | same |\n\n## What differs\n\n- v1 x list (differs): bookmarks: body differs at 3.object.\n"
	if stable(a) != stable(b) {
		t.Errorf("the details of a differing cell count")
	}
	if stable(a) == stable(c) || stable(a) == stable(d) {
		t.Errorf("a changed grid or a changed cell does not count")
	}
}
