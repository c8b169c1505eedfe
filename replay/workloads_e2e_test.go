package replay_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/kcmtest"
)

// workloadsSession is the real recording of kube-controller-manager's
// job, statefulset, daemonset, endpointslice and disruption controllers
// the tests replay (kcmtest's workloads scenario, the test playing the
// kubelets; diff/testdata/kcm, recorded by diff's TestRecordKCM
// -rerecord).
var workloadsSession = filepath.Join("..", "diff", "testdata", "kcm", "workloads-1.wt")

// TestWorkloadsReplay: the recording replayed to the same controllers,
// paced by quiet (each change once kcm is quiet and has made the writes
// the recording shows before it — the job controller syncs a Job a
// second after its Pods changed — or once its recorded gap has passed)
// and at the recorded pace: no environment change dropped (the kubelets' status
// writes follow the run's Pods, a DaemonSet's by their node, an indexed
// Job's by their completion index), and the run is judged the same.
func TestWorkloadsReplay(t *testing.T) {
	k8stest.ControllerManagerBinary(t)
	for _, tc := range []struct {
		name string
		opts replay.Options
	}{
		{"pace quiet", replay.Options{Pace: replay.PaceQuiet}},
		{"speed 1", replay.Options{Speed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runKCM(t, workloadsSession, kcmtest.WorkloadControllers, tc.opts)
			rep, err := diff.Sessions(workloadsSession, run, diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Same {
				var b strings.Builder
				rep.WriteText(&b, diff.TextOptions{})
				t.Errorf("wtrace diff recorded run: not the same\n%s", b.String())
			}
		})
	}
}

// TestWorkloadsReplayWithoutJobs: the same recording replayed to kcm
// without its job controller. The diff lists what the job controller did
// — its Pod creates, the Pods' finalizer patches, the Jobs' status writes,
// its Events — and nothing else.
func TestWorkloadsReplayWithoutJobs(t *testing.T) {
	k8stest.ControllerManagerBinary(t)
	noJob := []string{"statefulset", "daemonset", "endpointslice", "disruption"}
	run := runKCM(t, workloadsSession, noJob, replay.Options{Pace: replay.PaceQuiet})
	checkJobsMissing(t, workloadsSession, run)
}

// checkJobsMissing fails t unless the diff of a (with the job
// controller) and b (without) is missing exactly what the job controller
// writes: Pod creates of the Jobs' Pods (and nothing else of them but
// their end state and the writes that follow: finalizer patches), the
// Jobs' status writes, the job controller's Events.
func checkJobsMissing(t *testing.T, a, b string) {
	t.Helper()
	rep, err := diff.Sessions(a, b, diff.Options{MaxDifferences: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatal("the run without the job controller is judged the same as the recording")
	}
	podCreates, jobStatus := 0, 0
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category != diff.CategoryWrite && d.Category != diff.CategoryState {
				continue
			}
			o := g.Object
			switch {
			case d.Kind != diff.KindMissing:
				t.Errorf("not a missing write: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			case o == nil:
				t.Errorf("a difference of no object: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			case o.Resource == "pods" && (strings.HasPrefix(o.Name, "pi-") || strings.HasPrefix(o.Name, "idx-")):
				if d.Category == diff.CategoryWrite && d.What == "POST" {
					podCreates++
				}
			case o.Resource == "jobs" && o.Group == "batch":
				if d.Category == diff.CategoryWrite && o.Subresource == "status" {
					jobStatus++
				}
			case o.Resource == "events" && strings.Contains(o.Event, " Job "):
			default:
				t.Errorf("a difference the job controller does not explain: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			}
		}
	}
	if podCreates != 4 || jobStatus == 0 {
		t.Errorf("%d Pod creates and %d Job status writes missing; want 4 (2 per Job) and some", podCreates, jobStatus)
	}
}
