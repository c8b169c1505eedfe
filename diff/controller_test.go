package diff_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/diff/difftest"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// ctlNS is the namespace of the controller scenario.
const ctlNS = "ctl"

// writesOnly is the comparison of a regression check of a controller:
// its writes.
var writesOnly = diff.Options{Only: []diff.Category{diff.CategoryWrite}}

// TestControllerRegression is the regression check of a controller: a
// session recorded through the recording proxy (record --proxy) in front
// of a real kube-apiserver while a real client-go controller ran
// (testkit/ctrltest: informers, a workqueue, writes of every verb),
// replayed at its pace to a build of the controller, the run recorded
// (replay.Options.Out, replaytest.Record) and diffed against the
// recording:
//
//   - the same controller: no write differs (difftest.Same passes);
//   - a controller that writes another annotation value on one object:
//     exactly that write differs, shown as a unified diff of its body;
//   - a controller that makes one more create: exactly that create, extra.
//
// With -update its recording becomes testdata/controller.wt, the session
// of TestRegressionSuite and TestCommittedVerdicts.
func TestControllerRegression(t *testing.T) {
	c := k8stest.Start(t)
	session := recordController(t, c)
	if updating() {
		copyFile(t, session, filepath.Join("testdata", "controller.wt"))
	}
	verdicts(t, session)
}

// TestCommittedVerdicts: the verdicts of TestControllerRegression on the
// session it recorded into testdata/controller.wt, without a cluster.
func TestCommittedVerdicts(t *testing.T) {
	verdicts(t, filepath.Join("testdata", "controller.wt"))
}

// verdicts replays session, recorded while the controller ran, to three
// builds of it and checks what diff says of each run.
func verdicts(t *testing.T, session string) {
	t.Run("same controller", func(t *testing.T) {
		run, writes := replayController(t, session, ctrltest.Options{SeenValue: seen})
		rep := difftest.Same(t, session, run, writesOnly)
		if w := rep.Summary.Writes; w.Compared < 10 || w.Compared != writes {
			t.Errorf("writes %+v: want each of the run's %d writes compared", w, writes)
		}
		logReport(t, session, run)
	})
	t.Run("one write changed", func(t *testing.T) {
		run, _ := replayController(t, session, ctrltest.Options{SeenValue: func(cm *corev1.ConfigMap) string {
			if cm.Name == "cm-1" {
				return "new-build"
			}
			return seen(cm)
		}})
		rep := mustSessions(t, session, run, writesOnly)
		d := only(t, rep)
		if d.Kind != diff.KindChanged || d.What != "PATCH (merge)" || rep.Groups[0].Subject != "configmaps ctl/cm-1" {
			t.Fatalf("difference %+v under %q; want the merge PATCH of configmaps ctl/cm-1 changed", d, rep.Groups[0].Subject)
		}
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
		if len(minus) != 1 || len(plus) != 1 || !strings.Contains(minus[0], `"`+ctrltest.SeenAnnotation+`": "`) ||
			strings.TrimSpace(strings.TrimPrefix(plus[0], "+")) != `"`+ctrltest.SeenAnnotation+`": "new-build"` {
			t.Errorf("diff of the body:\n%s\nwant one line changed: the annotation's value to \"new-build\"", d.Diff)
		}
	})
	t.Run("one more create", func(t *testing.T) {
		extra := "extra" + ctrltest.ChildSuffix // a child's name: the controller does not reconcile it
		run, _ := replayController(t, session, ctrltest.Options{SeenValue: seen, ExtraCreate: extra})
		rep := mustSessions(t, session, run, writesOnly)
		d := only(t, rep)
		if d.Kind != diff.KindExtra || d.What != "POST" || d.A != nil || d.B == nil || d.B.Status != http.StatusCreated ||
			rep.Groups[0].Subject != "configmaps ctl/"+extra {
			t.Fatalf("difference %+v (b %+v) under %q; want the POST of configmaps ctl/%s extra", d, d.B, rep.Groups[0].Subject, extra)
		}
	})
}

// seen is the value the controller of this scenario writes in its
// annotation. ctrltest's own, the resourceVersion it saw, is a
// resourceVersion copied into a field diff cannot know to leave out, and
// resourceVersions differ between runs: once a replay answers a write the
// recording does not hold (the one more create, the changed PATCH), it
// serves every later recorded resourceVersion one up (package replay),
// and the controller copies that. A regression check of such a controller
// would --ignore the annotation; this one writes what the controller
// decided, not what it read.
func seen(cm *corev1.ConfigMap) string { return "reconciled:" + cm.Name }

// updating reports whether the test runs with -update (the flag of
// package diff's tests, golden_test.go).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// copyFile copies file from to a new file to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// only returns the one difference rep lists, failing t with the report
// if it has another number.
func only(t *testing.T, rep *diff.Report) diff.Difference {
	t.Helper()
	var ds []diff.Difference
	for _, g := range rep.Groups {
		ds = append(ds, g.Differences...)
	}
	if len(ds) != 1 || rep.Summary.Writes.Differences() != 1 || rep.Same {
		var b strings.Builder
		rep.WriteText(&b, diff.TextOptions{})
		t.Fatalf("want exactly one difference:\n%s", b.String())
	}
	var b strings.Builder
	rep.WriteText(&b, diff.TextOptions{})
	t.Logf("the report:\n%s", b.String())
	return ds[0]
}

func mustSessions(t *testing.T, a, b string, opts diff.Options) *diff.Report {
	t.Helper()
	rep, err := diff.Sessions(a, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// logReport logs what a full comparison (every category, repeats
// compared) says, for the record: the reads and their repeats differ with
// the controller's timing.
func logReport(t *testing.T, a, b string) {
	rep := mustSessions(t, a, b, diff.Options{MaxDifferences: -1})
	var s strings.Builder
	rep.WriteText(&s, diff.TextOptions{})
	t.Logf("everything compared, repeats too (not asserted):\n%s", s.String())
}

// recordController records, through the recording proxy in front of
// cluster c, the controller at work while a workload (straight to the
// apiserver) changes its world: three ConfigMaps before it starts, one
// more created and one deleted while it runs. It returns the session.
func recordController(t *testing.T, c *k8stest.Cluster) string {
	t.Helper()
	return recordControllerWith(t, c, ctrltest.Options{SeenValue: seen})
}

// recordControllerWith is recordController with the controller built
// with opts.
func recordControllerWith(t *testing.T, c *k8stest.Cluster, opts ctrltest.Options) string {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	workload := func(method, path, body string, want int) {
		t.Helper()
		if resp, b := c.Do(method, path, hdr, []byte(body)); resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	workload("POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ctlNS+`"}}`, 201)
	for i := range 3 {
		workload("POST", "/api/v1/namespaces/"+ctlNS+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"k":"v"}}`, i), 201)
	}
	session := filepath.Join(t.TempDir(), "recorded.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: session}})
	ctl := startController(t, px.URL, opts)
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}})
	applied := func(name string) func() bool {
		return func() bool {
			ch, err := cs.CoreV1().ConfigMaps(ctlNS).Get(context.Background(), name+ctrltest.ChildSuffix, metav1.GetOptions{})
			return err == nil && ch.Labels[ctrltest.AppliedLabel] == "yes"
		}
	}
	for i := range 3 {
		wttest.WaitFor(t, time.Minute, applied(fmt.Sprintf("cm-%d", i)), "cm-%d's child applied", i)
	}
	workload("POST", "/api/v1/namespaces/"+ctlNS+"/configmaps", `{"metadata":{"name":"cm-3"},"data":{"k":"v","l":"w"}}`, 201)
	wttest.WaitFor(t, time.Minute, applied("cm-3"), "cm-3's child applied")
	workload("DELETE", "/api/v1/namespaces/"+ctlNS+"/configmaps/cm-0", "", 200)
	settled(t, ctl)
	if f := ctl.Failures(); len(f) > 0 {
		t.Fatalf("failed calls against the apiserver: %v", f)
	}
	t.Logf("recorded: %d reconciles, calls %v", ctl.Reconciles(), ctl.Calls())
	ctl.Stop()
	px.Stop()
	return session
}

// replayController replays session at its pace to the controller built
// with opts, records the run as a session (replay.Options.Out) and
// returns its path and the number of writes the replay answered.
func replayController(t *testing.T, session string, opts ctrltest.Options) (string, int) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, run)
	srv := replaytest.NewServer(t, session, replay.Options{Speed: 1, Out: rec})
	ctl := startController(t, srv.URL, opts)
	settled(t, ctl)
	if f := ctl.Failures(); len(f) > 0 {
		t.Errorf("failed calls against the replay: %v", f)
	}
	t.Logf("replayed: %d reconciles, calls %v", ctl.Reconciles(), ctl.Calls())
	ctl.Stop()
	n := len(srv.Writes())
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return run, n
}

// startController runs the controller against host until the test ends:
// one worker, writing only what changes something (OnlyChanges). A
// replay serves the recorded events at their recorded times, whatever the
// controller does meanwhile; when it is a few milliseconds slower to reach
// a ConfigMap than it was while recording, that ConfigMap's events are
// already there when it does, its workqueue coalesces them, and it
// reconciles the ConfigMap once where it did twice — a controller that
// writes on every reconcile then makes fewer writes (its second create,
// answered 409, and update: 1 run in 8 here). Written so that its
// writes do not depend on how often it reconciles, it makes the same
// writes, and the comparison needs no leniency.
// (diff.Options.CollapseRepeats is the leniency for controllers that
// repeat the same writes; it cannot help when a reconcile's writes
// differ from the first one's.)
func startController(t *testing.T, host string, opts ctrltest.Options) *ctrltest.Controller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	opts.Namespace, opts.Workers, opts.OnlyChanges = ctlNS, 1, true
	ctl, err := ctrltest.Start(ctx, &rest.Config{Host: host, QPS: 1000, Burst: 1000}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Stop)
	return ctl
}

// settled waits until the controller has seen the end of the scenario —
// cm-0 deleted, its child gone from its cache after it released it — and
// then made no call for a second.
func settled(t *testing.T, ctl *ctrltest.Controller) {
	t.Helper()
	wttest.WaitFor(t, 2*time.Minute, func() bool {
		return ctl.Cached(ctlNS+"/cm-0") == nil && ctl.Cached(ctlNS+"/cm-0"+ctrltest.ChildSuffix) == nil &&
			ctl.Cached(ctlNS+"/cm-3"+ctrltest.ChildSuffix) != nil
	}, "the controller to see cm-0 and its child deleted (its cache: %v)", ctl.Keys())
	wttest.WaitStill(t, 2*time.Minute, time.Second, ctl.CallCount, "the controller to go quiet")
}
