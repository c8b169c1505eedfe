package diff_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
)

func sched(name string) string { return filepath.Join(schedDir, name) }

// TestSchedulerSameScenario: two real recordings of kube-scheduler
// binding the scenario's Pods are the same, both ways.
func TestSchedulerSameScenario(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"default-1.wt", "default-2.wt"}, {"default-2.wt", "default-1.wt"}} {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			rep, err := diff.Sessions(sched(tc.a), sched(tc.b), diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Same || rep.Summary.Writes.Compared != 16 {
				t.Fatalf("two recordings of one scenario:\n%s", text(rep))
			}
		})
	}
}

// TestSchedulerScoringChanged: the scheduler with MostAllocated scoring
// against the default one: the diff is about exactly the 5 Pods it binds
// elsewhere (pod-0, 1, 3, 5, 6) — each one's binding changed, its
// Scheduled Event (which names the Node) missing and another extra — and
// nothing else.
func TestSchedulerScoringChanged(t *testing.T) {
	rep, err := diff.Sessions(sched("default-1.wt"), sched("most.wt"), diff.Options{MaxDifferences: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatalf("another scoring judged the same:\n%s", text(rep))
	}
	changed := map[string]bool{"pod-0": true, "pod-1": true, "pod-3": true, "pod-5": true, "pod-6": true}
	seen := map[string]int{}
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category != diff.CategoryWrite && d.Category != diff.CategoryState {
				continue
			}
			pod := ""
			switch o := g.Object; {
			case o == nil:
			case o.Resource == "pods" && o.Subresource == "binding" && d.Kind == diff.KindChanged:
				pod = o.Name
			case o.Resource == "events" && strings.Contains(o.Event, " Scheduled Pod sched-scenario/"):
				pod, _, _ = strings.Cut(o.Event[strings.Index(o.Event, "sched-scenario/")+len("sched-scenario/"):], ":")
			}
			if !changed[pod] {
				t.Errorf("a difference of no Pod bound elsewhere: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			}
			seen[pod]++
		}
	}
	for p := range changed {
		// The binding changed; the Event's end state and create, missing
		// and extra.
		if seen[p] != 5 {
			t.Errorf("%s: %d differences; want 5 (its binding; its Event's end state and create, on each side)", p, seen[p])
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint(text(rep)))
	}
}
