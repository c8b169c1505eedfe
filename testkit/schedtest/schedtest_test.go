package schedtest_test

import (
	"os"
	"testing"

	"github.com/wtrace/wtrace/testkit/schedtest"
)

// TestRecord records the scenario with the default scheduler and checks
// that every Pod was bound where the package doc says.
func TestRecord(t *testing.T) {
	rec := schedtest.Record(t, schedtest.RecordOptions{})
	want := []string{"node-c", "node-b", "node-a", "node-c", "node-b", "node-c", "node-a", "node-b"}
	for i, b := range rec.Bindings {
		if b.Node != want[i] {
			t.Errorf("pod %s bound to %q; want %s", b.Pod, b.Node, want[i])
		}
	}
	if t.Failed() {
		log, _ := os.ReadFile(rec.Log)
		t.Logf("scheduler log:\n%s", log)
	}
}
