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

func podCells(pod *corev1.Pod, now time.Time) []any {
	restarts, initRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastInitRestart metav1.Time
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}
	inits := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		inits[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if restartable(&pod.Spec.InitContainers[i]) {
			total++
		}
	}
	later := func(cur *metav1.Time, t metav1.Time) {
		if cur.Before(&t) {
			*cur = t
		}
	}
	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		if c.LastTerminationState.Terminated != nil {
			later(&lastRestart, c.LastTerminationState.Terminated.FinishedAt)
		}
		if restartable(inits[c.Name]) {
			initRestarts += int(c.RestartCount)
			if c.LastTerminationState.Terminated != nil {
				later(&lastInitRestart, c.LastTerminationState.Terminated.FinishedAt)
			}
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case restartable(inits[c.Name]) && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			switch {
			case c.State.Terminated.Reason != "":
				reason = "Init:" + c.State.Terminated.Reason
			case c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
			initializing = true
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}
	if st, _ := podCondition(&pod.Status, corev1.PodInitialized); !initializing || st == corev1.ConditionTrue {
		restarts, lastRestart = initRestarts, lastInitRestart
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			if c.LastTerminationState.Terminated != nil {
				later(&lastRestart, c.LastTerminationState.Terminated.FinishedAt)
			}
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				running = true
				ready++
			}
		}
		if reason == "Completed" && running {
			if st, _ := podCondition(&pod.Status, corev1.PodReady); st == corev1.ConditionTrue {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}
	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		reason = "Terminating"
	}
	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestart, now))
	}
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
	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartsCell, age(pod.CreationTimestamp, now),
		ip, node, nominated, gates}
}
