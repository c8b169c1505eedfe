package kcmtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/testkit/kubelettest"
)

// The workloads scenario: what kube-controller-manager's job,
// statefulset, daemonset, endpointslice and disruption controllers act on,
// with the test playing the kubelets (package testkit/kubelettest: the
// Pods the controllers create are reported running and ready, a Job's
// succeeded) — in namespace WorkloadsNamespace:
//
//   - Nodes node-a and node-b registered;
//   - a headless Service web (app=web): the endpointslice controller's
//     EndpointSlice;
//   - a StatefulSet web of 2 replicas (app=web): web-0, then once it is
//     ready web-1; the EndpointSlice's endpoints;
//   - a PodDisruptionBudget web (minAvailable 1): the disruption
//     controller's status;
//   - a DaemonSet agent: one Pod per Node;
//   - a Job pi (2 completions, 2 in parallel) and an indexed Job idx (2
//     completions): their Pods run, succeed, lose their tracking
//     finalizer, the Jobs complete;
//   - the StatefulSet scaled to 3.
//
// After each step PlayWorkloads waits until what the step implies is done
// (WorkloadStep.Done) and nothing in the namespace has changed for Quiet,
// or gives the step up after Settle of quiet, or at StepDeadline.

// WorkloadsNamespace is the workloads scenario's namespace.
const WorkloadsNamespace = "kcm-workloads"

// WorkloadControllers are the kcm controllers the workloads scenario is
// for.
var WorkloadControllers = []string{"job", "statefulset", "daemonset", "endpointslice", "disruption"}

// WorkloadWatches are the collections those controllers watch (for
// proxytest.Recording.WaitWatching).
var WorkloadWatches = []string{"/api/v1/pods", "/api/v1/nodes", "/api/v1/services", "/apis/apps/v1/statefulsets",
	"/apis/apps/v1/daemonsets", "/apis/batch/v1/jobs", "/apis/policy/v1/poddisruptionbudgets", "/apis/discovery.k8s.io/v1/endpointslices"}

// WorkloadOptions configure PlayWorkloads.
type WorkloadOptions struct {
	// Quiet is how long nothing in the namespace must have changed once a
	// step is done (default 1.5 s: the job controller batches a Job's Pod
	// events for a second).
	Quiet time.Duration
	// Settle is how long nothing must have changed for a step that is not
	// done to be given up (default 5 s).
	Settle time.Duration
	// StepDeadline bounds each step's wait (default 1 minute).
	StepDeadline time.Duration
	// Kubelet configures the kubelets (default: ready after 200 ms, a
	// Job's Pods succeeded 500 ms later, Pods bound to node-a or node-b:
	// the endpointslice controller leaves out Pods on no Node).
	Kubelet kubelettest.Options
	// Logf, if set, logs each step and how it ended (t.Logf).
	Logf func(format string, args ...any)
}

// WorkloadResult is how one step of the workloads scenario ended.
type WorkloadResult struct {
	Step string
	Done bool // what the step implies happened; else it was given up
	Took time.Duration
}

// workloadStep is one command of the scenario and what done means after it.
type workloadStep struct {
	name string
	do   func(ctx context.Context, cs kubernetes.Interface) error
	done func(w *workloadWatcher) bool
}

// PlayWorkloads plays the workloads scenario against the apiserver of cfg
// (as kubectl: UserAgent), the kubelets beside it (kubelettest.UserAgent),
// and returns how each step ended; an error is a command the apiserver
// refused or ctx's end.
func PlayWorkloads(ctx context.Context, cfg *rest.Config, opts WorkloadOptions) ([]WorkloadResult, error) {
	if opts.Quiet == 0 {
		opts.Quiet = 1500 * time.Millisecond
	}
	if opts.Settle == 0 {
		opts.Settle = 5 * time.Second
	}
	if opts.StepDeadline == 0 {
		opts.StepDeadline = time.Minute
	}
	if opts.Kubelet.Ready == 0 {
		opts.Kubelet.Ready = 200 * time.Millisecond
	}
	if opts.Kubelet.Succeed == 0 {
		opts.Kubelet.Succeed = 500 * time.Millisecond
	}
	if opts.Kubelet.Nodes == nil {
		opts.Kubelet.Nodes = []string{"node-a", "node-b"}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := rest.CopyConfig(cfg)
	c.UserAgent = UserAgent
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	kc := rest.CopyConfig(cfg)
	kc.UserAgent = kubelettest.UserAgent
	kcs, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	ns := WorkloadsNamespace
	create := metav1.CreateOptions{FieldManager: "kubectl-create", FieldValidation: "Strict"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, create); err != nil {
		return nil, fmt.Errorf("kcmtest: create namespace: %w", err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, create); err != nil {
		return nil, fmt.Errorf("kcmtest: create serviceaccount: %w", err)
	}
	w := newWorkloadWatcher(cs, ns)
	defer w.stop()
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	k := kubelettest.Start(ctx, kcs, ns, opts.Kubelet)
	defer k.Stop()
	var res []WorkloadResult
	for _, s := range workloadSteps(ns, create) {
		t0 := time.Now()
		if err := s.do(ctx, cs); err != nil {
			return res, fmt.Errorf("kcmtest: %s: %w", s.name, err)
		}
		ok, err := w.wait(ctx, opts, func() bool { return s.done(w) })
		if err != nil {
			return res, err
		}
		r := WorkloadResult{Step: s.name, Done: ok, Took: time.Since(t0)}
		opts.Logf("kcmtest: %s: done %v after %v", s.name, ok, r.Took.Round(time.Millisecond))
		if !ok {
			opts.Logf("kcmtest: %s", w.state())
		}
		res = append(res, r)
	}
	return res, nil
}

func workloadSteps(ns string, create metav1.CreateOptions) []workloadStep {
	web := map[string]string{"app": "web"}
	pause := []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}
	two, one := int32(2), intstr.FromInt32(1)
	job := func(name string, mode batchv1.CompletionMode) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Completions: &two, Parallelism: &two,
			CompletionMode: &mode, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "busybox:1.36", Command: []string{"true"}}}}}}}
	}
	return []workloadStep{
		{"register nodes node-a node-b", func(ctx context.Context, cs kubernetes.Interface) error {
			for _, n := range []kubelettest.Node{{Name: "node-a", MilliCPU: 4000, MemoryMiB: 8 << 10}, {Name: "node-b", MilliCPU: 8000, MemoryMiB: 16 << 10}} {
				if err := kubelettest.Register(ctx, cs, n); err != nil {
					return err
				}
			}
			return nil
		}, func(w *workloadWatcher) bool { return true }},
		{"create service web (headless)", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: web,
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80)}}}}, create)
			return err
		}, func(w *workloadWatcher) bool { return w.endpoints("web") >= 0 }},
		{"create statefulset web --replicas=2", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: web},
				Spec: appsv1.StatefulSetSpec{Replicas: &two, ServiceName: "web", Selector: &metav1.LabelSelector{MatchLabels: web},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web}, Spec: corev1.PodSpec{Containers: pause}}}}, create)
			return err
		}, func(w *workloadWatcher) bool { return w.statefulSetReady("web", 2) && w.endpoints("web") == 2 }},
		{"create poddisruptionbudget web --min-available=1", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: web}}}, create)
			return err
		}, func(w *workloadWatcher) bool { return w.budget("web", 2) }},
		{"create daemonset agent", func(ctx context.Context, cs kubernetes.Interface) error {
			agent := map[string]string{"app": "agent"}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Labels: agent},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: agent}, Spec: corev1.PodSpec{Containers: pause}}}}, create)
			return err
		}, func(w *workloadWatcher) bool { return w.daemonSetReady("agent", 2) }},
		{"create job pi --completions=2", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, job("pi", batchv1.NonIndexedCompletion), create)
			return err
		}, func(w *workloadWatcher) bool { return w.jobComplete("pi", 2) }},
		{"create job idx --completions=2 --completion-mode=Indexed", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, job("idx", batchv1.IndexedCompletion), create)
			return err
		}, func(w *workloadWatcher) bool { return w.jobComplete("idx", 2) }},
		{"scale statefulset web --replicas=3", func(ctx context.Context, cs kubernetes.Interface) error {
			return cs.AppsV1().RESTClient().Patch("application/merge-patch+json").Namespace(ns).Resource("statefulsets").Name("web").
				SubResource("scale").Body([]byte(`{"spec":{"replicas":3}}`)).Do(ctx).Error()
		}, func(w *workloadWatcher) bool {
			return w.statefulSetReady("web", 3) && w.endpoints("web") == 3 && w.budget("web", 3)
		}},
	}
}

// workloadWatcher holds informers on the namespace's objects the
// scenario's steps are judged by, and notes when any changed last.
type workloadWatcher struct {
	factory informers.SharedInformerFactory
	infs    map[string]cache.SharedIndexInformer
	ns      string
	cancel  context.CancelFunc
	quiet   quietness
}

func newWorkloadWatcher(cs kubernetes.Interface, ns string) *workloadWatcher {
	w := &workloadWatcher{ns: ns}
	w.quiet.touch()
	w.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	w.infs = map[string]cache.SharedIndexInformer{
		"pods":   w.factory.Core().V1().Pods().Informer(),
		"sts":    w.factory.Apps().V1().StatefulSets().Informer(),
		"ds":     w.factory.Apps().V1().DaemonSets().Informer(),
		"jobs":   w.factory.Batch().V1().Jobs().Informer(),
		"pdbs":   w.factory.Policy().V1().PodDisruptionBudgets().Informer(),
		"slices": w.factory.Discovery().V1().EndpointSlices().Informer(),
		"events": w.factory.Core().V1().Events().Informer(),
	}
	for _, inf := range w.infs {
		inf.AddEventHandler(w.quiet.handler())
	}
	return w
}

func (w *workloadWatcher) start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	w.factory.Start(ctx.Done())
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kcmtest: the informer of %v did not sync", typ)
		}
	}
	return nil
}

func (w *workloadWatcher) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.factory.Shutdown()
}

// wait returns true once cond holds and the namespace has been quiet for
// opts.Quiet; false once it has been quiet for opts.Settle without cond,
// or at opts.StepDeadline.
func (w *workloadWatcher) wait(ctx context.Context, opts WorkloadOptions, cond func() bool) (bool, error) {
	return w.quiet.wait(ctx, opts.Quiet, opts.Settle, opts.StepDeadline, cond)
}

func (w *workloadWatcher) get(inf, name string) any {
	o, ok, _ := w.infs[inf].GetStore().GetByKey(w.ns + "/" + name)
	if !ok {
		return nil
	}
	return o
}

// endpoints counts the ready endpoints of the Service's EndpointSlices
// (-1 while it has none).
func (w *workloadWatcher) endpoints(svc string) int {
	n, found := 0, false
	for _, o := range w.infs["slices"].GetStore().List() {
		s := o.(*discoveryv1.EndpointSlice)
		if s.Labels[discoveryv1.LabelServiceName] != svc {
			continue
		}
		found = true
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
	}
	if !found {
		return -1
	}
	return n
}

func (w *workloadWatcher) statefulSetReady(name string, n int32) bool {
	s, ok := w.get("sts", name).(*appsv1.StatefulSet)
	return ok && s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == n && s.Status.AvailableReplicas == n &&
		s.Status.CurrentReplicas == n && s.Status.CurrentRevision == s.Status.UpdateRevision
}

func (w *workloadWatcher) budget(name string, healthy int32) bool {
	b, ok := w.get("pdbs", name).(*policyv1.PodDisruptionBudget)
	return ok && b.Status.ObservedGeneration == b.Generation && b.Status.CurrentHealthy == healthy && b.Status.ExpectedPods == healthy &&
		b.Status.DisruptionsAllowed == healthy-1
}

func (w *workloadWatcher) daemonSetReady(name string, n int32) bool {
	d, ok := w.get("ds", name).(*appsv1.DaemonSet)
	return ok && d.Status.ObservedGeneration == d.Generation && d.Status.DesiredNumberScheduled == n && d.Status.NumberReady == n &&
		d.Status.NumberAvailable == n && d.Status.UpdatedNumberScheduled == n
}

// jobComplete: the Job completed with n succeeded Pods, none still
// counted nor holding the tracking finalizer.
func (w *workloadWatcher) jobComplete(name string, n int32) bool {
	j, ok := w.get("jobs", name).(*batchv1.Job)
	if !ok || j.Status.Succeeded != n || j.Status.UncountedTerminatedPods != nil &&
		len(j.Status.UncountedTerminatedPods.Succeeded)+len(j.Status.UncountedTerminatedPods.Failed) > 0 {
		return false
	}
	complete := false
	for _, c := range j.Status.Conditions {
		complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
	}
	if !complete {
		return false
	}
	for _, o := range w.infs["pods"].GetStore().List() {
		p := o.(*corev1.Pod)
		if c := metav1.GetControllerOf(p); c != nil && c.UID == j.UID && len(p.Finalizers) > 0 {
			return false
		}
	}
	return true
}

// state says what the watcher holds, for the log of a step given up.
func (w *workloadWatcher) state() string {
	var b strings.Builder
	for _, o := range w.infs["sts"].GetStore().List() {
		s := o.(*appsv1.StatefulSet)
		fmt.Fprintf(&b, "statefulset %s: %+v; ", s.Name, s.Status)
	}
	for _, o := range w.infs["slices"].GetStore().List() {
		s := o.(*discoveryv1.EndpointSlice)
		fmt.Fprintf(&b, "endpointslice %s: %d endpoints; ", s.Name, len(s.Endpoints))
	}
	for _, o := range w.infs["pods"].GetStore().List() {
		p := o.(*corev1.Pod)
		fmt.Fprintf(&b, "pod %s %s %s; ", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	return b.String()
}
