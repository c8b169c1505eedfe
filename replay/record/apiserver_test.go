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
// same controller with a Recorder (wtrace replay --out): the run holds the
// recording's writes — same requests, same bodies, same answers — served
// from the recorded answers.
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

	// Replay it, at the recorded pace, to the same controller, recording
	// the run.
	runPath := filepath.Join(t.TempDir(), "run.wt")
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: runPath}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := replay.Open(session, replay.Options{Speed: 1, Out: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ctl = run(srv.URL, 3*time.Minute)
	// How many times the controller repeats an idempotent write depends on
	// timing (its workqueue coalesces the events that arrive during a
	// reconcile, and a replay answers faster than an apiserver; under the
	// race detector, slower), so the run is awaited until it has made
	// every distinct recorded write — the timeline goes on at the recorded
	// pace, with pauses longer than the controller's quiet second —, then
	// until it is quiet; repeats are reported, not compared.
	wantDistinct := distinct(want)
	var missing []string
	made := func() bool {
		seen := map[string]bool{}
		for _, w := range srv.Writes() {
			seen[writeLine(w.Method, w.Target, w.Status, string(w.Body))] = true
		}
		missing = missing[:0]
		for _, w := range wantDistinct {
			if !seen[w] && !lagWrite(w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0
	}
	fromRecording := func() int {
		n := 0
		for _, w := range srv.Writes() {
			if w.How == "recorded" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(2 * time.Minute); !made(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			var log []string
			for _, w := range srv.Writes() {
				log = append(log, writeLine(w.Method, w.Target, w.Status, string(w.Body))+" "+w.How)
			}
			t.Fatalf("after 2m: the run has not made %d of the %d distinct recorded writes:\n%s\nits writes:\n%s",
				len(missing), len(wantDistinct), strings.Join(missing, "\n"), strings.Join(log, "\n"))
		}
	}
	quietController(t, ctl)
	replayedCalls := ctl.Calls()
	failures := ctl.Failures()
	ctl.Stop()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Errorf("failed calls against the replay: %v", failures)
	}
	// The same writes: every distinct write (request and answer) of the
	// recording is in the run's session, but for the writes of a stale
	// informer cache (lagWrite); no recorded answer was served more than
	// once. The run may hold more: a controller whose cache lags
	// reconciles an object again after its recorded delete (a patch
	// answered 404, an apply that creates its child anew), as it could
	// against the apiserver; those are reported, not compared.
	got := sessionWrites(t, runPath)
	gotDistinct := distinct(got)
	onlyRecorded, onlyRun := difference(wantDistinct, gotDistinct), difference(gotDistinct, wantDistinct)
	var missingRun []string
	for _, w := range onlyRecorded {
		if !lagWrite(w) {
			missingRun = append(missingRun, w)
		}
	}
	if len(missingRun) > 0 {
		t.Errorf("the run's session lacks %d recorded writes:\n%s", len(missingRun), strings.Join(missingRun, "\n"))
	}
	if n := fromRecording(); n > len(want) {
		t.Errorf("%d writes answered from the recording; want at most the %d recorded, each once", n, len(want))
	}
	if len(onlyRecorded)+len(onlyRun) > 0 {
		t.Logf("writes on one side only (timing of the controller's cache): %d recorded, %d in the run\n%s",
			len(onlyRecorded), len(onlyRun), strings.Join(onlyRun, "\n"))
	}
	t.Logf("%d writes recorded (%d distinct), %d in the run (%d answered from the recording); calls recorded %v, replayed %v",
		len(want), len(wantDistinct), len(got), fromRecording(), recordedCalls, replayedCalls)
}

// lagWrite reports whether a write line is one a controller makes only
// when its informer cache lags behind its own writes: a create answered
// 409 AlreadyExists, and the update it makes instead. Whether it happens
// depends on timing, in the recording as in the run.
func lagWrite(line string) bool {
	return strings.HasPrefix(line, "POST ") && strings.Contains(line, " 409 ") || strings.HasPrefix(line, "PUT ") && !strings.Contains(line, "/status ")
}

// difference returns the elements of sorted a that are not in sorted b.
func difference(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

// writeLine is how the tests compare a write: method, target, the status
// of its answer, the request body.
func writeLine(method, target string, status int, body string) string {
	return fmt.Sprintf("%s %s %d %q", method, target, status, body)
}

// distinct returns the sorted distinct elements of sorted ss.
func distinct(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}
