package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/crtest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestControllerRuntimeReplay: an operator built on controller-runtime
// (manager, cache, client, event recorder, leader election on) recorded
// through record --proxy in front of a real apiserver while ConfigMaps
// are created, changed and deleted, then its session replayed to the same
// operator: it wins its election (the recording's Lease is its own
// behaviour, not the world's), reconciles, gets no 405 or 406, no more
// 404s or failed writes than when recorded, and its run is judged the
// same as the recording.
func TestControllerRuntimeReplay(t *testing.T) {
	path := recordCRTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The replay, to the same operator.
	runPath := filepath.Join(t.TempDir(), "run.wt")
	rec := replaytest.Record(t, runPath)
	srv := replaytest.NewServer(t, path, replay.Options{Pace: replay.PaceQuiet, Out: rec})
	op2, err := crtest.Start(&rest.Config{Host: srv.URL}, crTestNS)
	if err != nil {
		t.Fatal(err)
	}
	waitElected(t, op2)
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatal("the run did not settle")
	}
	t.Logf("%s", srv.Environment())
	if err := op2.Stop(); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	defer func() {
		if t.Failed() {
			for _, r := range reqs {
				t.Logf("run: %s %s → %d (%s)", r.Method, r.Target, r.Status, r.How)
			}
		}
	}()
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	recorded404, recordedFailed := statusCounts(t, path)
	run404 := 0
	for _, r := range reqs {
		switch r.Status {
		case 405, 406:
			t.Errorf("%s %s: %d (how %s)", r.Method, r.Target, r.Status, r.How)
		case 404:
			run404++
		}
	}
	if run404 > recorded404 {
		t.Errorf("the run got %d 404s; the recording %d", run404, recorded404)
	}
	if _, runFailed := statusCounts(t, runPath); runFailed > recordedFailed {
		t.Errorf("the run's failed writes: %d; the recording's: %d", runFailed, recordedFailed)
	}
	rep, err := diff.Sessions(path, runPath, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Same {
		var sb strings.Builder
		rep.WriteText(&sb, diff.TextOptions{})
		t.Errorf("the operator's run is not the same as its recording\n%s", sb.String())
	}
}

// crTestNS is the namespace of the operator's recording.
const crTestNS = "crtest"

// recordCRTest records the operator (testkit/crtest) through record
// --proxy in front of a real apiserver while ConfigMaps are created,
// changed and deleted; it returns the session's path.
func recordCRTest(t *testing.T) string {
	t.Helper()
	c := k8stest.Start(t)
	const ns = crTestNS
	direct := &rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}}
	cs := kubernetes.NewForConfigOrDie(direct)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recorded.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: path}})
	op, err := crtest.Start(&rest.Config{Host: px.URL}, ns)
	if err != nil {
		t.Fatal(err)
	}
	waitElected(t, op)

	// The environment: ConfigMaps created, changed, deleted.
	cms := cs.CoreV1().ConfigMaps(ns)
	mirrored := func(name string, keys int) func() bool {
		return func() bool {
			m, err := cms.Get(ctx, name+"-mirror", metav1.GetOptions{})
			if keys < 0 {
				return apierrors.IsNotFound(err)
			}
			return err == nil && len(m.Data) == keys
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{crtest.Label: "true"}},
			Data: map[string]string{"k": n}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wttest.WaitFor(t, time.Minute, mirrored(n, 1), "the mirror of %s", n)
	}
	b, err := cms.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Data["k2"] = "more"
	if _, err := cms.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wttest.WaitFor(t, time.Minute, mirrored("b", 2), "the mirror of b to follow")
	if err := cms.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wttest.WaitFor(t, time.Minute, mirrored("c", -1), "the mirror of c to go")
	time.Sleep(2 * time.Second)
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	px.Stop()
	return path
}

// waitElected waits until the operator leads (30 s at most).
func waitElected(t *testing.T, op *crtest.Operator) {
	t.Helper()
	select {
	case <-op.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the operator did not win its leader election within 30 s")
	}
}

// statusCounts counts a session's answers 404, and its writes answered
// 409, 429 or 5xx.
func statusCounts(t *testing.T, path string) (notFound, failedWrites int) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, x := range f.Index().Exchanges {
		if x.Response == nil {
			continue
		}
		if x.Response.Status == 404 {
			notFound++
		}
		switch x.Request.Method {
		case "POST", "PUT", "PATCH", "DELETE":
			if s := x.Response.Status; s == 409 || s == 429 || s >= 500 {
				failedWrites++
			}
		}
	}
	return notFound, failedWrites
}
