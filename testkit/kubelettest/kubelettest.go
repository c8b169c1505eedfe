// Package kubelettest plays the kubelets of a test cluster that runs no
// kubelet: it registers Nodes as a kubelet does (their status, and the
// not-ready taint taken off as the node lifecycle controller does once a
// Node is Ready), and reports the Pods the controllers under test create
// as a kubelet would — running and ready after a delay, a Job's Pods
// succeeded after another — writing their status through the status
// subresource. It runs nothing and binds nothing.
//
// What it writes is deterministic for a scenario: a Pod's IP follows from
// what identifies it (package internal/ident: a StatefulSet's ordinal, a
// DaemonSet's node, an indexed Job's completion index; else its name, or
// its generateName), its host IP from its node, its times are whole
// seconds. Two recordings of one scenario differ in its writes only where
// the controllers did.
//
// Everything here is for tests; nothing in the wtrace binary imports it.
package kubelettest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/wtrace/wtrace/internal/ident"
)

// UserAgent is the User-Agent a test's kubelet client should send.
const UserAgent = "kubelet/v1.33.13 (linux/amd64) kubernetes/kubelettest"

// Node is a Node to register: its name and what it can hold.
type Node struct {
	Name        string
	MilliCPU    int64
	MemoryMiB   int64
	PodCapacity int64 // default 110, as a kubelet's
}

// Register creates Node n and writes its status as a kubelet does when it
// registers (capacity, allocatable, Ready), then takes off the not-ready
// taint the apiserver's TaintNodesByCondition admission gave it, as the
// node lifecycle controller does once the Node is Ready.
func Register(ctx context.Context, cs kubernetes.Interface, n Node) error {
	pods := n.PodCapacity
	if pods == 0 {
		pods = 110
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
		"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		return fmt.Errorf("kubelettest: create node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	created.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Phase: corev1.NodeRunning,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: HostIP(n.Name)}, {Type: corev1.NodeHostName, Address: n.Name}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}}
	ready, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kubelettest: node %s status: %w", n.Name, err)
	}
	var taints []corev1.Taint
	for _, t := range ready.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if len(taints) != len(ready.Spec.Taints) {
		ready.Spec.Taints = taints
		if _, err := cs.CoreV1().Nodes().Update(ctx, ready, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("kubelettest: node %s taints: %w", n.Name, err)
		}
	}
	return nil
}

// HostIP is the address of a Node (of a Pod on no Node: ""), the same in
// every run.
func HostIP(node string) string {
	if node == "" {
		return ""
	}
	return "192.168.0." + octet(node)
}

func octet(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprint(10 + h.Sum32()%240)
}

// Options configure Start.
type Options struct {
	// Ready is how long after it first sees a Pod the kubelet reports it
	// running and ready (default 200 ms).
	Ready time.Duration
	// Succeed, if not 0, is how long after a Job's Pod runs the kubelet
	// reports it succeeded (its containers exited 0); 0: Job Pods run on.
	Succeed time.Duration
	// Nodes, if set, are the Nodes a Pod that names none is bound to
	// before it runs (pods/NAME/binding, as the scheduler binds): the one
	// its identity hashes to, the same in every run. Without them, Pods
	// are reported running unbound.
	Nodes []string
}

// Kubelet reports the Pods of a namespace as the kubelets would; Stop
// ends it.
type Kubelet struct {
	cs     kubernetes.Interface
	ns     string
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start follows the Pods of namespace ns (an informer) and reports each
// one that is not running yet, and not being deleted, running and ready
// after opts.Ready; a Pod a Job owns, succeeded opts.Succeed later. It
// writes each status once; a conflict is retried on a fresh read.
func Start(ctx context.Context, cs kubernetes.Interface, ns string, opts Options) *Kubelet {
	if opts.Ready == 0 {
		opts.Ready = 200 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{cs: cs, ns: ns, opts: opts, cancel: cancel}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	type work struct {
		name    string
		succeed bool
	}
	queue := make(chan work, 4096)
	seen := map[string]bool{} // the informer's handler runs on one goroutine
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil && !seen[p.Name] {
					seen[p.Name] = true
					queue <- work{name: p.Name}
				}
			},
		}})
	k.wg.Add(2)
	go func() { defer k.wg.Done(); inf.Run(ctx.Done()) }()
	go func() {
		defer k.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case w := <-queue:
				d := opts.Ready
				if w.succeed {
					d = opts.Succeed
				}
				// Each Pod waits from when it was seen, so one slow write
				// does not hold back the others for long.
				k.wg.Add(1)
				go func() {
					defer k.wg.Done()
					t := time.NewTimer(d)
					defer t.Stop()
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					if k.report(ctx, w.name, w.succeed) && opts.Succeed > 0 && !w.succeed {
						select {
						case queue <- work{name: w.name, succeed: true}:
						case <-ctx.Done():
						}
					}
				}()
			}
		}
	}()
	return k
}

// report writes Pod name's status: running and ready, or (succeed) its
// containers exited 0. It reports whether the Pod is a Job's that was
// reported running.
func (k *Kubelet) report(ctx context.Context, name string, succeed bool) (job bool) {
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return nil
		}
		job = ownedBy(p, "Job")
		if !succeed && p.Spec.NodeName == "" && len(k.opts.Nodes) > 0 {
			node := nodeOf(p)
			if node == "" {
				h := fnv.New32a()
				h.Write([]byte(identity(p)))
				node = k.opts.Nodes[h.Sum32()%uint32(len(k.opts.Nodes))]
			}
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
			if err := k.cs.CoreV1().Pods(k.ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
				return err
			}
			if p, err = k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return nil
			}
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		switch {
		case !succeed && p.Status.Phase == corev1.PodPending:
			running(p, now)
		case succeed && p.Status.Phase == corev1.PodRunning:
			succeeded(p, now)
		default:
			return nil
		}
		_, err = k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	return job
}

// running sets a Pod's status as its kubelet reports it once its
// containers run and are ready.
func running(p *corev1.Pod, now metav1.Time) {
	node := nodeOf(p)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.HostIP, p.Status.PodIP = HostIP(node), PodIP(p)
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	if p.Status.HostIP != "" {
		p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	}
	p.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: true, Started: ptrTo(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}

// succeeded sets a running Pod's status as its kubelet reports it once
// every container exited 0.
func succeeded(p *corev1.Pod, now metav1.Time) {
	p.Status.Phase = corev1.PodSucceeded
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady || c.Type == corev1.PodReadyToStartContainers {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason, p.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready, cs.Started = false, ptrTo(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now}}
	}
}

// PodIP is the address a Pod gets, the same in every run of a scenario:
// from what identifies it among its controller's (internal/ident), else
// its name if it chose one, else its generateName.
func PodIP(p *corev1.Pod) string {
	return "10.244." + octet(p.Namespace) + "." + octet(identity(p))
}

// identity is what a Pod is, the same in every run: what identifies it
// among its controller's (internal/ident, after its generateName), else
// its name if it chose one, else its generateName.
func identity(p *corev1.Pod) string {
	id := p.Name
	if p.GenerateName != "" {
		id = p.GenerateName
	}
	if b, err := json.Marshal(p); err == nil {
		if i := ident.Of(b); i != "" {
			id = p.GenerateName + i
		}
	}
	return id
}

// nodeOf is the Node a Pod is for: its nodeName, else the one its
// required node affinity names (a DaemonSet's Pod).
func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	if i := ident.Of(b); len(i) > 5 && i[:5] == "node=" {
		return i[5:]
	}
	return ""
}

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// Stop ends the kubelet and waits for its informer and writer.
func (k *Kubelet) Stop() {
	k.cancel()
	k.wg.Wait()
}

func ptrTo[T any](v T) *T { return &v }
