// Package bugctl is a small client-go controller with bugs that can be
// planted one at a time, for the tests of perturbed replays (package
// replay/perturb): each bug is invisible on an unperturbed replay and
// caught by the perturbation of its class.
//
// In its namespace, every ConfigMap labelled role=parent gets one child:
// a ConfigMap created with generateName PARENT-child-, labelled
// role=child and parent=PARENT. A parent the environment marks
// state=deleting has its child deleted (the cleanup); so has a parent
// that is gone. After each reconcile, a sweep deletes the children whose
// parent does not exist.
//
// The correct controller: creates a child only for a parent its informer
// has and not deleting (else it cleans up), and only after a consistent
// LIST (resourceVersion "") of the parent's children finds none, requeueing
// on any error; cleans up on the deleting state and on the delete
// (tombstones too); sweeps from a LIST of parents served from the watch
// cache (resourceVersion 0) but confirms each orphan with a GET before
// deleting it; lets client-go wait out a 429's Retry-After. The bugs:
//
//	StaleDelete      the sweep deletes an orphan of its LIST without the GET (acts on a stale list)
//	Intermediate     the cleanup happens only on the deleting state, not on the delete (relies on
//	                 seeing every intermediate version; a relist's tombstone, and a parent its
//	                 informer no longer has, are ignored)
//	DuplicateCreate  a create that fails is retried at once, without the LIST (not idempotent after
//	                 a lost answer: a second child)
//	IgnoreRetryAfter writes go out without client-go's retries, and a 429 is retried at once
//
// Everything here is for tests.
package bugctl

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The labels the controller reads and writes.
const (
	RoleLabel     = "role"
	ParentLabel   = "parent"
	StateLabel    = "state"
	Deleting      = "deleting"
	ParentRole    = "parent"
	ChildRole     = "child"
	ParentsSelect = RoleLabel + "=" + ParentRole
	ChildrenOnly  = RoleLabel + "=" + ChildRole
)

// Bugs are the bugs planted (none: the correct controller).
type Bugs struct {
	StaleDelete, Intermediate, DuplicateCreate, IgnoreRetryAfter bool
}

// Controller is a running controller; Stop stops it.
type Controller struct {
	cs     kubernetes.Interface
	ns     string
	bugs   Bugs
	queue  workqueue.TypedRateLimitingInterface[string]
	kids   cache.Indexer
	parent cache.Indexer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	logf   func(string, ...any)
}

// Start starts the controller against cfg in namespace ns, with bugs;
// logf (nil: none) gets a line per action. It returns once its caches
// synced.
func Start(ctx context.Context, cfg *rest.Config, ns string, bugs Bugs, logf func(string, ...any)) (*Controller, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "bugctl"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Controller{cs: cs, ns: ns, bugs: bugs, cancel: cancel, logf: logf,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second))}
	parents := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ParentsSelect }))
	children := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ChildrenOnly }))
	pinf := parents.Core().V1().ConfigMaps().Informer()
	kinf := children.Core().V1().ConfigMaps().Informer()
	c.kids = kinf.GetIndexer()
	c.parent = pinf.GetIndexer()
	if _, err := pinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.enqueue(o, false) },
		UpdateFunc: func(_, o any) { c.enqueue(o, false) },
		DeleteFunc: func(o any) { c.enqueue(o, true) },
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := kinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if cm, ok := o.(*corev1.ConfigMap); ok {
				c.queue.Add(cm.Labels[ParentLabel])
			}
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	parents.Start(ctx.Done())
	children.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pinf.HasSynced, kinf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("bugctl: caches did not sync")
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for c.next(ctx) {
		}
	}()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	return c, nil
}

// Stop stops the controller and waits for its worker.
func (c *Controller) Stop() {
	c.cancel()
	c.queue.ShutDown()
	c.wg.Wait()
}

// enqueue queues a parent's reconcile: the cleanup key "delete/NAME" for
// a parent deleting or gone (with the Intermediate bug, only one seen
// deleting: a delete — from a watch or a relist's tombstone — is
// ignored).
func (c *Controller) enqueue(o any, deleted bool) {
	if deleted {
		if c.bugs.Intermediate {
			return
		}
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
	}
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return
	}
	if deleted || cm.Labels[StateLabel] == Deleting {
		c.queue.Add("delete/" + cm.Name)
		return
	}
	c.queue.Add(cm.Name)
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.reconcile(ctx, key); err != nil {
		c.logf("bugctl: %s: %v (requeued)", key, err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// reconcile makes a parent's child exist (or not), then sweeps.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	cms := c.cs.CoreV1().ConfigMaps(c.ns)
	if name, ok := cutPrefix(key, "delete/"); ok {
		if err := c.deleteChildren(ctx, name); err != nil {
			return err
		}
		return c.sweep(ctx)
	}
	if key == "" {
		return nil
	}
	// The parent as the informer has it: a key queued by a child's event,
	// or by a relist, may name a parent deleting or gone since — no child
	// for it, the cleanup instead (with Intermediate, only for one seen
	// deleting).
	o, exists, err := c.parent.GetByKey(c.ns + "/" + key)
	if err != nil {
		return err
	}
	p, _ := o.(*corev1.ConfigMap)
	switch {
	case !exists || p == nil:
		if c.bugs.Intermediate {
			return nil
		}
		return c.reconcile(ctx, "delete/"+key)
	case p.Labels[StateLabel] == Deleting:
		return c.reconcile(ctx, "delete/"+key)
	}
	l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: ParentLabel + "=" + key + "," + ChildrenOnly})
	if err != nil {
		return err
	}
	if len(l.Items) > 0 {
		return c.sweep(ctx)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: key + "-child-", Namespace: c.ns,
		Labels: map[string]string{RoleLabel: ChildRole, ParentLabel: key}}}
	for attempt := 0; ; attempt++ {
		created, err := c.create(ctx, child)
		if err == nil {
			c.logf("bugctl: created %s for %s", created.Name, key)
			break
		}
		if !c.bugs.DuplicateCreate || attempt >= 3 {
			return err
		}
		c.logf("bugctl: create for %s: %v: retrying at once", key, err)
	}
	return c.sweep(ctx)
}

// create creates a child: through client-go's typed client (which waits
// out a 429's Retry-After), or with IgnoreRetryAfter, without its
// retries, retrying a 429 at once.
func (c *Controller) create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if !c.bugs.IgnoreRetryAfter {
		return c.cs.CoreV1().ConfigMaps(c.ns).Create(ctx, cm, metav1.CreateOptions{})
	}
	for i := 0; ; i++ {
		out := &corev1.ConfigMap{}
		err := c.cs.CoreV1().RESTClient().Post().Namespace(c.ns).Resource("configmaps").MaxRetries(0).
			Body(cm).Do(ctx).Into(out)
		if !apierrors.IsTooManyRequests(err) || i >= 10 {
			return out, err
		}
	}
}

// deleteChildren deletes the children of parent (the cleanup).
func (c *Controller) deleteChildren(ctx context.Context, parent string) error {
	for _, o := range c.kids.List() {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Labels[ParentLabel] != parent {
			continue
		}
		if err := c.deleteChild(ctx, cm.Name); err != nil {
			return err
		}
		c.logf("bugctl: cleaned up %s of %s", cm.Name, parent)
	}
	return nil
}

func (c *Controller) deleteChild(ctx context.Context, name string) error {
	err := c.cs.CoreV1().ConfigMaps(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// sweep deletes the children whose parent does not exist: the parents
// from a LIST served from the watch cache (resourceVersion 0), each
// orphan confirmed by a GET of its parent (StaleDelete: not).
func (c *Controller) sweep(ctx context.Context) error {
	cms := c.cs.CoreV1().ConfigMaps(c.ns)
	l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: ParentsSelect, ResourceVersion: "0"})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range l.Items {
		have[p.Name] = true
	}
	for _, o := range c.kids.List() {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || have[cm.Labels[ParentLabel]] {
			continue
		}
		if !c.bugs.StaleDelete {
			_, err := cms.Get(ctx, cm.Labels[ParentLabel], metav1.GetOptions{})
			if err == nil {
				continue // the LIST was behind
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := c.deleteChild(ctx, cm.Name); err != nil {
			return err
		}
		c.logf("bugctl: swept orphan %s", cm.Name)
	}
	return nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
