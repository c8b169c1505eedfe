package codec

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Pod printer of kube-apiserver v1.33 (printPod in
// k8s.io/kubernetes/pkg/printers/internalversion), reproduced: Ready,
// Status (the reason kubectl shows: Init:…, CrashLoopBackOff, Completed,
// Terminating, …), Restarts with the time of the last one, Age, and the
// wide columns IP, Node, Nominated Node, Readiness Gates.

func init() {
	printers[schema.GroupKind{Kind: "Pod"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
			{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
			{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
			colAge,
			{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
			{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
			{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
			{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
		},
		cells: func(o runtime.Object, now time.Time) []any { return podCells(o.(*corev1.Pod), now) },
		conditions: func(o runtime.Object) []metav1.TableRowCondition {
			switch o.(*corev1.Pod).Status.Phase {
			case corev1.PodSucceeded:
				return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
			case corev1.PodFailed:
				return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
			}
			return nil
		},
	}
}

func restartable(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func podCondition(st *corev1.PodStatus, t corev1.PodConditionType) (corev1.ConditionStatus, bool) {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status, true
		}
	}
	return "", false
}

// podCells is printPod's row of a Pod: name, ready, status, restarts,
// age, IP, node, nominated node, readiness gates.
func podCells(pod *corev1.Pod, now time.Time) []any {
	ps := podState{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		ps.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			ps.reason = corev1.PodReasonSchedulingGated
		}
	}
	inits := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		inits[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if restartable(&pod.Spec.InitContainers[i]) {
			ps.total++
		}
	}
	initializing := ps.initContainers(pod, inits)
	if st, _ := podCondition(&pod.Status, corev1.PodInitialized); !initializing || st == corev1.ConditionTrue {
		ps.containers(pod)
	}
	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		ps.reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		ps.reason = "Terminating"
	}
	restartsCell := strconv.Itoa(ps.restarts)
	if ps.restarts != 0 && !ps.lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", ps.restarts, age(ps.lastRestart, now))
	}
	row := []any{pod.Name, fmt.Sprintf("%d/%d", ps.ready, ps.total), ps.reason, restartsCell, age(pod.CreationTimestamp, now)}
	return append(row, podPlacement(pod)...)
}

// podState is what printPod sums up of a Pod's containers.
type podState struct {
	reason                       string
	ready, total                 int
	restarts, initRestarts       int
	lastRestart, lastInitRestart metav1.Time
}

// later sets *cur to t when t is later.
func later(cur *metav1.Time, t metav1.Time) {
	if cur.Before(&t) {
		*cur = t
	}
}

// initContainers reads the init containers' statuses up to the first
// that has not finished, and reports whether the Pod is initializing.
func (ps *podState) initContainers(pod *corev1.Pod, inits map[string]*corev1.Container) bool {
	for i, c := range pod.Status.InitContainerStatuses {
		ps.restarts += int(c.RestartCount)
		if c.LastTerminationState.Terminated != nil {
			later(&ps.lastRestart, c.LastTerminationState.Terminated.FinishedAt)
		}
		if restartable(inits[c.Name]) {
			ps.initRestarts += int(c.RestartCount)
			if c.LastTerminationState.Terminated != nil {
				later(&ps.lastInitRestart, c.LastTerminationState.Terminated.FinishedAt)
			}
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case restartable(inits[c.Name]) && c.Started != nil && *c.Started:
			if c.Ready {
				ps.ready++
			}
			continue
		case c.State.Terminated != nil:
			switch {
			case c.State.Terminated.Reason != "":
				ps.reason = "Init:" + c.State.Terminated.Reason
			case c.State.Terminated.Signal != 0:
				ps.reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
			default:
				ps.reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			ps.reason = "Init:" + c.State.Waiting.Reason
		default:
			ps.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return true
	}
	return false
}

// containers reads the containers' statuses, last first (the first
// container's reason wins), once the Pod is initialized.
func (ps *podState) containers(pod *corev1.Pod) {
	ps.restarts, ps.lastRestart = ps.initRestarts, ps.lastInitRestart
	running := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		ps.restarts += int(c.RestartCount)
		if c.LastTerminationState.Terminated != nil {
			later(&ps.lastRestart, c.LastTerminationState.Terminated.FinishedAt)
		}
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			ps.reason = c.State.Waiting.Reason
		case c.State.Terminated != nil && c.State.Terminated.Reason != "":
			ps.reason = c.State.Terminated.Reason
		case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
			ps.reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
		case c.State.Terminated != nil:
			ps.reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
		case c.Ready && c.State.Running != nil:
			running = true
			ps.ready++
		}
	}
	if ps.reason == "Completed" && running {
		if st, _ := podCondition(&pod.Status, corev1.PodReady); st == corev1.ConditionTrue {
			ps.reason = "Running"
		} else {
			ps.reason = "NotReady"
		}
	}
}

// podPlacement is the wide cells of a Pod's row: IP, node, nominated
// node, readiness gates met.
func podPlacement(pod *corev1.Pod) []any {
	node, nominated, ip := pod.Spec.NodeName, pod.Status.NominatedNodeName, ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	if ip == "" {
		ip = "<none>"
	}
	if node == "" {
		node = "<none>"
	}
	if nominated == "" {
		nominated = "<none>"
	}
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		n := 0
		for _, g := range pod.Spec.ReadinessGates {
			if st, ok := podCondition(&pod.Status, g.ConditionType); ok && st == corev1.ConditionTrue {
				n++
			}
		}
		gates = fmt.Sprintf("%d/%d", n, len(pod.Spec.ReadinessGates))
	}
	return []any{ip, node, nominated, gates}
}
