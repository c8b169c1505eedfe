package diff_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
)

// The verdict on real recordings of kube-controller-manager v1.33.13
// (testdata/kcm, recorded by TestRecordKCM through record --proxy in
// front of a real apiserver): what two runs of one scenario differ in is
// not a difference; what a controller that does less leaves out is
// exactly that.

func kcm(name string) string { return filepath.Join(kcmDir, name) }

// TestKCMSameScenario: two recordings of one scenario are the same, both
// ways, with and without CollapseRepeats — although their Pods and Events
// have other names, their writes met conflicts in other places, and their
// ReplicaSets' status writes repeated themselves differently.
func TestKCMSameScenario(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"rs-1.wt", "rs-2.wt"}, {"rs-2.wt", "rs-1.wt"}, {"gc-1.wt", "gc-2.wt"}, {"gc-2.wt", "gc-1.wt"},
	} {
		for _, collapse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s vs %s collapse %v", tc.a, tc.b, collapse), func(t *testing.T) {
				rep, err := diff.Sessions(kcm(tc.a), kcm(tc.b), diff.Options{CollapseRepeats: collapse})
				if err != nil {
					t.Fatal(err)
				}
				s := rep.Summary
				if !rep.Same || s.State.Compared < 30 || s.Writes.Compared < 50 || len(rep.Pairing) != 10 ||
					rep.Attempts.A+rep.Attempts.B != s.Writes.Attempts || rep.Attempts.A == 0 {
					t.Fatalf("two recordings of one scenario:\n%s", text(rep))
				}
				for _, p := range rep.Pairing {
					if p.A == "" || p.B == "" || p.A == p.B || p.Object.Resource != "pods" || !strings.Contains(p.Object.Name, "-#") {
						t.Errorf("pairing %+v: want a Pod created in both, under other names", p)
					}
				}
			})
		}
	}
}

// TestKCMReplicaSetControllerOff: the scenario with kcm's replicaset
// controller off, against the recording with it on: exactly its missing
// Pod creates (10), its missing SuccessfulCreate Events (10) and the
// ReplicaSet and Deployment status writes that follow from them — with
// and without CollapseRepeats, which never merges the creates of two
// Pods — and the other way round, the same as extra.
func TestKCMReplicaSetControllerOff(t *testing.T) {
	for _, tc := range []struct {
		a, b     string
		collapse bool
	}{
		{"rs-1.wt", "deployment-only.wt", false}, {"rs-1.wt", "deployment-only.wt", true},
		{"rs-2.wt", "deployment-only.wt", true}, {"deployment-only.wt", "rs-1.wt", false},
	} {
		t.Run(fmt.Sprintf("%s vs %s collapse %v", tc.a, tc.b, tc.collapse), func(t *testing.T) {
			rep, err := diff.Sessions(kcm(tc.a), kcm(tc.b), diff.Options{CollapseRepeats: tc.collapse, MaxDifferences: -1})
			if err != nil {
				t.Fatal(err)
			}
			rep, err = diff.Sessions(kcm(tc.a), kcm(tc.b), diff.Options{CollapseRepeats: tc.collapse, MaxDifferences: rep.Omitted + 100})
			if err != nil {
				t.Fatal(err)
			}
			gone, created := diff.KindMissing, "a"
			if tc.a == "deployment-only.wt" {
				gone, created = diff.KindExtra, "b"
			}
			var pods, podCreates, events, eventCreates int
			for _, g := range rep.Groups {
				for _, d := range g.Differences {
					if d.Category != diff.CategoryState && d.Category != diff.CategoryWrite {
						continue // not in the verdict
					}
					o := g.Object
					switch {
					case o == nil:
						t.Errorf("%s: %s", g.Subject, d.Kind)
					case o.Resource == "pods" && d.Kind == gone && d.Category == diff.CategoryState:
						pods++
					case o.Resource == "pods" && d.Kind == gone && d.What == "POST":
						podCreates++
					case o.Resource == "events" && strings.Contains(o.Event, " SuccessfulCreate ReplicaSet ") && d.Kind == gone && d.Category == diff.CategoryState:
						events++
					case o.Resource == "events" && strings.Contains(o.Event, " SuccessfulCreate ReplicaSet ") && d.Kind == gone && d.What == "POST":
						eventCreates++
					case o.Group == "apps" && (o.Resource == "replicasets" || o.Resource == "deployments") &&
						(d.Category == diff.CategoryState && d.Kind == diff.KindChanged || o.Subresource == "status"):
						// what follows from the Pods: their status
					case o.Group == "apps" && o.Resource == "replicasets" && d.Kind == diff.KindChanged && statusCountsOnly(d.Diff):
						// the deployment controller's scale of a ReplicaSet: its
						// body holds the status it read
					default:
						t.Errorf("%s: %s %s %s %s: not what follows from the replicaset controller being off", g.Subject, d.Category, d.What, d.Kind, d.Detail)
					}
				}
			}
			if pods != 10 || podCreates != 10 || events != 10 || eventCreates != 10 {
				t.Errorf("%d Pods (%d creates), %d SuccessfulCreate Events (%d creates) created only in %s; want 10 of each",
					pods, podCreates, events, eventCreates, created)
			}
			s := rep.Summary
			if rep.Same || s.State.Changed != 7 || s.State.Missing+s.State.Extra != 20 {
				t.Errorf("end state %+v: want 20 objects (10 Pods, 10 Events) in one session only, 7 changed (4 ReplicaSets, 3 Deployments)", s.State)
			}
			if t.Failed() {
				t.Logf("the report:\n%s", text(rep))
			}
		})
	}
}

// TestKCMOneFieldChanged: two real recordings of testkit/ctrltest whose
// controllers differ in the value they write in one annotation of one
// ConfigMap: one write differs, in that field, and so does that object's
// end state — nothing else the verdict counts.
func TestKCMOneFieldChanged(t *testing.T) {
	rep, err := diff.Sessions(kcm("ctl-seen.wt"), kcm("ctl-changed.wt"), diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if rep.Same || s.State.Differences() != 1 || s.State.Changed != 1 || s.Writes.Differences() != 1 || s.Writes.Changed != 1 {
		t.Fatalf("want one write and its object's end state changed:\n%s", text(rep))
	}
	g := rep.Groups[0]
	if g.Subject != "configmaps ctl/cm-1" || len(g.Differences) < 2 {
		t.Fatalf("first group %q: want configmaps ctl/cm-1:\n%s", g.Subject, text(rep))
	}
	for _, d := range g.Differences[:2] {
		var minus, plus []string
		for _, l := range strings.Split(d.Diff, "\n") {
			switch {
			case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
			case strings.HasPrefix(l, "-"):
				minus = append(minus, l)
			case strings.HasPrefix(l, "+"):
				plus = append(plus, l)
			}
		}
		if len(minus) != 1 || len(plus) != 1 || strings.TrimSpace(strings.TrimPrefix(plus[0], "+")) != `"wtrace.test/seen": "new-build"` {
			t.Errorf("%s %s: diff\n%s\nwant one line: the annotation's value to \"new-build\"", d.Category, d.Kind, d.Diff)
		}
	}
	if d := g.Differences[1]; d.Category != diff.CategoryWrite || d.What != "PATCH (merge)" {
		t.Errorf("second difference %s %s; want the merge PATCH", d.Category, d.What)
	}
}

// TestKCMReportJSON: --json carries the pairing and the end states.
func TestKCMReportJSON(t *testing.T) {
	rep, err := diff.Sessions(kcm("rs-1.wt"), kcm("rs-2.wt"), diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Same    bool     `json:"same"`
		Verdict []string `json:"verdict"`
		Pairing []struct {
			Object struct{ Resource, Namespace, Name string } `json:"object"`
			A, B   string
		} `json:"pairing"`
		States []struct {
			Subject string
			Same    bool
			A, B    *struct{ State string }
		} `json:"states"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Same || strings.Join(v.Verdict, ",") != "state,write" || len(v.Pairing) != 10 || len(v.States) != 32 {
		t.Fatalf("same %v, verdict %v, %d pairs, %d states", v.Same, v.Verdict, len(v.Pairing), len(v.States))
	}
	p := v.Pairing[0]
	if p.Object.Resource != "pods" || p.Object.Namespace != "kcm-scenario" || !strings.HasPrefix(p.A, "web-796cf5c97c-") ||
		!strings.HasPrefix(p.B, "web-796cf5c97c-") || p.Object.Name != "web-796cf5c97c-#1" {
		t.Errorf("first pair %+v", p)
	}
	for _, st := range v.States {
		if !st.Same || st.A == nil || st.B == nil || st.A.State != st.B.State {
			t.Errorf("state %+v", st)
		}
	}
}

// TestKCMIgnoreResource: --ignore-resource events leaves the Events out of
// every category.
func TestKCMIgnoreResource(t *testing.T) {
	rep, err := diff.Sessions(kcm("rs-1.wt"), kcm("deployment-only.wt"), diff.Options{IgnoreResources: []string{"events"}, MaxDifferences: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range rep.States {
		if st.Object.Resource == "events" {
			t.Errorf("state of %s: events are ignored", st.Subject)
		}
	}
	if s := rep.Summary.State; s.Missing != 10 || s.Changed != 7 {
		t.Errorf("end state %+v; want the 10 Pods missing, 7 changed", s)
	}
}

// statusCountsOnly reports whether a unified diff changes only the
// replica counts of a status (and observedGeneration).
func statusCountsOnly(d string) bool {
	n := 0
	for _, l := range strings.Split(d, "\n") {
		if strings.HasPrefix(l, "---") || strings.HasPrefix(l, "+++") || !(strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) {
			continue
		}
		n++
		ok := false
		for _, k := range []string{`"replicas"`, `"fullyLabeledReplicas"`, `"observedGeneration"`, `"readyReplicas"`, `"availableReplicas"`} {
			ok = ok || strings.Contains(l, k)
		}
		if !ok {
			return false
		}
	}
	return n > 0
}

// TestWorkloadsSameScenario: two real recordings of kcm's job,
// statefulset, daemonset, endpointslice and disruption controllers
// (kcmtest's workloads scenario, the test playing the kubelets) are the
// same, both ways — although their Pods, EndpointSlices and Events have
// other names and uids (a Job's uid in its Pods' labels and selector, its
// Pods' in status.uncountedTerminatedPods), two DaemonSet Pods created at
// once were answered in another order, and the DaemonSet controller
// reported an intermediate status in one run only.
func TestWorkloadsSameScenario(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"workloads-1.wt", "workloads-2.wt"}, {"workloads-2.wt", "workloads-1.wt"}} {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			rep, err := diff.Sessions(kcm(tc.a), kcm(tc.b), diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Same || rep.Summary.State.Compared < 25 || rep.Summary.Writes.Compared < 45 {
				t.Fatalf("two recordings of one scenario:\n%s", text(rep))
			}
			nodes := 0
			for _, p := range rep.Pairing {
				if strings.HasPrefix(p.Object.Name, "agent-#@node=") {
					nodes++
				}
			}
			if nodes != 2 {
				t.Errorf("%d DaemonSet Pods paired by their node; want 2", nodes)
			}
		})
	}
}
