// Package ctrltest is a small but real client-go controller for
// end-to-end tests of replays: shared informers, a rate-limited
// workqueue, GETs of single objects, and writes of every verb an apiserver
// answers. Tests run it against a replay (and against a real apiserver,
// through the recording proxy) and assert on what it saw and wrote.
//
// For every ConfigMap of its namespace whose name does not end in
// ChildSuffix, one reconcile:
//
//  1. GET the ConfigMap;
//  2. JSON merge PATCH the annotation wtrace.test/seen (the resourceVersion
//     it was first seen at), once: a controller whose own writes do not
//     trigger it again, so that it goes quiet when the world does;
//  3. CREATE its child ConfigMap "<name>-child" (owner reference, the
//     finalizer wtrace.test/hold), or, when it exists, UPDATE it with the
//     parent's data (resourceVersion from a GET);
//  4. server-side APPLY the label wtrace.test/applied on the child;
//  5. strategic merge PATCH a label on the parent;
//  6. CREATE (once) a Deployment "<namespace>-ctl" and PUT its status
//     (status.observedGeneration, status.replicas) through the status
//     subresource;
//
// and when a parent is gone: JSON PATCH away the child's finalizer and
// DELETE it. Every answer is counted by verb and code; an error the
// apiserver would not have given for the request (anything but the
// expected 409 AlreadyExists / Conflict and 404 of a race) is a failure.
//
// Everything here is for tests.
package ctrltest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
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
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// ChildSuffix ends the names of the ConfigMaps the controller creates.
const ChildSuffix = "-child"

// Annotation, Finalizer and the labels the controller writes.
const (
	SeenAnnotation = "wtrace.test/seen"
	Finalizer      = "wtrace.test/hold"
	AppliedLabel   = "wtrace.test/applied"
	PatchedLabel   = "wtrace.test/patched"
	FieldManager   = "wtrace-ctrltest"
)

// Options configure a Controller.
type Options struct {
	// Namespace is the one the controller watches and writes in.
	Namespace string
	// Workers run reconciles (default 2).
	Workers int
	// MaxReconciles stops reconciling after this many (0: no limit), so a
	// test with a long recording stays short.
	MaxReconciles int

	// The knobs of a changed controller, for tests of what a regression
	// check reports (package diff):

	// SeenValue, if set, gives the value the controller writes in the
	// SeenAnnotation of a ConfigMap (by default its resourceVersion when
	// first seen).
	SeenValue func(cm *corev1.ConfigMap) string
	// OnlyChanges makes the controller write only what changes something,
	// judged from GETs: the child is created when a GET does not find it
	// and updated when its data differ, the labels applied and patched
	// when missing, the Deployment's status set when it differs. Its
	// writes then do not depend on how often it reconciles (how its
	// workqueue coalesced events: timing); by default it writes every
	// time, as many controllers do.
	OnlyChanges bool
	// ExtraCreate, if set, names one more ConfigMap the controller
	// creates, once, after its first reconcile's writes.
	ExtraCreate string
}

// Controller is a running controller; Stop ends it.
type Controller struct {
	opts    Options
	cs      kubernetes.Interface
	factory informers.SharedInformerFactory
	cms     cache.SharedIndexInformer
	deps    cache.SharedIndexInformer
	queue   workqueue.TypedRateLimitingInterface[string]
	cancel  context.CancelFunc
	done    sync.WaitGroup

	mu         sync.Mutex
	calls      map[string]int // "verb code" → count
	failures   []string
	reconciles int

	depMu      sync.Mutex // held while the Deployment is being created
	depCreated bool

	extraOnce sync.Once
}

// Start builds the clientset from cfg and runs the controller until Stop.
// It returns once the informers have synced (or ctx ends).
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Controller, error) {
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Controller{opts: opts, cs: cs, cancel: cancel, calls: map[string]int{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	c.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(opts.Namespace))
	c.cms = c.factory.Core().V1().ConfigMaps().Informer()
	c.deps = c.factory.Apps().V1().Deployments().Informer()
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(k)
		}
	}
	if _, err := c.cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, err
	}
	c.factory.Start(ctx.Done())
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			c.factory.Shutdown()
			return nil, fmt.Errorf("ctrltest: %v did not sync", typ)
		}
	}
	for range opts.Workers {
		c.done.Add(1)
		go func() {
			defer c.done.Done()
			for c.next(ctx) {
			}
		}()
	}
	return c, nil
}

// Stop ends the controller and waits for its goroutines.
func (c *Controller) Stop() {
	c.cancel()
	c.queue.ShutDown()
	c.done.Wait()
	c.factory.Shutdown()
}

// Calls returns the answers counted so far: "verb code" → count.
func (c *Controller) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// CallCount is the number of calls made so far, every verb and answer.
func (c *Controller) CallCount() int {
	n := 0
	for _, v := range c.Calls() {
		n += v
	}
	return n
}

// Writes is the number of write calls made (every verb but get).
func (c *Controller) Writes() int {
	n := 0
	for k, v := range c.Calls() {
		if !strings.HasPrefix(k, "get ") {
			n += v
		}
	}
	return n
}

// Failures lists the answers an apiserver would not have given.
func (c *Controller) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.failures...)
}

// Reconciles is the number of reconciles done.
func (c *Controller) Reconciles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconciles
}

// Cached returns the ConfigMap of key (namespace/name) in the informer's
// cache, or nil.
func (c *Controller) Cached(key string) *corev1.ConfigMap {
	o, ok, err := c.cms.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	return o.(*corev1.ConfigMap)
}

// CachedDeployment returns the Deployment of key in the informer's cache.
func (c *Controller) CachedDeployment(key string) *appsv1.Deployment {
	o, ok, err := c.deps.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	return o.(*appsv1.Deployment)
}

// Keys lists the ConfigMaps in the informer's cache.
func (c *Controller) Keys() []string {
	ks := c.cms.GetStore().ListKeys()
	sort.Strings(ks)
	return ks
}

// DeploymentName is the Deployment the controller creates.
func (c *Controller) DeploymentName() string { return c.opts.Namespace + "-ctl" }

// count records one answer; expected says which failures are the
// apiserver's answer to a race and not a fault.
func (c *Controller) count(verb string, err error, expected ...func(error) bool) error {
	code := 200
	if err != nil {
		code = 0 // not an answer: the request failed
		if st, ok := err.(apierrors.APIStatus); ok {
			code = int(st.Status().Code)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[fmt.Sprintf("%s %d", verb, code)]++
	if err == nil {
		return nil
	}
	for _, ok := range expected {
		if ok(err) {
			return err
		}
	}
	c.failures = append(c.failures, fmt.Sprintf("%s: %v", verb, err))
	return err
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.mu.Lock()
	stop := c.opts.MaxReconciles > 0 && c.reconciles >= c.opts.MaxReconciles
	if !stop {
		c.reconciles++
	}
	c.mu.Unlock()
	if stop {
		c.queue.Forget(key)
		return true
	}
	if err := c.reconcile(ctx, key); err != nil {
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	if strings.HasSuffix(name, ChildSuffix) {
		return nil
	}
	cms := c.cs.CoreV1().ConfigMaps(ns)
	child := name + ChildSuffix
	if _, ok, _ := c.cms.GetStore().GetByKey(key); !ok {
		// The parent is gone: release and delete its child.
		patch := []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)
		if _, err := cms.Patch(ctx, child, types.JSONPatchType, patch, metav1.PatchOptions{}); c.count("patch-json", err, apierrors.IsNotFound, isInvalid) != nil {
			return ignore(err, apierrors.IsNotFound, isInvalid)
		}
		err := cms.Delete(ctx, child, metav1.DeleteOptions{})
		return ignore(c.count("delete", err, apierrors.IsNotFound), apierrors.IsNotFound)
	}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if c.count("get", err, apierrors.IsNotFound) != nil {
		return ignore(err, apierrors.IsNotFound)
	}
	if cm.Annotations[SeenAnnotation] == "" {
		seen := cm.ResourceVersion
		if c.opts.SeenValue != nil {
			seen = c.opts.SeenValue(cm)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{SeenAnnotation: seen}}})
		if _, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); c.count("patch-merge", err, apierrors.IsNotFound) != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: child, Namespace: ns, Finalizers: []string{Finalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: cm.UID}}},
		Data: map[string]string{"parent": name, "keys": fmt.Sprint(len(cm.Data))},
	}
	var cur *corev1.ConfigMap // the child, when OnlyChanges read it
	if c.opts.OnlyChanges {
		got, err := cms.Get(ctx, child, metav1.GetOptions{})
		if c.count("get", err, apierrors.IsNotFound) != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			cur = got
		}
	}
	switch {
	case cur == nil:
		_, err = cms.Create(ctx, want, metav1.CreateOptions{})
		if c.count("create", err, apierrors.IsAlreadyExists) != nil {
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
			cur, err := cms.Get(ctx, child, metav1.GetOptions{})
			if c.count("get", err, apierrors.IsNotFound) != nil {
				return ignore(err, apierrors.IsNotFound)
			}
			upd := cur.DeepCopy()
			upd.Data = want.Data
			if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); c.count("update", err, apierrors.IsConflict, apierrors.IsNotFound) != nil {
				return err
			}
		}
	case !maps.Equal(cur.Data, want.Data):
		upd := cur.DeepCopy()
		upd.Data = want.Data
		if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); c.count("update", err, apierrors.IsConflict, apierrors.IsNotFound) != nil {
			return err
		}
	}
	if cur == nil || cur.Labels[AppliedLabel] != "yes" {
		ac := corev1ac.ConfigMap(child, ns).WithLabels(map[string]string{AppliedLabel: "yes"})
		if _, err := cms.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager}); c.count("apply", err, apierrors.IsNotFound) != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	if !c.opts.OnlyChanges || cm.Labels[PatchedLabel] != "yes" {
		smp := []byte(`{"metadata":{"labels":{"` + PatchedLabel + `":"yes"}}}`)
		if _, err := cms.Patch(ctx, name, types.StrategicMergePatchType, smp, metav1.PatchOptions{}); c.count("patch-strategic", err, apierrors.IsNotFound) != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	if err := c.deployment(ctx, ns); err != nil {
		return err
	}
	var err2 error
	if c.opts.ExtraCreate != "" {
		c.extraOnce.Do(func() {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.opts.ExtraCreate, Namespace: ns}}, metav1.CreateOptions{})
			err2 = c.count("create", err)
		})
	}
	return err2
}

// deployment creates the controller's Deployment once and sets its status.
func (c *Controller) deployment(ctx context.Context, ns string) error {
	// One worker creates it; the others wait for the answer (a GET before
	// the create lands would be a 404 of the controller's own making).
	c.depMu.Lock()
	created := c.depCreated
	c.depCreated = true
	if created {
		c.depMu.Unlock()
	}
	deps := c.cs.AppsV1().Deployments(ns)
	name := c.DeploymentName()
	if !created {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		_, err := deps.Create(ctx, d, metav1.CreateOptions{})
		c.depMu.Unlock()
		if c.count("create", err, apierrors.IsAlreadyExists) != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return retryOnConflict(func() error {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if c.count("get", err) != nil {
			return err
		}
		if c.opts.OnlyChanges && d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 1 {
			return nil
		}
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas = 1
		_, err = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return c.count("update-status", err, apierrors.IsConflict)
	})
}

func retryOnConflict(fn func() error) error {
	return wait.ExponentialBackoff(wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}, func() (bool, error) {
		err := fn()
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func isInvalid(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.ReasonForError(err) == metav1.StatusReasonInvalid
}

func ignore(err error, fns ...func(error) bool) error {
	for _, fn := range fns {
		if fn(err) {
			return nil
		}
	}
	return err
}
