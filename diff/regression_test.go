package diff_test

import (
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/diff/difftest"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestRegressionSuite is the README's "Regression suite", as written
// there: a session recorded through `wtrace record --proxy` in front of a
// real kube-apiserver while the controller ran (testdata/controller.wt:
// TestControllerRegression's recording; go test ./diff -update records
// it again), replayed to the controller under test, fails the test when
// a write changed. testkit/ctrltest is the controller here; the README
// says where yours goes.
func TestRegressionSuite(t *testing.T) {
	const recorded = "testdata/controller.wt"
	run := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, run) // the run, as a session
	srv := replaytest.NewServer(t, recorded, replay.Options{
		Speed: 1,   // at the recorded pace: the events come when they came
		Out:   rec, // everything the controller sends and gets, into run
	})

	ctl := startController(t, srv.URL, ctrltest.Options{SeenValue: seen}) // the build under test
	settled(t, ctl)                                                       // it saw the recording's end, and went quiet

	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	difftest.Same(t, recorded, run, diff.Options{
		Only:            []diff.Category{diff.CategoryWrite}, // its writes
		CollapseRepeats: true,                                // each distinct one
	})

	// Not in the README: the committed session holds no credential.
	wttest.CheckNoSecrets(t, recorded, k8stest.Token)
}
