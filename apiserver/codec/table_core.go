package codec

import (
	"bytes"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The printers of kube-apiserver v1.33 for the core group's Endpoints,
// Node, PersistentVolume, PersistentVolumeClaim, ReplicationController,
// ResourceQuota and ServiceAccount (printEndpoints, printNode, … in
// k8s.io/kubernetes/pkg/printers/internalversion), over the v1 types.

func init() {
	printers[schema.GroupKind{Kind: "Endpoints"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Endpoints", corev1.Endpoints{}.SwaggerDoc()["subsets"]), colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			e := o.(*corev1.Endpoints)
			return []any{e.Name, formatEndpoints(e), age(e.CreationTimestamp, now)}
		},
	}
	nodeInfo, nodeStatus := corev1.NodeSystemInfo{}.SwaggerDoc(), corev1.NodeStatus{}.SwaggerDoc()
	wide := func(c metav1.TableColumnDefinition) metav1.TableColumnDefinition { c.Priority = 1; return c }
	printers[schema.GroupKind{Kind: "Node"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Status", "The status of the node"),
			col("Roles", "The roles of the node"),
			colAge,
			col("Version", nodeInfo["kubeletVersion"]),
			wide(col("Internal-IP", nodeStatus["addresses"])),
			wide(col("External-IP", nodeStatus["addresses"])),
			wide(col("OS-Image", nodeInfo["osImage"])),
			wide(col("Kernel-Version", nodeInfo["kernelVersion"])),
			wide(col("Container-Runtime", nodeInfo["containerRuntimeVersion"]))},
		cells: func(o runtime.Object, now time.Time) []any { return nodeCells(o.(*corev1.Node), now) },
	}
	pvSpec, pvStatus := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	printers[schema.GroupKind{Kind: "PersistentVolume"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Capacity", pvSpec["capacity"]),
			col("Access Modes", pvSpec["accessModes"]),
			col("Reclaim Policy", pvSpec["persistentVolumeReclaimPolicy"]),
			col("Status", pvStatus["phase"]),
			col("Claim", pvSpec["claimRef"]),
			col("StorageClass", "StorageClass of the pv"),
			col("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
			col("Reason", pvStatus["reason"]),
			colAge,
			wide(col("VolumeMode", pvSpec["volumeMode"]))},
		cells: func(o runtime.Object, now time.Time) []any { return pvCells(o.(*corev1.PersistentVolume), now) },
	}
	pvcSpec, pvcStatus := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	printers[schema.GroupKind{Kind: "PersistentVolumeClaim"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Status", pvcStatus["phase"]),
			col("Volume", pvcSpec["volumeName"]),
			col("Capacity", pvcStatus["capacity"]),
			col("Access Modes", pvcStatus["accessModes"]),
			col("StorageClass", "StorageClass of the pvc"),
			col("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
			colAge,
			wide(col("VolumeMode", pvcSpec["volumeMode"]))},
		cells: func(o runtime.Object, now time.Time) []any { return pvcCells(o.(*corev1.PersistentVolumeClaim), now) },
	}
	rcSpec, rcStatus := corev1.ReplicationControllerSpec{}.SwaggerDoc(), corev1.ReplicationControllerStatus{}.SwaggerDoc()
	printers[schema.GroupKind{Kind: "ReplicationController"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Desired", Type: "integer", Description: rcSpec["replicas"]},
			{Name: "Current", Type: "integer", Description: rcStatus["replicas"]},
			{Name: "Ready", Type: "integer", Description: rcStatus["readyReplicas"]},
			colAge, colContainers, colImages,
			wide(col("Selector", rcSpec["selector"]))},
		cells: func(o runtime.Object, now time.Time) []any {
			rc := o.(*corev1.ReplicationController)
			var cs []corev1.Container
			if rc.Spec.Template != nil {
				cs = rc.Spec.Template.Spec.Containers
			}
			names, images := containerCells(cs)
			return []any{rc.Name, int64(replicas(rc.Spec.Replicas)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
				age(rc.CreationTimestamp, now), names, images, labels.FormatLabels(rc.Spec.Selector)}
		},
	}
	printers[schema.GroupKind{Kind: "ResourceQuota"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
			col("Limit", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any { return quotaCells(o.(*corev1.ResourceQuota), now) },
	}
	printers[schema.GroupKind{Kind: "ServiceAccount"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Secrets", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]), colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			sa := o.(*corev1.ServiceAccount)
			return []any{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp, now)}
		},
	}
}

// formatEndpoints is the apiserver's formatEndpoints for all ports: the
// first three address:port pairs and how many more.
func formatEndpoints(e *corev1.Endpoints) string {
	if len(e.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	list := []string{}
	more := false
	count := 0
	for _, ss := range e.Subsets {
		if len(ss.Ports) == 0 {
			// A headless service may have no ports.
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	ret := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", ret, count-max)
	}
	return ret
}

func nodeCells(n *corev1.Node, now time.Time) []any {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			// The printer keeps the last condition of the type.
			status = status[:0]
			if c.Status == corev1.ConditionTrue {
				status = append(status, string(c.Type))
			} else {
				status = append(status, "Not"+string(c.Type))
			}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	roles := sets.New[string]()
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if r := strings.TrimPrefix(k, "node-role.kubernetes.io/"); r != "" {
				roles.Insert(r)
			}
		case k == "kubernetes.io/role" && v != "":
			roles.Insert(v)
		}
	}
	address := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	info := n.Status.NodeInfo
	return []any{n.Name, strings.Join(status, ","), orNone(strings.Join(sets.List(roles), ",")), age(n.CreationTimestamp, now),
		info.KubeletVersion, address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		unknown(info.OSImage), unknown(info.KernelVersion), unknown(info.ContainerRuntimeVersion)}
}

// accessModes is helper.GetAccessModesAsString: RWO, ROX, RWX, RWOP in that
// order, each once.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode corev1.PersistentVolumeAccessMode
		abbr string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		for _, have := range modes {
			if have == m.mode {
				out = append(out, m.abbr)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// betaStorageClass is the annotation that takes precedence over a
// volume's or claim's storageClassName.
const betaStorageClass = "volume.beta.kubernetes.io/storage-class"

func pvCells(pv *corev1.PersistentVolume, now time.Time) []any {
	claim := ""
	if pv.Spec.ClaimRef != nil {
		claim = pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	mode := "<unset>"
	if pv.Spec.VolumeMode != nil {
		mode = string(*pv.Spec.VolumeMode)
	}
	vac := "<unset>"
	if pv.Spec.VolumeAttributesClassName != nil {
		vac = *pv.Spec.VolumeAttributesClassName
	}
	class, ok := pv.Annotations[betaStorageClass]
	if !ok {
		class = pv.Spec.StorageClassName
	}
	return []any{pv.Name, size.String(), accessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase, claim, class, vac, pv.Status.Reason, age(pv.CreationTimestamp, now), mode}
}

func pvcCells(pvc *corev1.PersistentVolumeClaim, now time.Time) []any {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	vac := "<unset>"
	if pvc.Spec.VolumeAttributesClassName != nil {
		vac = *pvc.Spec.VolumeAttributesClassName
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = accessModes(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = q.String()
	}
	mode := "<unset>"
	if pvc.Spec.VolumeMode != nil {
		mode = string(*pvc.Spec.VolumeMode)
	}
	class, ok := pvc.Annotations[betaStorageClass]
	if !ok && pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	return []any{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, class, vac, age(pvc.CreationTimestamp, now), mode}
}

// quotaCells lists each hard limit as "resource: used/hard", sorted by
// name, those named limits.* in the Limit column.
func quotaCells(q *corev1.ResourceQuota, now time.Time) []any {
	names := make([]string, 0, len(q.Status.Hard))
	for n := range q.Status.Hard {
		names = append(names, string(n))
	}
	sort.Strings(names)
	var request, limit bytes.Buffer
	for _, n := range names {
		w := &request
		if pieces := strings.Split(n, "."); len(pieces) > 1 && pieces[0] == "limits" {
			w = &limit
		}
		used, hard := q.Status.Used[corev1.ResourceName(n)], q.Status.Hard[corev1.ResourceName(n)]
		fmt.Fprintf(w, "%s: %s/%s, ", n, used.String(), hard.String())
	}
	return []any{q.Name, strings.TrimSuffix(request.String(), ", "), strings.TrimSuffix(limit.String(), ", "), age(q.CreationTimestamp, now)}
}
