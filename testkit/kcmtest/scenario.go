// Package kcmtest plays a kubectl-like scenario against an apiserver for
// tests of the upstream kube-controller-manager (kcm), and records kcm
// through `record --proxy` while it plays.
//
// A Scenario is a table of Steps — create a namespace and its
// ServiceAccount "default", create Deployments, scale one, set the image
// of one, delete one — each sent as kubectl sends it (same verb, path,
// query and body shape). After each step Play waits for the controllers
// to have converged: every Deployment's observedGeneration equals its
// generation, its ReplicaSets' and Pods' counts agree with each other and
// with what the step implies (Step.Want), and nothing in the namespace has
// changed for Options.Quiet. So two recordings of one scenario are the
// same scenario, the controllers' reactions to one step complete before
// the next. When the controllers do not converge (kcm without the
// replicaset controller: the Pods never appear), Play goes on once the
// namespace has been quiet for Options.Settle, or at Options.StepDeadline:
// the step's result says it did not converge; it is not an error.
//
// Record runs it all: a real apiserver (testkit/k8stest), the recording
// proxy in front of it (testkit/proxytest), kcm pointed at the proxy, the
// scenario played against the apiserver directly (the environment, as a
// user's kubectl would be), and returns the session of kcm's traffic.
//
// Everything here is for tests; nothing in the wtrace binary imports it.
package kcmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/testkit/kubelettest"
)

// UserAgent is the scenario client's User-Agent: kubectl's, as the
// v1.33.13 binary built from the module proxy sends it.
const UserAgent = "kubectl/v1.33.13 (linux/amd64) kubernetes/$Format"

// Op is what a Step does, as the kubectl command of its name does it.
type Op int

const (
	// CreateNamespace: kubectl create namespace NAME.
	CreateNamespace Op = iota
	// CreateServiceAccount: kubectl create serviceaccount NAME.
	CreateServiceAccount
	// CreateDeployment: kubectl create deployment NAME --image=IMAGE
	// --replicas=N.
	CreateDeployment
	// Scale: kubectl scale deployment NAME --replicas=N (a merge patch of
	// the scale subresource).
	Scale
	// SetImage: kubectl set image deployment/NAME CONTAINER=IMAGE (a GET,
	// then a strategic merge patch).
	SetImage
	// DeleteDeployment: kubectl delete deployment NAME (propagation
	// Background; then it waits until the Deployment is gone).
	DeleteDeployment
	// DeleteNamespace: kubectl delete namespace NAME (Background; then it
	// waits until the namespace is gone, which only the namespace
	// controller achieves; it waits 5 s before it acts, so the step's
	// Settle defaults to 10 s).
	DeleteNamespace
)

var opNames = [...]string{"create namespace", "create serviceaccount", "create deployment", "scale", "set image", "delete deployment", "delete namespace"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Step is one command of the scenario.
type Step struct {
	Op Op
	// Name is the object's (the namespace's for the namespace steps; the
	// ServiceAccount's, the Deployment's otherwise).
	Name string
	// Replicas is CreateDeployment's and Scale's --replicas.
	Replicas int32
	// Image is CreateDeployment's --image and SetImage's new image (of the
	// container named after the first image, as kubectl create names it).
	Image string
	// Settle, if not 0, is the step's Options.Settle.
	Settle time.Duration
	// Want, if not nil, is the Deployment's status.replicas once the
	// controllers have converged after this step (for CreateDeployment and
	// Scale it defaults to Replicas): a rolling update whose Pods never
	// become ready (no kubelet here) stops with the surge of new Pods
	// beside the old ones.
	Want *int32
}

func (s Step) String() string {
	switch s.Op {
	case CreateDeployment:
		return fmt.Sprintf("%s %s --image=%s --replicas=%d", s.Op, s.Name, s.Image, s.Replicas)
	case Scale:
		return fmt.Sprintf("%s deployment %s --replicas=%d", s.Op, s.Name, s.Replicas)
	case SetImage:
		return fmt.Sprintf("%s deployment/%s %s", s.Op, s.Name, s.Image)
	}
	return fmt.Sprintf("%s %s", s.Op, s.Name)
}

// Namespace is the default scenario's namespace.
const Namespace = "kcm-scenario"

// DefaultSteps is the default scenario in Namespace: the namespace and its
// ServiceAccount "default"; Deployments web, api and db of 2 replicas;
// api scaled to 5; the image of web changed; db deleted. Its Deployments'
// container images are never pulled (no kubelet runs).
func DefaultSteps() []Step {
	three := int32(3)
	return []Step{
		{Op: CreateNamespace, Name: Namespace},
		{Op: CreateServiceAccount, Name: "default"},
		{Op: CreateDeployment, Name: "web", Image: "nginx:1.27", Replicas: 2},
		{Op: CreateDeployment, Name: "api", Image: "nginx:1.27", Replicas: 2},
		{Op: CreateDeployment, Name: "db", Image: "nginx:1.27", Replicas: 2},
		{Op: Scale, Name: "api", Replicas: 5},
		// maxSurge 25% of 2 rounds up to 1, maxUnavailable down to 0: one
		// new Pod beside the two old ones, which cannot go before it is
		// available.
		{Op: SetImage, Name: "web", Image: "nginx:1.28", Want: &three},
		{Op: DeleteDeployment, Name: "db"},
	}
}

// Options configure Play.
type Options struct {
	// Steps are played in order (default DefaultSteps()). The namespace
	// is the one of the first CreateNamespace step (default Namespace).
	Steps []Step
	// Quiet is how long nothing in the namespace must have changed, once
	// converged, before the next step (default 1 s).
	Quiet time.Duration
	// Settle is how long nothing must have changed for a step that has
	// not converged to be given up (default 5 s).
	Settle time.Duration
	// StepDeadline bounds each step's wait (default 1 minute).
	StepDeadline time.Duration
	// Logf, if set, logs each step and how it ended (t.Logf).
	Logf func(format string, args ...any)
	// Kubelet, if set, plays a node's kubelet as part of the
	// environment: each Pod of the namespace is reported running and
	// ready (its status written) this long after it is created, so that
	// Deployments become available. Zero: no kubelet (Pods stay Pending).
	Kubelet time.Duration
}

// Result is how one step ended.
type Result struct {
	Step Step
	// Converged: the controllers did what the step implies; otherwise the
	// step was given up after quiet (Settle) or at the deadline.
	Converged bool
	// Took is the step's command and wait.
	Took time.Duration
}

// Play plays the scenario against the apiserver of cfg (a copy of cfg is
// used, with UserAgent), waiting after each step as the package doc says,
// and after the last until the namespace is quiet. It returns each step's
// Result; an error is a command the apiserver refused or ctx's end.
func Play(ctx context.Context, cfg *rest.Config, opts Options) ([]Result, error) {
	if len(opts.Steps) == 0 {
		opts.Steps = DefaultSteps()
	}
	if opts.Quiet == 0 {
		opts.Quiet = time.Second
	}
	if opts.Settle == 0 {
		opts.Settle = 5 * time.Second
	}
	if opts.StepDeadline == 0 {
		opts.StepDeadline = time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	ns := Namespace
	for _, s := range opts.Steps {
		if s.Op == CreateNamespace {
			ns = s.Name
			break
		}
	}
	c := rest.CopyConfig(cfg)
	c.UserAgent = UserAgent
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	w := newWatcher(cs, ns)
	defer w.stop()
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	if opts.Kubelet > 0 {
		kc := rest.CopyConfig(cfg)
		kc.UserAgent = kubelettest.UserAgent
		kcs, err := kubernetes.NewForConfig(kc)
		if err != nil {
			return nil, err
		}
		k := kubelettest.Start(ctx, kcs, ns, kubelettest.Options{Ready: opts.Kubelet})
		defer k.Stop()
	}
	want := map[string]expect{} // Deployment → what converged means
	var res []Result
	for _, s := range opts.Steps {
		t0 := time.Now()
		if err := do(ctx, cs, ns, s); err != nil {
			return res, fmt.Errorf("kcmtest: %s: %w", s, err)
		}
		gone := ""
		switch s.Op {
		case CreateDeployment, Scale:
			want[s.Name] = expect{replicas: s.Replicas}
		case DeleteDeployment:
			delete(want, s.Name)
		case DeleteNamespace:
			clear(want)
			gone = s.Name
		}
		if s.Want != nil {
			want[s.Name] = expect{replicas: *s.Want}
		}
		o := opts
		switch {
		case s.Settle != 0:
			o.Settle = s.Settle
		case s.Op == DeleteNamespace && o.Settle < 10*time.Second:
			o.Settle = 10 * time.Second
		}
		ok, err := w.wait(ctx, o, func() bool { return w.converged(want, gone) })
		if err != nil {
			return res, err
		}
		r := Result{Step: s, Converged: ok, Took: time.Since(t0)}
		opts.Logf("kcmtest: %s: converged %v after %v", s, ok, r.Took.Round(time.Millisecond))
		res = append(res, r)
	}
	return res, nil
}

type expect struct{ replicas int32 }

// do sends the step's requests as kubectl does.
func do(ctx context.Context, cs *kubernetes.Clientset, ns string, s Step) error {
	create := metav1.CreateOptions{FieldManager: "kubectl-create", FieldValidation: "Strict"}
	bg := metav1.DeletePropagationBackground
	switch s.Op {
	case CreateNamespace:
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Name}}, create)
		return err
	case CreateServiceAccount:
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns}}, create)
		return err
	case CreateDeployment:
		labels := map[string]string{"app": s.Name}
		replicas := s.Replicas
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName(s.Image), Image: s.Image}}},
				},
			},
		}
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, create)
		return err
	case Scale:
		body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, s.Replicas)
		return cs.AppsV1().RESTClient().Patch(types.MergePatchType).Namespace(ns).Resource("deployments").Name(s.Name).
			SubResource("scale").Body(body).Do(ctx).Error()
	case SetImage:
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(d.Spec.Template.Spec.Containers) == 0 {
			return fmt.Errorf("deployment %s has no container", s.Name)
		}
		name := d.Spec.Template.Spec.Containers[0].Name
		type container struct {
			Image string `json:"image,omitempty"`
			Name  string `json:"name"`
		}
		patch := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"$setElementOrder/containers": []container{{Name: name}},
			"containers":                  []container{{Image: s.Image, Name: name}},
		}}}}
		body, _ := json.Marshal(patch)
		_, err = cs.AppsV1().Deployments(ns).Patch(ctx, s.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl-set"})
		return err
	case DeleteDeployment:
		return cs.AppsV1().Deployments(ns).Delete(ctx, s.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	case DeleteNamespace:
		err := cs.CoreV1().Namespaces().Delete(ctx, s.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return fmt.Errorf("unknown op %v", s.Op)
}

// ContainerName is the container's name kubectl create deployment derives
// from an image: its last path element without tag or digest.
func ContainerName(image string) string {
	for i := len(image) - 1; i >= 0; i-- {
		if image[i] == '/' {
			image = image[i+1:]
			break
		}
	}
	for i := 0; i < len(image); i++ {
		if image[i] == ':' || image[i] == '@' {
			return image[:i]
		}
	}
	return image
}

// watcher holds informers on the namespace's Deployments, ReplicaSets,
// Pods and Events, and the namespace itself, and notes when any changed
// last.
type watcher struct {
	ns      string
	factory informers.SharedInformerFactory
	nsInf   informers.SharedInformerFactory
	deps    cache.SharedIndexInformer
	rss     cache.SharedIndexInformer
	pods    cache.SharedIndexInformer
	nss     cache.SharedIndexInformer
	cancel  context.CancelFunc
	quiet   quietness
}

func newWatcher(cs kubernetes.Interface, ns string) *watcher {
	w := &watcher{ns: ns}
	w.quiet.touch()
	w.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	w.nsInf = informers.NewSharedInformerFactory(cs, 0)
	w.deps = w.factory.Apps().V1().Deployments().Informer()
	w.rss = w.factory.Apps().V1().ReplicaSets().Informer()
	w.pods = w.factory.Core().V1().Pods().Informer()
	ev := w.factory.Core().V1().Events().Informer()
	w.nss = w.nsInf.Core().V1().Namespaces().Informer()
	for _, inf := range []cache.SharedIndexInformer{w.deps, w.rss, w.pods, ev, w.nss} {
		inf.AddEventHandler(w.quiet.handler())
	}
	return w
}

func (w *watcher) start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	w.factory.Start(ctx.Done())
	w.nsInf.Start(ctx.Done())
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kcmtest: the informer of %v did not sync", typ)
		}
	}
	for typ, ok := range w.nsInf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kcmtest: the informer of %v did not sync", typ)
		}
	}
	return nil
}

func (w *watcher) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.factory.Shutdown()
	w.nsInf.Shutdown()
}

// wait returns true once cond holds and the namespace has been quiet for
// opts.Quiet; false once it has been quiet for opts.Settle without cond,
// or at opts.StepDeadline.
func (w *watcher) wait(ctx context.Context, opts Options, cond func() bool) (bool, error) {
	return w.quiet.wait(ctx, opts.Quiet, opts.Settle, opts.StepDeadline, cond)
}

// quietness notes when a namespace's informers last saw a change.
type quietness struct {
	mu   sync.Mutex
	last time.Time
}

func (q *quietness) touch() {
	q.mu.Lock()
	q.last = time.Now()
	q.mu.Unlock()
}

func (q *quietness) since() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return time.Since(q.last)
}

// handler touches q at every change an informer sees.
func (q *quietness) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { q.touch() },
		UpdateFunc: func(any, any) { q.touch() },
		DeleteFunc: func(any) { q.touch() },
	}
}

// wait returns true once cond holds and nothing has changed for quiet;
// false once nothing has changed for settle without cond, or after
// deadline.
func (q *quietness) wait(ctx context.Context, quiet, settle, deadline time.Duration, cond func() bool) (bool, error) {
	end := time.Now().Add(deadline)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		since := q.since()
		if since >= quiet && cond() {
			return true, nil
		}
		if since >= settle || time.Now().After(end) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// converged says whether the controllers have done what want implies:
// each wanted Deployment observed at its generation, with want's
// status.replicas, equal to the sum of its ReplicaSets' status.replicas;
// each of those ReplicaSets observed at its generation, with as many live
// Pods as it wants and reports; every other Deployment's ReplicaSets and
// Pods gone (what the garbage collector does after a delete). A namespace
// named gone must be gone.
func (w *watcher) converged(want map[string]expect, gone string) bool {
	if gone != "" {
		_, exists, _ := w.nss.GetStore().GetByKey(gone)
		return !exists
	}
	rsOf := map[types.UID][]*appsv1.ReplicaSet{}
	for _, o := range w.rss.GetStore().List() {
		rs := o.(*appsv1.ReplicaSet)
		owner := metav1.GetControllerOf(rs)
		if owner == nil {
			continue
		}
		rsOf[owner.UID] = append(rsOf[owner.UID], rs)
	}
	podsOf := map[types.UID]int32{}
	for _, o := range w.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if owner := metav1.GetControllerOf(p); owner != nil && p.DeletionTimestamp == nil {
			podsOf[owner.UID]++
		}
	}
	live := map[types.UID]bool{}
	for name, e := range want {
		o, exists, _ := w.deps.GetStore().GetByKey(w.ns + "/" + name)
		if !exists {
			return false
		}
		d := o.(*appsv1.Deployment)
		live[d.UID] = true
		if d.Status.ObservedGeneration != d.Generation || d.Status.Replicas != e.replicas {
			return false
		}
		var sum int32
		for _, rs := range rsOf[d.UID] {
			live[rs.UID] = true
			if rs.Spec.Replicas == nil || rs.Status.ObservedGeneration != rs.Generation ||
				rs.Status.Replicas != *rs.Spec.Replicas || podsOf[rs.UID] != *rs.Spec.Replicas {
				return false
			}
			sum += rs.Status.Replicas
		}
		if sum != d.Status.Replicas {
			return false
		}
	}
	for _, o := range w.rss.GetStore().List() {
		if !live[o.(*appsv1.ReplicaSet).UID] {
			return false
		}
	}
	for _, o := range w.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if owner := metav1.GetControllerOf(p); owner == nil || !live[owner.UID] {
			return false
		}
	}
	return true
}
