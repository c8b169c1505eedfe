package replay_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
)

// TestBindOnReplay: a Pod bound through client-go's Bind (the scheduler's
// pods/NAME/binding) on a world replay gets its node and the PodScheduled
// condition, as a new version a watch of Pods sees; a second binding is a
// 409 Conflict, as from kube-apiserver.
func TestBindOnReplay(t *testing.T) {
	srv := replaytest.NewServer(t, replay.CorpusSession(t, "basic-json"), replay.Options{Writes: replay.WritesAnswer})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods := cs.CoreV1().Pods(basicNS)
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		got, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type != "MODIFIED" || got.Spec.NodeName != "node-1" {
			t.Fatalf("after the binding the watch sent %s %T; want MODIFIED of the Pod on node-1", ev.Type, ev.Object)
		}
		if got.ResourceVersion == p.ResourceVersion || len(got.Status.Conditions) != 1 ||
			got.Status.Conditions[0].Type != corev1.PodScheduled || got.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("bound Pod at %s (created at %s), conditions %+v; want a new version, PodScheduled True",
				got.ResourceVersion, p.ResourceVersion, got.Status.Conditions)
		}
	case <-ctx.Done():
		t.Fatal("no watch event within a minute of the binding")
	}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("second bind: %v; want a Conflict", err)
	}
	if got, err := pods.Get(ctx, "bound", metav1.GetOptions{}); err != nil || got.Spec.NodeName != "node-1" {
		t.Errorf("GET after the binding: %v, node %q; want node-1", err, got.Spec.NodeName)
	}
}
