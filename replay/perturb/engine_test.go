package perturb

import (
	"strings"
	"testing"
	"time"
)

// noActions is an Actions that does nothing (the throttle acts through
// its Decisions alone).
type noActions struct{}

func (noActions) CloseWatches(string, bool) []string { return nil }
func (noActions) ExpireWatches(string) []string      { return nil }
func (noActions) Restart(time.Duration)              {}
func (noActions) ClientRestart(Spec) error           { return nil }

// TestThrottleRetries tells a client that ignores Retry-After from one
// that sends identical requests side by side and honours it: the
// requests each case sends, at the times (ms since the start) it sends
// them, and whether a finding is noted.
func TestThrottleRetries(t *testing.T) {
	create := Request{Method: "POST", Verb: "create", Resource: "pods", Namespace: "ns", IsResource: true,
		UserAgent: "kcm", Target: "/api/v1/namespaces/ns/pods", Body: []byte(`{"metadata":{"generateName":"web-"}}`)}
	for _, tc := range []struct {
		name    string
		spec    string
		at      []int // ms
		refused int
		finding bool
	}{
		// A ReplicaSet's two Pods at once, the first refused: the
		// second is refused too (it came before the Retry-After), and
		// both are retried once it passed.
		{"side by side, honoured", "throttle:share=1,count=1", []int{0, 1, 1000, 1001}, 2, false},
		// The second 500 ms later: each retried once its own 429's
		// Retry-After passed, neither refused again for the other's.
		{"side by side, staggered", "throttle:share=1,count=1", []int{0, 500, 1000, 1500}, 2, false},
		// Retried at once ten times, then never on time: reported.
		{"ignored", "throttle:share=1,count=1", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 11, true},
		// Retried at once, then on time once: the early retries' 429s are
		// still not waited out.
		{"ignored, then once on time", "throttle:share=1,count=1", []int{0, 1, 2, 3, 1100}, 4, true},
		// Each refused request retried after its Retry-After.
		{"honoured", "throttle:share=1,count=3", []int{0, 1000, 2000, 3000}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
			now := start
			e := NewEngine([]Spec{sp}, noActions{}, func() time.Time { return now }, nil)
			e.Start()
			refused := 0
			for _, ms := range tc.at {
				now = start.Add(time.Duration(ms) * time.Millisecond)
				if d := e.Request(create); d.Refuse != nil {
					refused++
				}
			}
			now = now.Add(10 * time.Second)
			var findings []string
			for _, a := range e.Applied() {
				if a.Finding != "" {
					findings = append(findings, a.Finding)
				}
			}
			if refused != tc.refused {
				t.Errorf("%d requests refused, want %d", refused, tc.refused)
			}
			if got := len(findings) > 0; got != tc.finding {
				t.Errorf("findings %q, want a finding: %v", findings, tc.finding)
			}
			if len(findings) > 1 {
				t.Errorf("%d findings for one request, want 1: %q", len(findings), findings)
			}
			if tc.finding && !strings.Contains(findings[0], "Retry-After 1s") {
				t.Errorf("finding %q does not name the Retry-After", findings[0])
			}
			// Read again later: still one finding.
			now = now.Add(time.Minute)
			n := 0
			for _, a := range e.Applied() {
				if a.Finding != "" {
					n++
				}
			}
			if n != len(findings) {
				t.Errorf("findings grew from %d to %d on a second read", len(findings), n)
			}
		})
	}
}
