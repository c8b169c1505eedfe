// Package schedtest plays a scheduling scenario against an apiserver for
// tests of the upstream kube-scheduler, and records the scheduler through
// `record --proxy` while it plays.
//
// The scenario is kubectl's part of a cluster a scheduler serves: a
// namespace and its ServiceAccount "default", Nodes of distinct
// capacities (their status written as a kubelet registers it, their
// not-ready taint taken off as the node lifecycle controller does), then Pods
// with resource requests, created one at a time, each once the one
// before is bound. With distinct capacities and requests chosen so that
// no two Nodes score alike for any Pod (under LeastAllocated and
// MostAllocated scoring alike), the real scheduler is deterministic:
// every run binds every Pod to the same Node.
//
// Record runs it all: a real apiserver (testkit/k8stest), the recording
// proxy in front of it (testkit/proxytest), kube-scheduler pointed at the
// proxy, the scenario played against the apiserver directly, and returns
// the session of the scheduler's traffic with the bindings it made.
//
// Everything here is for tests; nothing in the wtrace binary imports it.
package schedtest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/testkit/kubelettest"
)

// UserAgent is the scenario client's User-Agent: kubectl's, as the
// v1.33.13 binary sends it.
const UserAgent = "kubectl/v1.33.13 (linux/amd64) kubernetes/$Format"

// Namespace is the scenario's namespace.
const Namespace = "sched-scenario"

// Node is a Node of the scenario: its name and what it can hold,
// registered as a kubelet does (kubelettest.Register).
type Node = kubelettest.Node

// Pod is a Pod of the scenario: its name and its one container's
// requests.
type Pod struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
}

// DefaultNodes are 3 Nodes of 3, 5 and 7 CPUs (2 GiB of memory per CPU).
func DefaultNodes() []Node {
	return []Node{{Name: "node-a", MilliCPU: 3000, MemoryMiB: 6 << 10}, {Name: "node-b", MilliCPU: 5000, MemoryMiB: 10 << 10},
		{Name: "node-c", MilliCPU: 7000, MemoryMiB: 14 << 10}}
}

// DefaultPods are 8 Pods whose requests leave, at every step, a margin of
// at least 3 points between the best Node's score and the next one's,
// under the default scoring (NodeResourcesFit LeastAllocated plus
// NodeResourcesBalancedAllocation) and under MostAllocated: the default
// scheduler binds them to node-c, node-b, node-a, node-c, node-b, node-c,
// node-a, node-b; MostAllocated to node-a ×4, then node-b ×4 (5 of 8
// change).
func DefaultPods() []Pod {
	req := [][2]int64{{900, 576}, {850, 256}, {400, 640}, {750, 832}, {600, 1472}, {700, 1088}, {400, 1088}, {400, 1344}}
	var pods []Pod
	for i, r := range req {
		pods = append(pods, Pod{Name: fmt.Sprintf("pod-%d", i), MilliCPU: r[0], MemoryMiB: r[1]})
	}
	return pods
}

// MostAllocated is a SchedulerOptions.Profile (testkit/k8stest) that
// scores Nodes by NodeResourcesFit's MostAllocated strategy instead of the
// default LeastAllocated: it packs Pods onto the fullest Node.
const MostAllocated = `  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
`

// Options configure Play.
type Options struct {
	// Nodes and Pods are the scenario's (default DefaultNodes(),
	// DefaultPods()).
	Nodes []Node
	Pods  []Pod
	// BindDeadline bounds the wait for each Pod's binding (default 30 s):
	// a Pod not bound by then is reported unbound, and the scenario goes
	// on.
	BindDeadline time.Duration
	// Quiet is how long Play waits after the last binding, for the
	// scheduler's Events (default 1 s).
	Quiet time.Duration
	// Logf, if set, logs each step (t.Logf).
	Logf func(format string, args ...any)
}

// Binding is where one Pod was bound ("" when it was not).
type Binding struct {
	Pod, Node string
}

// Play plays the scenario against the apiserver of cfg (a copy of cfg is
// used, with UserAgent) and returns where each Pod was bound, in the
// order they were created. An error is a command the apiserver refused or
// ctx's end; a Pod left unbound is not one.
func Play(ctx context.Context, cfg *rest.Config, opts Options) ([]Binding, error) {
	if opts.Nodes == nil {
		opts.Nodes = DefaultNodes()
	}
	if opts.Pods == nil {
		opts.Pods = DefaultPods()
	}
	if opts.BindDeadline == 0 {
		opts.BindDeadline = 30 * time.Second
	}
	if opts.Quiet == 0 {
		opts.Quiet = time.Second
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
	create := metav1.CreateOptions{FieldManager: "kubectl-create", FieldValidation: "Strict"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, create); err != nil {
		return nil, fmt.Errorf("schedtest: create namespace: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: Namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(Namespace).Create(ctx, sa, create); err != nil {
		return nil, fmt.Errorf("schedtest: create serviceaccount: %w", err)
	}
	for _, n := range opts.Nodes {
		if err := kubelettest.Register(ctx, cs, n); err != nil {
			return nil, err
		}
	}
	var out []Binding
	for _, p := range opts.Pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: map[string]string{"app": "sched"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
				}}}}},
		}
		if _, err := cs.CoreV1().Pods(Namespace).Create(ctx, pod, create); err != nil {
			return out, fmt.Errorf("schedtest: create pod %s: %w", p.Name, err)
		}
		node := ""
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, opts.BindDeadline, true, func(ctx context.Context) (bool, error) {
			got, err := cs.CoreV1().Pods(Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			node = got.Spec.NodeName
			return node != "", nil
		})
		if err != nil && ctx.Err() != nil {
			return out, ctx.Err()
		}
		opts.Logf("schedtest: pod %s bound to %q", p.Name, node)
		out = append(out, Binding{Pod: p.Name, Node: node})
	}
	select {
	case <-time.After(opts.Quiet):
	case <-ctx.Done():
		return out, ctx.Err()
	}
	return out, nil
}
