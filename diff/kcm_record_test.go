package diff_test

import (
	"flag"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/kcmtest"
	"github.com/wtrace/wtrace/testkit/schedtest"
)

var rerecord = flag.Bool("rerecord", false, "record the sessions of testdata/kcm anew, from a real kube-apiserver and kube-controller-manager (a few minutes; see testdata/kcm/README.md)")

// kcmDir holds the real recordings of kube-controller-manager and of
// testkit/ctrltest that the verdict's tests compare.
var kcmDir = filepath.Join("testdata", "kcm")

// kcmRecordings are the recordings of kube-controller-manager in
// testdata/kcm: each the default scenario of testkit/kcmtest, with these
// controllers, each in a new apiserver.
var kcmRecordings = []struct {
	file        string
	controllers []string
	steps       func() []kcmtest.Step
}{
	{"rs-1.wt", []string{"deployment", "replicaset"}, kcmtest.DefaultSteps},
	{"rs-2.wt", []string{"deployment", "replicaset"}, kcmtest.DefaultSteps},
	{"deployment-only.wt", []string{"deployment"}, kcmtest.DefaultSteps},
	{"gc-1.wt", []string{"deployment", "replicaset", "garbagecollector", "namespace"}, kcmtest.DefaultSteps},
	{"gc-2.wt", []string{"deployment", "replicaset", "garbagecollector", "namespace"}, kcmtest.DefaultSteps},
	{"gc-nsdelete.wt", []string{"deployment", "replicaset", "garbagecollector", "namespace"}, nsDeleteSteps},
}

// workloadRecordings are the recordings of kube-controller-manager's
// workload controllers in testdata/kcm: the workloads scenario of
// testkit/kcmtest, with these controllers.
var workloadRecordings = []struct {
	file        string
	controllers []string
}{
	{"workloads-1.wt", kcmtest.WorkloadControllers}, {"workloads-2.wt", kcmtest.WorkloadControllers},
}

// schedDir holds the real recordings of kube-scheduler: each the
// scenario of testkit/schedtest, in a new apiserver, with the scheduler's
// default profile or MostAllocated scoring.
var schedDir = filepath.Join("testdata", "scheduler")

var schedRecordings = []struct{ file, profile string }{
	{"default-1.wt", ""}, {"default-2.wt", ""}, {"most.wt", schedtest.MostAllocated},
}

// nsDeleteSteps is the default scenario, then the namespace deleted (what
// the namespace controller acts on: namespaces/NAME/status and /finalize,
// a DELETE of every resource's collection). Two recordings of it are not
// the same: while the namespace terminates, the deployment controller's
// ReplicaSet creates are refused (403) or not, and the garbage collector
// deletes ReplicaSets one by one or the namespace controller deletes the
// collection, as the race goes.
func nsDeleteSteps() []kcmtest.Step {
	return append(kcmtest.DefaultSteps(), kcmtest.Step{Op: kcmtest.DeleteNamespace, Name: kcmtest.Namespace})
}

// TestRecordKCM, with -rerecord, records the sessions of testdata/kcm
// anew (the binaries are needed): kcmRecordings, and two recordings of
// testkit/ctrltest's scenario (recordController) whose controllers differ
// in the value of one annotation of one ConfigMap. Without -rerecord it
// is skipped: the recordings are committed once, and the tests compare
// them.
func TestRecordKCM(t *testing.T) {
	if !*rerecord {
		t.Skip("records testdata/kcm anew only with -rerecord")
	}
	for _, r := range kcmRecordings {
		t.Run(r.file, func(t *testing.T) {
			rec := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: r.controllers, Scenario: kcmtest.Options{Steps: r.steps()}})
			for _, res := range rec.Results {
				t.Logf("%s: converged %v", res.Step, res.Converged)
			}
			copyFile(t, rec.Path, filepath.Join(kcmDir, r.file))
		})
	}
	for _, r := range workloadRecordings {
		t.Run(r.file, func(t *testing.T) {
			rec := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: r.controllers, Workloads: &kcmtest.WorkloadOptions{}})
			for _, res := range rec.Workloads {
				t.Logf("%s: done %v", res.Step, res.Done)
			}
			copyFile(t, rec.Path, filepath.Join(kcmDir, r.file))
		})
	}
	for _, r := range schedRecordings {
		t.Run("scheduler/"+r.file, func(t *testing.T) {
			rec := schedtest.Record(t, schedtest.RecordOptions{Profile: r.profile})
			t.Logf("bindings: %v", rec.Bindings)
			copyFile(t, rec.Path, filepath.Join(schedDir, r.file))
		})
	}
	for _, r := range []struct {
		file string
		seen func(*corev1.ConfigMap) string
	}{
		{"ctl-seen.wt", seen},
		{"ctl-changed.wt", func(cm *corev1.ConfigMap) string {
			if cm.Name == "cm-1" {
				return "new-build"
			}
			return seen(cm)
		}},
	} {
		t.Run(r.file, func(t *testing.T) {
			session := recordControllerWith(t, k8stest.Start(t), ctrltest.Options{SeenValue: r.seen})
			copyFile(t, session, filepath.Join(kcmDir, r.file))
		})
	}
}
