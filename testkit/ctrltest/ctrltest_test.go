package ctrltest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestAgainstAPIServer runs the controller against a real kube-apiserver:
// it reconciles every ConfigMap with no failed call, its children carry
// what it wrote, and a deleted parent's child goes away.
func TestAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	const ns = "ctl"
	hdr := http.Header{"Content-Type": {"application/json"}}
	for _, p := range []struct{ path, body string }{
		{"/api/v1/namespaces", `{"metadata":{"name":"` + ns + `"}}`},
		{"/api/v1/namespaces/" + ns + "/serviceaccounts", `{"metadata":{"name":"default"}}`},
	} {
		if resp, b := c.Do("POST", p.path, hdr, []byte(p.body)); resp.StatusCode != 201 {
			t.Fatalf("%s: %d %s", p.path, resp.StatusCode, b)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 5 {
		if resp, b := c.Do("POST", "/api/v1/namespaces/"+ns+"/configmaps", hdr, []byte(fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"k":"v"}}`, i))); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
	}
	ctl, err := ctrltest.Start(ctx, cfg, ctrltest.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	wttest.WaitFor(t, time.Minute, func() bool {
		for i := range 5 {
			ch, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d%s", i, ctrltest.ChildSuffix), metav1.GetOptions{})
			if err != nil || ch.Labels[ctrltest.AppliedLabel] != "yes" {
				return false
			}
		}
		return true
	}, "children applied")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wttest.WaitFor(t, time.Minute, func() bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm-0"+ctrltest.ChildSuffix, metav1.GetOptions{})
		return err != nil
	}, "the child of a deleted parent deleted")
	wttest.WaitFor(t, time.Minute, func() bool {
		d := ctl.CachedDeployment(ns + "/" + ctl.DeploymentName())
		return d != nil && d.Status.Replicas == 1
	}, "the status in the cache")
	if f := ctl.Failures(); len(f) > 0 {
		t.Fatalf("failed calls: %v", f)
	}
	t.Logf("calls: %v", ctl.Calls())
}
