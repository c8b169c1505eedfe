package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

const basicNS = "corpus-basic"

// world lists the ConfigMaps of the replay's world with a label selector
// (a LIST the session did not record, so the world answers it).
func world(t *testing.T, cs kubernetes.Interface, selector string) map[string]corev1.ConfigMap {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(basicNS).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("LIST configmaps?labelSelector=%s: %v", selector, err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, cm := range l.Items {
		out[cm.Name] = cm
	}
	return out
}

// reconciled reports whether every parent of the world carries what the
// controller writes and has its applied child, and no child outlived its
// parent.
func reconciled(t *testing.T, cs kubernetes.Interface) bool {
	parents := world(t, cs, "!"+ctrltest.AppliedLabel)
	children := world(t, cs, ctrltest.AppliedLabel+"=yes")
	if len(parents) == 0 {
		return false
	}
	for name, p := range parents {
		if p.Labels[ctrltest.PatchedLabel] != "yes" || p.Annotations[ctrltest.SeenAnnotation] == "" {
			return false
		}
		if _, ok := children[name+ctrltest.ChildSuffix]; !ok {
			return false
		}
	}
	for name := range children {
		if _, ok := parents[strings.TrimSuffix(name, ctrltest.ChildSuffix)]; !ok {
			return false
		}
	}
	return true
}

// TestControllerOnReplay runs a real client-go controller (shared
// informers, a workqueue, GETs, writes of every verb: create, update,
// JSON merge, JSON and strategic merge patches, server-side apply,
// delete, a status subresource) against a replay of basic-json, which was
// recorded without it, over HTTP, in JSON and in protobuf: no call fails
// that an apiserver would have accepted, every parent ends up reconciled
// in the replay's world, and the calls stay in proportion to the
// reconciles (no retry storm). With WritesApply the controller sees its
// own writes through its informers: the status it set, the annotation it
// patched.
func TestControllerOnReplay(t *testing.T) {
	path := replay.CorpusSession(t, "basic-json")
	for _, mode := range []replay.Writes{replay.WritesAnswer, replay.WritesApply} {
		for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
			t.Run(string(mode)+"/"+ct, func(t *testing.T) {
				srv := replaytest.NewServer(t, path, replay.Options{Speed: 0, Writes: mode})
				cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}, QPS: 1000, Burst: 1000}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				ctl, err := ctrltest.Start(ctx, cfg, ctrltest.Options{Namespace: basicNS})
				if err != nil {
					t.Fatal(err)
				}
				defer ctl.Stop()
				cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
				wttest.WaitFor(t, time.Minute, func() bool { return reconciled(t, cs) }, "every parent reconciled in the world")
				if mode == replay.WritesApply {
					wttest.WaitFor(t, time.Minute, func() bool {
						d := ctl.CachedDeployment(basicNS + "/" + ctl.DeploymentName())
						return d != nil && d.Status.Replicas == 1
					}, "the status the controller set in its informer's cache")
					wttest.WaitFor(t, time.Minute, func() bool {
						for _, k := range ctl.Keys() {
							if cm := ctl.Cached(k); cm != nil && !strings.HasSuffix(cm.Name, ctrltest.ChildSuffix) && cm.Annotations[ctrltest.SeenAnnotation] != "" {
								return true
							}
						}
						return false
					}, "the annotation the controller patched in its informer's cache")
				}
				if f := ctl.Failures(); len(f) > 0 {
					t.Fatalf("failed calls: %v", f)
				}
				// It goes quiet: no call for a while (a retry storm, or a
				// controller its own writes keep triggering, never does).
				quiet(t, ctl)
				writes := srv.Writes()
				if w, r := ctl.Writes(), ctl.Reconciles(); r > 3*basicNotifications || w > 8*r {
					t.Fatalf("%d writes (%d seen by the replay) for %d reconciles of %d recorded notifications: a retry storm", w, len(writes), r, basicNotifications)
				}
				hows := map[string]int{}
				for _, w := range writes {
					hows[fmt.Sprintf("%s %s %d", w.Method, w.How, w.Status)]++
					if w.Status >= 500 || w.Status == http.StatusNotFound && w.Method == http.MethodPost {
						t.Errorf("%s %s: %d %s", w.Method, w.Target, w.Status, w.Response)
					}
				}
				t.Logf("%d reconciles; controller calls %v; replay answers %v", ctl.Reconciles(), ctl.Calls(), hows)
			})
		}
	}
}

// basicNotifications is the number of ConfigMap notifications basic-json
// gives an informer: a LIST of 5, 200 watch events.
const basicNotifications = 205

// quiet waits until the controller makes no call for half a second (a
// minute at most).
func quiet(t *testing.T, ctl *ctrltest.Controller) {
	t.Helper()
	count := func() int {
		n := 0
		for _, v := range ctl.Calls() {
			n += v
		}
		return n
	}
	last, since := count(), time.Now()
	wttest.WaitFor(t, time.Minute, func() bool {
		if n := count(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 500*time.Millisecond
	}, "the controller to go quiet (%d calls so far)", last)
}

// TestWriteSemantics checks, through a clientset against a replay, the
// answers an apiserver gives: a second create is 409 AlreadyExists, an
// update with an old resourceVersion 409 Conflict, a patch of a deleted
// object 404, a delete of an object with a finalizer sets its
// deletionTimestamp (and removing the finalizer deletes it), dryRun=All
// answers without changing anything.
func TestWriteSemantics(t *testing.T) {
	srv := replaytest.NewServer(t, replay.CorpusSession(t, "basic-json"), replay.Options{Speed: 0})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	cms := cs.CoreV1().ConfigMaps(basicNS)
	ctx := context.Background()
	cm := func(name string, fins ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: fins}, Data: map[string]string{"k": "v"}}
	}

	a, err := cms.Create(ctx, cm("sem-a"), metav1.CreateOptions{})
	if err != nil || a.UID == "" || a.ResourceVersion == "" || a.CreationTimestamp.IsZero() {
		t.Fatalf("create = %+v, %v; want a completed object", a, err)
	}
	if _, err := cms.Create(ctx, cm("sem-a"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v; want 409 AlreadyExists", err)
	}
	a.Data["k"] = "w"
	b, err := cms.Update(ctx, a, metav1.UpdateOptions{})
	if err != nil || b.ResourceVersion == a.ResourceVersion {
		t.Fatalf("update = %+v, %v; want a new resourceVersion", b, err)
	}
	a.Data["k"] = "x"
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with the old resourceVersion %s: %v; want 409 Conflict", a.ResourceVersion, err)
	}
	if err := cms.Delete(ctx, "sem-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, "sem-a", types.MergePatchType, []byte(`{"data":{"k":"y"}}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch of a deleted object: %v; want 404 NotFound", err)
	}

	if _, err := cms.Create(ctx, cm("sem-b", "example.com/hold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "sem-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(ctx, "sem-b", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("GET after deleting an object with a finalizer = %+v, %v; want it with its deletionTimestamp", held, err)
	}
	if _, err := cms.Patch(ctx, "sem-b", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "sem-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("GET after the last finalizer went: %v; want 404", err)
	}

	dry := []string{metav1.DryRunAll}
	if c, err := cms.Create(ctx, cm("sem-c"), metav1.CreateOptions{DryRun: dry}); err != nil || c.Name != "sem-c" {
		t.Fatalf("dry-run create = %+v, %v", c, err)
	}
	if _, err := cms.Get(ctx, "sem-c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("GET after a dry-run create: %v; want 404", err)
	}
	d, _ := cms.Create(ctx, cm("sem-d"), metav1.CreateOptions{})
	if err := cms.Delete(ctx, "sem-d", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Fatal(err)
	}
	if got, err := cms.Get(ctx, "sem-d", metav1.GetOptions{}); err != nil || got.ResourceVersion != d.ResourceVersion {
		t.Errorf("GET after a dry-run delete = %v, %v; want it unchanged", got, err)
	}

	// The request log holds every write with its body and answer.
	var creates, conflicts int
	for _, w := range srv.Writes() {
		switch {
		case w.Method == http.MethodPost && w.Status == http.StatusCreated && strings.Contains(string(w.Body), `"sem-a"`):
			creates++
		case w.Method == http.MethodPut && w.Status == http.StatusConflict && strings.Contains(string(w.Response), `"Conflict"`):
			conflicts++
		}
	}
	if creates != 1 || conflicts != 1 {
		t.Errorf("request log: %d creates of sem-a, %d conflicting updates; want 1, 1", creates, conflicts)
	}
}

// TestWritesRejectAndRecorded: WritesReject answers writes 403 Forbidden
// and reads as before; WritesRecorded answers a write the session did not
// record 404, as replays always did.
func TestWritesRejectAndRecorded(t *testing.T) {
	path := replay.CorpusSession(t, "basic-json")
	ctx := context.Background()
	for _, c := range []struct {
		mode replay.Writes
		ok   func(error) bool
	}{{replay.WritesReject, apierrors.IsForbidden}, {replay.WritesRecorded, apierrors.IsNotFound}} {
		srv := replaytest.NewServer(t, path, replay.Options{Speed: 0, Writes: c.mode})
		cms := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}).CoreV1().ConfigMaps(basicNS)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !c.ok(err) {
			t.Errorf("%s: create: %v", c.mode, err)
		}
		if l, err := cms.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) == 0 {
			t.Errorf("%s: LIST = %v, %v; want the recorded LIST", c.mode, l, err)
		}
		if w := srv.Writes(); len(w) != 1 || w[0].Status != map[replay.Writes]int{replay.WritesReject: 403, replay.WritesRecorded: 404}[c.mode] {
			t.Errorf("%s: request log %+v", c.mode, w)
		}
	}
}
