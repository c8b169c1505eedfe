package record_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/record"
	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// write is one write of a session: method, target and request body.
type write struct{ method, target, body string }

// sessionWrites lists the writes a session holds, with the status of
// each answer, sorted.
func sessionWrites(t *testing.T, path string) []string {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ws := map[int64]*write{}
	status := map[int64]int{}
	var ids []int64
	for _, x := range f.Index().Exchanges {
		switch x.Request.Method {
		case "POST", "PUT", "PATCH", "DELETE":
			ws[x.Request.Exchange] = &write{method: x.Request.Method, target: x.Request.Target}
			ids = append(ids, x.Request.Exchange)
			if x.Response != nil {
				status[x.Request.Exchange] = x.Response.Status
			}
		}
	}
	for rec, err := range f.ExchangeRecords(ids...).All() {
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := rec.(*formats.Body); ok && b.Dir == formats.ClientToServer {
			ws[b.Exchange].body += string(b.Data)
		}
	}
	var out []string
	for _, id := range ids {
		w := ws[id]
		out = append(out, writeLine(w.method, w.target, status[id], w.body))
	}
	sort.Strings(out)
	return out
}

// quietController waits until the controller makes no call for a second.
func quietController(t *testing.T, ctl *ctrltest.Controller) {
	t.Helper()
	wttest.WaitStill(t, 2*time.Minute, time.Second, ctl.CallCount, "the controller to go quiet")
}

// TestProxyRecordingReplayed: a session recorded through the recording
// proxy in front of a real kube-apiserver while a real controller ran
// (shared informers, a workqueue, writes of every verb), replayed to the
// same controller with a Recorder (wtrace replay --out), the environment's
// changes applied at the quiet pace: the controller makes the same calls with the same outcomes, and
// wtrace diff's verdict on the recording and the run is "same".
func TestProxyRecordingReplayed(t *testing.T) {
	c := k8stest.Start(t)
	const ns = "ctl"
	hdr := http.Header{"Content-Type": {"application/json"}}
	workload := func(method, path, body string, want int) {
		t.Helper()
		if resp, b := c.Do(method, path, hdr, []byte(body)); resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	workload("POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`, 201)
	for i := range 3 {
		workload("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"k":"v"}}`, i), 201)
	}

	// Record: the controller runs through the proxy while the workload
	// (straight to the apiserver) changes its world.
	session := filepath.Join(t.TempDir(), "session.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: session}})
	run := func(host string, timeout time.Duration) *ctrltest.Controller {
		t.Helper()
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		t.Cleanup(cancel)
		ctl, err := ctrltest.Start(cctx, &rest.Config{Host: host, QPS: 1000, Burst: 1000}, ctrltest.Options{Namespace: ns, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		return ctl
	}
	ctl := run(px.URL, 2*time.Minute)
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}})
	applied := func(name string) func() bool {
		return func() bool {
			ch, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name+ctrltest.ChildSuffix, metav1.GetOptions{})
			return err == nil && ch.Labels[ctrltest.AppliedLabel] == "yes"
		}
	}
	for i := range 3 {
		wttest.WaitFor(t, time.Minute, applied(fmt.Sprintf("cm-%d", i)), "cm-%d's child applied", i)
	}
	workload("POST", "/api/v1/namespaces/"+ns+"/configmaps", `{"metadata":{"name":"cm-3"},"data":{"k":"v","l":"w"}}`, 201)
	wttest.WaitFor(t, time.Minute, applied("cm-3"), "cm-3's child applied")
	workload("DELETE", "/api/v1/namespaces/"+ns+"/configmaps/cm-0", "", 200)
	wttest.WaitFor(t, time.Minute, func() bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "cm-0"+ctrltest.ChildSuffix, metav1.GetOptions{})
		return err != nil
	}, "cm-0's child deleted")
	quietController(t, ctl)
	if f := ctl.Failures(); len(f) > 0 {
		t.Fatalf("failed calls against the apiserver: %v", f)
	}
	recordedCalls := ctl.Calls()
	ctl.Stop()
	px.Stop()
	want := sessionWrites(t, session)
	if len(want) < 10 {
		t.Fatalf("the recording holds %d writes:\n%s", len(want), strings.Join(want, "\n"))
	}

	// Replay it to the same controller, recording the run, each change of
	// the environment applied once the controller has gone quiet: the
	// recorded pace (the recording spans well under a second) would judge
	// how fast the controller is under -race, not what it does. The replay is an apiserver whose world is the recording's
	// environment: the controller's own writes (the recorded ones are its
	// expected output) land in the world when it makes them, so the
	// Deployment it creates gets a new uid and resourceVersions of the
	// replay's, as a real apiserver would give it. The run is judged as a
	// user judges it: wtrace diff's default verdict says "same".
	runPath := filepath.Join(t.TempDir(), "run.wt")
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: runPath}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := replay.Open(session, replay.Options{Speed: 1, Pace: replay.PaceQuiet, Out: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ctl = run(srv.URL, 4*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatalf("the run did not settle within 3 minutes; calls %v", ctl.Calls())
	}
	quietController(t, ctl)
	replayedCalls := ctl.Calls()
	failures := ctl.Failures()
	ctl.Stop()
	env := srv.Environment()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Errorf("failed calls against the replay: %v", failures)
	}
	// ctrltest writes the resourceVersion it first saw a ConfigMap at into
	// an annotation; the world numbers the run's writes anew, so that
	// copy is left out as a user checking such a controller would.
	rep, err := diff.Sessions(session, runPath, diff.Options{Ignore: []string{"/metadata/annotations/" + strings.ReplaceAll(ctrltest.SeenAnnotation, "/", "~1")}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Same {
		var b strings.Builder
		rep.WriteText(&b, diff.TextOptions{})
		t.Errorf("wtrace diff recorded run: not the same\n%s", b.String())
	}
	got := sessionWrites(t, runPath)
	t.Logf("%s", env)
	t.Logf("%d writes recorded, %d in the run; calls recorded %v, replayed %v",
		len(want), len(got), recordedCalls, replayedCalls)
}

// writeLine is how the tests compare a write: method, target, the status
// of its answer, the request body.
func writeLine(method, target string, status int, body string) string {
	return fmt.Sprintf("%s %s %d %q", method, target, status, body)
}
