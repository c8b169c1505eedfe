package replay_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/kcmtest"
)

var kcmControllers = kcmtest.DeploymentControllers

// runKCM replays the session at path to a new kube-controller-manager
// running controllers, recording the run, until the environment was
// played and kcm has been quiet; it returns the run's session file.
func runKCM(t *testing.T, path string, controllers []string, opts replay.Options) string {
	t.Helper()
	run, env := runComponent(t, path, opts, func(url string) (string, func()) {
		kcm := k8stest.StartControllerManager(t, k8stest.ControllerManagerOptions{URL: url, Controllers: controllers})
		return kcm.Log, kcm.Stop
	})
	for _, d := range env.Dropped {
		t.Logf("dropped %s %s %s: %s", d.Type, d.Resource.Resource, d.Change.Key, d.Reason)
	}
	return run
}

// runComponent replays the session at path, recording the run, to the
// component start starts against the replay's URL (it returns the
// component's log and how to stop it), until the environment was played
// and the component has been quiet (4 minutes at most); it returns the
// run's session file and what the replay did with the environment.
func runComponent(t *testing.T, path string, opts replay.Options, start func(url string) (log string, stop func())) (string, *replay.EnvironmentReport) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, run)
	opts.Out = rec
	srv := replaytest.NewServer(t, path, opts)
	log, stop := start(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatalf("the run did not settle within 4 minutes (log: %s)", log)
	}
	env := srv.Environment()
	t.Logf("%s", env)
	stop()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return run, env
}

// failedWrites counts the writes of a session answered 409, 429 or 5xx.
func failedWrites(t *testing.T, path string) int {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, x := range f.Index().Exchanges {
		switch x.Request.Method {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		if x.Response != nil && (x.Response.Status == 409 || x.Response.Status == 429 || x.Response.Status >= 500) {
			n++
		}
	}
	return n
}

// TestKCMReplay is the regression loop of a real controller end to end:
// kube-controller-manager v1.33 (deployment, replicaset, garbage
// collector, namespace controllers) recorded through record --proxy while
// a kubectl-like scenario plays on a real apiserver, the session replayed
// to the same kcm, paced by quiet and at the recorded pace, and each run
// judged "same" as the recording by wtrace diff's default verdict, with
// no more failed writes than the recording holds. The same session
// replayed to kcm without its replicaset controller: the diff names the
// Pod creates that are missing, and the Deployments' status writes are
// those a real deployment-only kcm makes (no replicas).
func TestKCMReplay(t *testing.T) {
	k8stest.ControllerManagerBinary(t)
	recorded := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: kcmControllers})
	recFailed := failedWrites(t, recorded.Path)
	for _, tc := range []struct {
		name string
		opts replay.Options
	}{
		{"pace quiet", replay.Options{Pace: replay.PaceQuiet}},
		{"speed 1", replay.Options{Speed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runKCM(t, recorded.Path, kcmControllers, tc.opts)
			rep, err := diff.Sessions(recorded.Path, run, diff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Same {
				var b strings.Builder
				rep.WriteText(&b, diff.TextOptions{})
				t.Errorf("wtrace diff recorded run: not the same\n%s", b.String())
			}
			if n := failedWrites(t, run); n > recFailed {
				t.Errorf("the run's failed writes (409, 429, 5xx): %d; the recording's: %d", n, recFailed)
			}
		})
	}
}

// TestKCMReplayWithoutReplicaSets: the recording of kcm with its
// replicaset controller, replayed to kcm without it. The run misses
// exactly what the replicaset controller did — its Pod creates (every
// one), their SuccessfulCreate Events, the ReplicaSet status writes and
// the Deployment status writes that follow from them — and the recording
// does not mask it: the Deployments' status is what a real deployment-only
// kcm writes against the real apiserver (no replicas: diff/testdata's
// deployment-only.wt), not what the recorded Pods would make it.
func TestKCMReplayWithoutReplicaSets(t *testing.T) {
	k8stest.ControllerManagerBinary(t)
	recorded := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: kcmControllers})
	noRS := []string{"deployment", "garbagecollector", "namespace"}
	run := runKCM(t, recorded.Path, noRS, replay.Options{Pace: replay.PaceQuiet})
	rep, err := diff.Sessions(recorded.Path, run, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatal("the run without the replicaset controller is judged the same as the recording")
	}
	missingPods, extra := 0, 0
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category != diff.CategoryWrite && d.Category != diff.CategoryState {
				continue
			}
			o := g.Object
			switch {
			case d.Kind == diff.KindExtra:
				extra++
				t.Errorf("extra in the run: %s %s %s", g.Subject, d.What, d.Detail)
			case o == nil:
				t.Errorf("a difference of no object: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			case o.Resource == "pods":
				if d.Category == diff.CategoryWrite && d.Kind == diff.KindMissing && d.What == "POST" {
					missingPods++
				}
			case o.Resource == "events" && strings.Contains(o.Event, "SuccessfulCreate"):
			case (o.Resource == "replicasets" || o.Resource == "deployments") && o.Group == "apps" && o.Subresource == "status":
			case (o.Resource == "replicasets" || o.Resource == "deployments") && o.Group == "apps" && d.Category == diff.CategoryState:
				// Their end state: the last status write differs.
			case o.Resource == "replicasets" && o.Group == "apps" && d.Kind == diff.KindChanged:
				// The deployment controller scales ReplicaSets by their
				// status (available replicas), which only the replicaset
				// controller writes.
				t.Logf("follows from it: %s %s %s", g.Subject, d.What, d.Kind)
			default:
				t.Errorf("a difference the replicaset controller does not explain: %s %s %s %s", g.Subject, d.Category, d.Kind, d.Detail)
			}
		}
	}
	if want := podCreates(t, recorded.Path); missingPods != want {
		t.Errorf("%d Pod creates reported missing; the recording has %d", missingPods, want)
	}
	// The Deployments as a real deployment-only kcm leaves them.
	only := diff.Options{IgnoreResources: []string{"pods", "replicasets", "events", "leases"}}
	ref := filepath.Join("..", "diff", "testdata", "kcm", "deployment-only.wt")
	rep, err = diff.Sessions(ref, run, only)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Same {
		var b strings.Builder
		rep.WriteText(&b, diff.TextOptions{})
		t.Errorf("the run's Deployments differ from a real deployment-only kcm's\n%s", b.String())
	}
}

// podCreates counts a session's successful Pod creates.
func podCreates(t *testing.T, path string) int {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, x := range f.Index().Exchanges {
		if x.Request.Method == "POST" && strings.HasSuffix(strings.SplitN(x.Request.Target, "?", 2)[0], "/pods") &&
			x.Response != nil && x.Response.Status == 201 {
			n++
		}
	}
	return n
}
