package replay_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/schedtest"
)

// schedSessions are the real recordings of kube-scheduler v1.33.13 the
// tests replay (diff/testdata/scheduler; recorded by diff's
// TestRecordKCM -rerecord).
var schedSessions = filepath.Join("..", "diff", "testdata", "scheduler")

// runScheduler replays the session at path to a new kube-scheduler with
// profile, recording the run, until the environment was played and the
// scheduler has been quiet; it fails t if an environment change was
// dropped (every Pod the recording shows must exist in the run), and
// returns the run's session file.
func runScheduler(t *testing.T, path, profile string, opts replay.Options) string {
	t.Helper()
	run, env := runComponent(t, path, opts, func(url string) (string, func()) {
		s := k8stest.StartScheduler(t, k8stest.SchedulerOptions{URL: url, Profile: profile})
		return s.Log, s.Stop
	})
	for _, d := range env.Dropped {
		t.Errorf("environment change dropped: %s %s %s: %s", d.Type, d.Resource.Resource, d.Change.Key, d.Reason)
	}
	return run
}

// TestSchedulerReplay: kube-scheduler v1.33 (the default profile)
// recorded through record --proxy while Pods are created on 3 Nodes of
// distinct capacities, replayed to the same scheduler paced by quiet and
// at the recorded pace: every Pod is bound as recorded (no environment
// change dropped), and the run is judged the same.
func TestSchedulerReplay(t *testing.T) {
	k8stest.SchedulerBinary(t)
	recorded := filepath.Join(schedSessions, "default-1.wt")
	for _, tc := range []struct {
		name string
		opts replay.Options
	}{
		{"pace quiet", replay.Options{Pace: replay.PaceQuiet}},
		{"speed 1", replay.Options{Speed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runScheduler(t, recorded, "", tc.opts)
			if got, want := bindings(t, run), bindings(t, recorded); !equalMaps(got, want) {
				t.Errorf("the run's bindings %v; recorded %v", got, want)
			}
			rep, err := diff.Sessions(recorded, run, diff.Options{})
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

// TestSchedulerReplayMostAllocated: the default scheduler's recording
// replayed to a scheduler that scores by MostAllocated: the diff names
// exactly the Pods whose binding changed — their binding, and the
// Scheduled Event that says where — and nothing else; the run binds as
// a real MostAllocated scheduler did (most.wt).
func TestSchedulerReplayMostAllocated(t *testing.T) {
	k8stest.SchedulerBinary(t)
	recorded := filepath.Join(schedSessions, "default-1.wt")
	run := runScheduler(t, recorded, schedtest.MostAllocated, replay.Options{Pace: replay.PaceQuiet})
	got, rec, most := bindings(t, run), bindings(t, recorded), bindings(t, filepath.Join(schedSessions, "most.wt"))
	if !equalMaps(got, most) {
		t.Errorf("the run's bindings %v; a real MostAllocated scheduler's %v", got, most)
	}
	checkChangedBindings(t, recorded, run, rec, got)
}

// bindings reads where a session's successful pods/NAME/binding writes
// bound each Pod.
func bindings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []int64
	pod := map[int64]string{}
	for _, x := range f.Index().Exchanges {
		p := strings.SplitN(x.Request.Target, "?", 2)[0]
		if x.Request.Method == "POST" && strings.HasSuffix(p, "/binding") && x.Response != nil && x.Response.Status == 201 {
			ids = append(ids, x.Request.Exchange)
			parts := strings.Split(p, "/")
			pod[x.Request.Exchange] = parts[len(parts)-2]
		}
	}
	bodies := map[int64][]byte{}
	for rec, err := range f.ExchangeRecords(ids...).All() {
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := rec.(*formats.Body); ok && b.Dir == formats.ClientToServer {
			bodies[b.Exchange] = append(bodies[b.Exchange], b.Data...)
		}
	}
	out := map[string]string{}
	for _, id := range ids {
		format := frame.JSON
		if bytes.HasPrefix(bodies[id], []byte(frame.ProtobufMagic)) {
			format = frame.Protobuf
		}
		o, err := codec.FromBody(format, bodies[id])
		if err != nil {
			t.Fatalf("%s: exchange %d: the binding's body: %v", path, id, err)
		}
		obj, err := codec.Decode(o)
		b, ok := obj.(*corev1.Binding)
		if err != nil || !ok {
			t.Fatalf("%s: exchange %d: the binding's body: %T %v", path, id, obj, err)
		}
		out[pod[id]] = b.Target.Name
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkChangedBindings fails t unless the diff of sessions a and b
// (bound as ba and bb) is about exactly the Pods bound elsewhere, at
// least one: their binding changed (a write of pods/NAME/binding), the
// Scheduled Event that says where missing from one side and extra in the
// other, and nothing else in the verdict.
func checkChangedBindings(t *testing.T, a, b string, ba, bb map[string]string) {
	t.Helper()
	changed := map[string]bool{}
	for p, n := range ba {
		if bb[p] != n {
			changed[p] = true
		}
	}
	if len(changed) == 0 {
		t.Fatalf("no Pod bound elsewhere: %v", bb)
	}
	rep, err := diff.Sessions(a, b, diff.Options{MaxDifferences: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatalf("judged the same, with %d Pods bound elsewhere", len(changed))
	}
	named := map[string]bool{}
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category != diff.CategoryWrite && d.Category != diff.CategoryState {
				continue
			}
			o := g.Object
			pod := ""
			switch {
			case o == nil:
			case o.Resource == "pods" && o.Subresource == "binding":
				pod = o.Name
			case o.Resource == "events" && strings.Contains(o.Event, "Scheduled Pod "):
				pod = strings.TrimPrefix(o.Event[strings.Index(o.Event, "Scheduled Pod ")+len("Scheduled Pod "):], schedtest.Namespace+"/")
				pod, _, _ = strings.Cut(pod, ":")
			}
			if !changed[pod] {
				t.Errorf("a difference of no Pod bound elsewhere: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
				continue
			}
			named[pod] = true
		}
	}
	for p := range changed {
		if !named[p] {
			t.Errorf("pod %s bound to %s, then to %s: not in the diff", p, ba[p], bb[p])
		}
	}
}
