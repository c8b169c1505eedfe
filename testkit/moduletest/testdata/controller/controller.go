// Package controller is a controller module as an operator's repository
// holds one: pinned to client-go v0.33 and Go 1.24, a client-go
// controller (testkit/ctrltest's behaviour, written against v0.33's API),
// and a regression test (regression_test.go) that replays its recorded
// session with package wtracetest, which it adds to its go.mod.
package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	childSuffix  = "-child"
	seen         = "wtrace.test/seen"
	finalizer    = "wtrace.test/hold"
	appliedLabel = "wtrace.test/applied"
	patchedLabel = "wtrace.test/patched"
	fieldManager = "wtrace-ctrltest"
)

// Config is the client configuration of a kubeconfig file, as main reads
// its --kubeconfig.
func Config(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return cfg, nil
}

// Controller reconciles the ConfigMaps of one namespace: for each parent
// (a name without childSuffix) it annotates it once, creates or updates
// its child, applies a label on the child, patches a label on the parent,
// and keeps a Deployment's status; a parent gone, it releases and deletes
// its child. It writes only what changes something.
type Controller struct {
	ns     string
	cs     kubernetes.Interface
	f      informers.SharedInformerFactory
	cms    cache.SharedIndexInformer
	queue  workqueue.TypedRateLimitingInterface[string]
	cancel context.CancelFunc
	done   sync.WaitGroup

	depMu      sync.Mutex
	depCreated bool
}

// Start runs the controller on namespace ns until Stop.
func Start(ctx context.Context, cfg *rest.Config, ns string) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Controller{ns: ns, cs: cs, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	c.f = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	c.cms = c.f.Core().V1().ConfigMaps().Informer()
	c.f.Apps().V1().Deployments().Informer()
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(k)
		}
	}
	if _, err := c.cms.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue}); err != nil {
		cancel()
		return nil, err
	}
	c.f.Start(ctx.Done())
	for typ, ok := range c.f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			c.f.Shutdown()
			return nil, fmt.Errorf("controller: %v did not sync", typ)
		}
	}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for c.next(ctx) {
		}
	}()
	return c, nil
}

// Stop ends the controller and waits for it.
func (c *Controller) Stop() {
	c.cancel()
	c.queue.ShutDown()
	c.done.Wait()
	c.f.Shutdown()
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.reconcile(ctx, key); err != nil {
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || strings.HasSuffix(name, childSuffix) {
		return nil
	}
	cms := c.cs.CoreV1().ConfigMaps(ns)
	child := name + childSuffix
	if _, ok, _ := c.cms.GetStore().GetByKey(key); !ok {
		patch := []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)
		if _, err := cms.Patch(ctx, child, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			return ignore(err, apierrors.IsNotFound, apierrors.IsInvalid)
		}
		return ignore(cms.Delete(ctx, child, metav1.DeleteOptions{}), apierrors.IsNotFound)
	}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ignore(err, apierrors.IsNotFound)
	}
	if cm.Annotations[seen] == "" {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{seen: "reconciled:" + cm.Name}}})
		if _, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: child, Namespace: ns, Finalizers: []string{finalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: cm.UID}}},
		Data: map[string]string{"parent": name, "keys": fmt.Sprint(len(cm.Data))},
	}
	cur, err := cms.Get(ctx, child, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
		if _, err := cms.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		} else if err != nil {
			got, err := cms.Get(ctx, child, metav1.GetOptions{})
			if err != nil {
				return ignore(err, apierrors.IsNotFound)
			}
			upd := got.DeepCopy()
			upd.Data = want.Data
			if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	case err != nil:
		return err
	case !maps.Equal(cur.Data, want.Data):
		upd := cur.DeepCopy()
		upd.Data = want.Data
		if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if cur == nil || cur.Labels[appliedLabel] != "yes" {
		ac := corev1ac.ConfigMap(child, ns).WithLabels(map[string]string{appliedLabel: "yes"})
		if _, err := cms.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: fieldManager}); err != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	if cm.Labels[patchedLabel] != "yes" {
		smp := []byte(`{"metadata":{"labels":{"` + patchedLabel + `":"yes"}}}`)
		if _, err := cms.Patch(ctx, name, types.StrategicMergePatchType, smp, metav1.PatchOptions{}); err != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	return c.deployment(ctx, ns)
}

// deployment creates the controller's Deployment once and sets its status.
func (c *Controller) deployment(ctx context.Context, ns string) error {
	c.depMu.Lock()
	created := c.depCreated
	c.depCreated = true
	c.depMu.Unlock()
	deps := c.cs.AppsV1().Deployments(ns)
	name := ns + "-ctl"
	if !created {
		one := int32(1)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		if _, err := deps.Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return wait.ExponentialBackoff(wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}, func() (bool, error) {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 1 {
			return true, nil
		}
		d.Status.ObservedGeneration, d.Status.Replicas = d.Generation, 1
		_, err = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func ignore(err error, fns ...func(error) bool) error {
	for _, fn := range fns {
		if err != nil && fn(err) {
			return nil
		}
	}
	return err
}
