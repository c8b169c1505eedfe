package kcmtest

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// KubeletUserAgent is the User-Agent of the kubelet stand-in.
const KubeletUserAgent = "kubelet/v1.33.13 (linux/amd64) kubernetes/kcmtest"

// kubelet stands in for a node's kubelet, as the scenario's environment:
// every Pod of the namespace that is not running yet is reported running
// and ready after Delay (its status written through the status
// subresource, as a kubelet writes it), so that Deployments become
// available. It binds nothing and runs nothing.
type kubelet struct {
	cs     *kubernetes.Clientset
	ns     string
	delay  time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startKubelet(ctx context.Context, cs *kubernetes.Clientset, ns string, delay time.Duration) *kubelet {
	ctx, cancel := context.WithCancel(ctx)
	k := &kubelet{cs: cs, ns: ns, delay: delay, cancel: cancel}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	queue := make(chan string, 1024)
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase != corev1.PodRunning && p.DeletionTimestamp == nil {
				select {
				case queue <- p.Name:
				default:
				}
			}
		}}})
	k.wg.Add(2)
	go func() { defer k.wg.Done(); inf.Run(ctx.Done()) }()
	go func() {
		defer k.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case name := <-queue:
				t := time.NewTimer(k.delay)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				k.markReady(ctx, name)
			}
		}
	}()
	return k
}

// markReady reports Pod name running and ready.
func (k *kubelet) markReady(ctx context.Context, name string) {
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
			return nil
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.PodIP, p.Status.HostIP = "10.244.0.10", "192.168.0.10"
		for _, c := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				Ready: true, Started: ptrTo(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		_, err = k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func (k *kubelet) stop() {
	k.cancel()
	k.wg.Wait()
}

func ptrTo[T any](v T) *T { return &v }
