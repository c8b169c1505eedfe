package perturb

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"watch-close:resource=pods,at=event:3,mode=reset", Spec{Kind: WatchClose, Resource: "pods", Mode: "reset", At: Point{Kind: AtEvent, N: 3}}},
		{"watch-close", Spec{Kind: WatchClose, Mode: "clean"}},
		{"gone:at=write:2", Spec{Kind: Gone, At: Point{Kind: AtWrite, N: 2}}},
		{"stale:changes=3", Spec{Kind: Stale, Changes: 3, Count: 1}},
		{"stale:age=2s,resource=deployments.apps,count=2", Spec{Kind: Stale, Age: 2 * time.Second, Resource: "deployments.apps", Count: 2}},
		{"skip", Spec{Kind: Skip, For: 2 * time.Second}},
		{"skip:for=5s", Spec{Kind: Skip, For: 5 * time.Second}},
		{"restart:for=2s", Spec{Kind: Restart, For: 2 * time.Second}},
		{"restart:at=1500ms", Spec{Kind: Restart, For: 2 * time.Second, At: Point{Kind: AtTime, Time: 1500 * time.Millisecond}}},
		{"throttle:share=0.2,retry-after=1,seed=7", Spec{Kind: Throttle, Share: 0.2, RetryAfter: 1, Seed: 7, On: "all"}},
		{"error:code=503,when=after", Spec{Kind: Error, Code: 503, Mode: "after", Count: 1, At: Point{Kind: AtWrite, N: 1}}},
		{"error:at=write:3:pods/default/web", Spec{Kind: Error, Code: 503, Mode: "before", Count: 1,
			At: Point{Kind: AtWrite, N: 3, Resource: "pods", Namespace: "default", Name: "web"}}},
		{"conflict:resource=deployments", Spec{Kind: Conflict, Resource: "deployments"}},
		{"delay:for=200ms,on=events", Spec{Kind: Delay, For: 200 * time.Millisecond, On: "events"}},
		{"client-restart:signal=HUP,pid=42", Spec{Kind: ClientRestart, Signal: "HUP", PID: 42}},
		{"client-restart:signal=sigterm,pid=42", Spec{Kind: ClientRestart, Signal: "TERM", PID: 42}},
		{"client-restart:at=write:1,exec=kill -HUP $(cat pid), echo a,b", Spec{Kind: ClientRestart, Exec: "kill -HUP $(cat pid), echo a,b", At: Point{Kind: AtWrite, N: 1}}},
		{"gone:after=write:deployments/demo/web", Spec{Kind: Gone, At: Point{Kind: AtWrite, N: 1, After: true, Resource: "deployments", Namespace: "demo", Name: "web"}}},
		{"skip:after=write:nodes/n1", Spec{Kind: Skip, For: 2 * time.Second, At: Point{Kind: AtWrite, N: 1, After: true, Resource: "nodes", Name: "n1"}}},
		{"watch-close:at=event:10:replicasets", Spec{Kind: WatchClose, Mode: "clean", At: Point{Kind: AtEvent, N: 10, Resource: "replicasets"}}},
		{"  delay  ", Spec{Kind: Delay, For: 200 * time.Millisecond, On: "answers"}},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		again, err := Parse(got.String())
		if err != nil || again != got {
			t.Errorf("Parse(%q).String() = %q, which parses to %+v, %v", tc.in, got.String(), again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, problem, hint string }{
		{"", `unknown kind ""`, "watch-close, gone"},
		{"close", `unknown kind "close"`, "one of watch-close"},
		{"watch-close:mode=rst", "mode=rst: clean or reset", ""},
		{"watch-close:resource", `"resource" is no KEY=VALUE`, "watch-close takes resource, mode"},
		{"gone:mode=reset", "gone takes no mode", "gone takes at, after, resource"},
		{"stale:changes=0", "a positive whole number", ""},
		{"stale:changes=2,age=1s", "changes and age", ""},
		{"throttle:share=1.5", "0 < share ≤ 1", ""},
		{"error:code=404", "500, 503 or 504", ""},
		{"error:when=later", "before", ""},
		{"delay:on=writes", "delay: answers or events", ""},
		{"restart:for=-1s", "a positive duration", ""},
		{"gone:at=soon", "at=soon: a duration", "at=2s"},
		{"gone:at=event:0", "counts from 1", ""},
		{"gone:at=write:1:pods/a/b/c", "RESOURCE/NAMESPACE/NAME", ""},
		{"gone:after=write:pods", "RESOURCE/NAMESPACE/NAME", ""},
		{"gone:after=event:3", "after=write:RESOURCE/NS/NAME", ""},
		{"gone:at=1s,after=write:pods/a/b", "both at and after", "give one point"},
		{"gone:at=1s,at=2s", "at given twice", ""},
		{"client-restart:signal=HUP", "signal needs pid", ""},
		{"client-restart:signal=USR9,pid=1", "one of HUP", ""},
		{"skip:resource=pods/x", "plural name", ""},
		{"watch-close:resource=pods,", `"" is no KEY=VALUE`, ""},
	} {
		_, err := Parse(tc.in)
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q): %v, want a *SpecError", tc.in, err)
			continue
		}
		if !strings.Contains(se.Problem, tc.problem) || !strings.Contains(se.Hint, tc.hint) {
			t.Errorf("Parse(%q): problem %q hint %q, want %q and %q", tc.in, se.Problem, se.Hint, tc.problem, tc.hint)
		}
		if !strings.Contains(err.Error(), tc.in) {
			t.Errorf("Parse(%q): %v does not quote the spec", tc.in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"watch-close:resource=pods,at=event:3,mode=reset", "gone:at=write:2", "stale:changes=3",
		"throttle:share=0.2,retry-after=1,seed=7", "client-restart:exec=a,b", "error:at=write:1:pods/a/b,when=after"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sp.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", s, sp.String(), err)
		}
		if again != sp {
			t.Fatalf("Parse(%q) = %+v; its String %q parses to %+v", s, sp, sp.String(), again)
		}
	})
}

func TestAppliedLines(t *testing.T) {
	tm := time.Date(2026, 12, 2, 8, 0, 0, 123456789, time.UTC)
	in := []Applied{
		{At: 1234 * time.Millisecond, Time: tm, Spec: "watch-close:resource=pods", Detail: "closed 2 watches (pods ×2)"},
		{At: 2 * time.Second, Time: tm.Add(time.Second), Spec: "throttle:share=0.2", Detail: "GET /api/v1/pods refused again: 429", Finding: "GET /api/v1/pods retried after 3ms, Retry-After 1s"},
	}
	note := "environment: 3 changes applied\n" + in[0].String() + "\n" + in[1].String()
	got := ParseApplied(note)
	if len(got) != 2 {
		t.Fatalf("ParseApplied: %d lines, want 2: %+v", len(got), got)
	}
	for i := range in {
		if !got[i].Time.Equal(in[i].Time) || got[i].At != in[i].At || got[i].Spec != in[i].Spec || got[i].Detail != in[i].Detail || got[i].Finding != in[i].Finding {
			t.Errorf("line %d: %+v, want %+v", i, got[i], in[i])
		}
	}
}
