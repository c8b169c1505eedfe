package diff

import (
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/testkit/k8stest"
)

// TestReading: diff reads a recorded request as the apiserver served it
// (apipath.Parse, checked against kube-apiserver by
// TestParseAgainstAPIServer), the requests whose reading once differed
// between packages included: a watch, which object it names, its key.
func TestReading(t *testing.T) {
	for _, tc := range k8stest.ReadingTargets {
		r, err := apipath.Parse(tc.Method, tc.Target)
		if err != nil {
			t.Fatal(err)
		}
		q := parseRequest(&formats.Request{Method: tc.Method, Target: tc.Target})
		if q.watch != r.Watch || q.key != r.Key || q.obj.Name != r.Name || q.path != r.Path {
			t.Errorf("parseRequest(%s %s) = watch %v, key %q, name %q; apipath reads watch %v, key %q, name %q",
				tc.Method, tc.Target, q.watch, q.key, q.obj.Name, r.Watch, r.Key, r.Name)
		}
	}
}
