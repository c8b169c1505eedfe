package bugctl

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Play plays the scenario the controller is recorded in, against cs (the
// apiserver, directly) in namespace ns (which it creates): parents p1, p2
// and p3 created one after the other, each once the controller gave it
// its child; then p3 marked deleting and, once its child is gone,
// deleted. It returns once the controller is done with each step (a
// minute at most each).
func Play(ctx context.Context, cs kubernetes.Interface, ns string, logf func(string, ...any)) error {
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	children := func(parent string) (int, error) {
		l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: ParentLabel + "=" + parent + "," + ChildrenOnly})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
	until := func(what string, cond func() (bool, error)) error {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			ok, err := cond()
			if err != nil {
				return err
			}
			if ok {
				logf("bugctl scenario: %s", what)
				time.Sleep(500 * time.Millisecond) // the controller goes quiet
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("bugctl scenario: %s: not within a minute", what)
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p, Labels: map[string]string{RoleLabel: ParentRole}}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := until(p+" has its child", func() (bool, error) { n, err := children(p); return n == 1, err }); err != nil {
			return err
		}
	}
	patch := []byte(`{"metadata":{"labels":{"` + StateLabel + `":"` + Deleting + `"}}}`)
	if _, err := cms.Patch(ctx, "p3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := until("p3 deleting: its child is gone", func() (bool, error) { n, err := children("p3"); return n == 0, err }); err != nil {
		return err
	}
	if err := cms.Delete(ctx, "p3", metav1.DeleteOptions{}); err != nil {
		return err
	}
	time.Sleep(time.Second)
	logf("bugctl scenario: p3 deleted")
	return nil
}
