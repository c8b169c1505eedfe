package kcmtest_test

import (
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/kcmtest"
)

// TestRecord records the default scenario with kcm's deployment and
// replicaset controllers, and with the deployment controller alone (an
// apiserver each), and checks which steps converged and how many Pods kcm
// created:
// with both, every step but the delete (no garbage collector removes the
// ReplicaSet and its Pods); with the deployment controller alone, no
// step that needs Pods — the scenario goes on all the same.
func TestRecord(t *testing.T) {
	for _, tc := range []struct {
		name        string
		controllers []string
		pods        int // Pod creates: 2+2+2, 3 more for the scale, 1 for the new image
		converged   map[kcmtest.Op]bool
	}{
		{"deployment,replicaset", []string{"deployment", "replicaset"}, 10, map[kcmtest.Op]bool{
			kcmtest.CreateNamespace: true, kcmtest.CreateServiceAccount: true, kcmtest.CreateDeployment: true,
			kcmtest.Scale: true, kcmtest.SetImage: true, kcmtest.DeleteDeployment: false}},
		{"deployment", []string{"deployment"}, 0, map[kcmtest.Op]bool{
			kcmtest.CreateNamespace: true, kcmtest.CreateServiceAccount: true, kcmtest.CreateDeployment: false,
			kcmtest.Scale: false, kcmtest.SetImage: false, kcmtest.DeleteDeployment: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: tc.controllers})
			for _, r := range rec.Results {
				if r.Converged != tc.converged[r.Step.Op] {
					t.Errorf("%s: converged %v; want %v", r.Step, r.Converged, tc.converged[r.Step.Op])
				}
			}
			f, err := formats.Open(rec.Path, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pods := 0
			for _, x := range f.Index().Exchanges {
				if x.Request.Method == "POST" && strings.HasSuffix(x.Request.Target, "/pods") && x.Response != nil && x.Response.Status == 201 {
					pods++
				}
			}
			if pods != tc.pods {
				t.Errorf("%d Pods created; want %d", pods, tc.pods)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"nginx", "nginx"}, {"nginx:1.27", "nginx"}, {"registry.k8s.io/pause:3.10", "pause"},
		{"localhost:5000/a/b@sha256:00", "b"},
	} {
		if got := kcmtest.ContainerName(tc.image); got != tc.want {
			t.Errorf("ContainerName(%q) = %q; want %q", tc.image, got, tc.want)
		}
	}
}

// TestRecordWorkloads records the workloads scenario with kcm's job,
// statefulset, daemonset, endpointslice and disruption controllers: every
// step is done.
func TestRecordWorkloads(t *testing.T) {
	rec := kcmtest.Record(t, kcmtest.RecordOptions{Workloads: &kcmtest.WorkloadOptions{}})
	for _, r := range rec.Workloads {
		if !r.Done {
			t.Errorf("%s: not done", r.Step)
		}
	}
}
