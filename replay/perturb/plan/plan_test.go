package plan_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/perturb/plan"
	"github.com/wtrace/wtrace/testkit/wttest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// kcmDir holds real recordings of kube-controller-manager (see its
// README.md).
var kcmDir = filepath.Join("..", "..", "..", "diff", "testdata", "kcm")

// TestGolden: the plan of bundled kcm recordings, one spec a line, as
// testdata/NAME.plan holds it (-update rewrites them).
func TestGolden(t *testing.T) {
	for _, name := range []string{"rs-1", "workloads-1"} {
		t.Run(name, func(t *testing.T) {
			f := wttest.OpenSession(t, filepath.Join(kcmDir, name+".wt"))
			p, err := plan.New(f, plan.Options{})
			if err != nil {
				t.Fatalf("plan.New(%s) = %v", name, err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "# client %s; %d writes, %d watches, %d lists, %d events; %d candidates\n", p.Client, p.Writes, p.Watches, p.Lists, p.Events, p.Candidates)
			for _, s := range p.Strings() {
				b.WriteString(s + "\n")
			}
			golden := filepath.Join("testdata", name+".plan")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("plan.New(%s) =\n%s\nwant (%s)\n%s", name, b.String(), golden, want)
			}
		})
	}
}

// TestPlan: on real sessions, every planned spec parses back as itself,
// none twice, within the bound, the same plan on every call; every kind
// with candidates gets some of the bound.
func TestPlan(t *testing.T) {
	tests := []struct {
		session string
		opts    plan.Options
		want    int // specs
		kinds   []perturb.Kind
	}{
		{"rs-1.wt", plan.Options{}, plan.DefaultMax, perturb.Kinds},
		{"gc-nsdelete.wt", plan.Options{}, plan.DefaultMax, perturb.Kinds},
		{"workloads-1.wt", plan.Options{Max: 12}, 12, perturb.Kinds},
		{"deployment-only.wt", plan.Options{Max: 5}, 5, nil},
		{"rs-1.wt", plan.Options{Max: 3, Kinds: []perturb.Kind{perturb.Gone}}, 3, []perturb.Kind{perturb.Gone}},
		{"rs-1.wt", plan.Options{Client: "replicaset-controller", Max: -1}, -1, nil},
		{"ctl-seen.wt", plan.Options{Max: 1000}, -1, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/max=%d/client=%s", tt.session, tt.opts.Max, tt.opts.Client), func(t *testing.T) {
			f := wttest.OpenSession(t, filepath.Join(kcmDir, tt.session))
			p, err := plan.New(f, tt.opts)
			if err != nil {
				t.Fatalf("plan.New(%s, %+v) = %v", tt.session, tt.opts, err)
			}
			if tt.want >= 0 && len(p.Specs) != tt.want {
				t.Errorf("plan.New(%s, %+v): %d specs; want %d", tt.session, tt.opts, len(p.Specs), tt.want)
			}
			if tt.want < 0 && len(p.Specs) != p.Candidates {
				t.Errorf("plan.New(%s, %+v): %d specs of %d candidates; want all", tt.session, tt.opts, len(p.Specs), p.Candidates)
			}
			seen := map[string]bool{}
			for _, sp := range p.Specs {
				s := sp.String()
				back, err := perturb.Parse(s)
				if err != nil || back.String() != s {
					t.Errorf("perturb.Parse(%q) = %v, %v; want the spec back", s, back, err)
				}
				if seen[s] {
					t.Errorf("%s planned twice", s)
				}
				seen[s] = true
			}
			for _, k := range tt.kinds {
				if !slices.ContainsFunc(p.Specs, func(sp perturb.Spec) bool { return sp.Kind == k }) {
					t.Errorf("plan.New(%s, %+v): no %s planned", tt.session, tt.opts, k)
				}
			}
			again, err := plan.New(f, tt.opts)
			if err != nil || !slices.Equal(again.Strings(), p.Strings()) {
				t.Errorf("plan.New(%s, %+v) a second time = %v, %v; want the same plan", tt.session, tt.opts, again.Strings(), err)
			}
		})
	}
}

// TestSpread: a bounded plan's points of one kind are spread over the
// recording, not its first ones: the last write point kept is past the
// middle of the writes.
func TestSpread(t *testing.T) {
	f := wttest.OpenSession(t, filepath.Join(kcmDir, "gc-nsdelete.wt"))
	p, err := plan.New(f, plan.Options{Max: 4, Kinds: []perturb.Kind{perturb.Restart}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Specs) != 4 {
		t.Fatalf("plan.New: %v; want 4 restarts", p.Strings())
	}
	last := p.Specs[len(p.Specs)-1].At.N
	first := p.Specs[0].At.N
	if last <= p.Writes/2 || first > p.Writes/2 {
		t.Errorf("plan.New: restarts at writes %v of %d; want them spread over the writes", p.Strings(), p.Writes)
	}
	for i := 1; i < len(p.Specs); i++ {
		if p.Specs[i].At.N <= p.Specs[i-1].At.N {
			t.Errorf("plan.New: %v not in recording order", p.Strings())
		}
	}
}

// TestNoWrites: a session whose client wrote nothing (a capture of
// watchers) has no plan, and says so.
func TestNoWrites(t *testing.T) {
	tests := []struct {
		session string
		opts    plan.Options
	}{
		{filepath.Join("..", "..", "..", "testdata", "compat", "9936756", "basic-json.wt"), plan.Options{}},
		{filepath.Join(kcmDir, "rs-1.wt"), plan.Options{Client: "^no-such-client/"}},
	}
	for _, tt := range tests {
		f := wttest.OpenSession(t, tt.session)
		if p, err := plan.New(f, tt.opts); !errors.Is(err, plan.ErrNoWrites) {
			t.Errorf("plan.New(%s, %+v) = %v, %v; want ErrNoWrites", tt.session, tt.opts, p, err)
		}
	}
}
