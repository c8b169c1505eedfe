package codec

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The printers of kube-apiserver v1.33 for storage.k8s.io's CSIDriver,
// CSINode, StorageClass and VolumeAttachment (printCSIDriver, …).

func init() {
	const group = "storage.k8s.io"
	driver := storagev1.CSIDriverSpec{}.SwaggerDoc()
	printers[schema.GroupKind{Group: group, Kind: "CSIDriver"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "AttachRequired", Type: "boolean", Description: doc133["CSIDriverSpec.attachRequired"]},
			{Name: "PodInfoOnMount", Type: "boolean", Description: driver["podInfoOnMount"]},
			{Name: "StorageCapacity", Type: "boolean", Description: driver["storageCapacity"]},
			col("TokenRequests", driver["tokenRequests"]),
			{Name: "RequiresRepublish", Type: "boolean", Description: driver["requiresRepublish"]},
			col("Modes", driver["volumeLifecycleModes"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			d := o.(*storagev1.CSIDriver)
			modes := make([]string, len(d.Spec.VolumeLifecycleModes))
			for i, m := range d.Spec.VolumeLifecycleModes {
				modes[i] = string(m)
			}
			tokens := "<unset>"
			if d.Spec.TokenRequests != nil {
				audiences := make([]string, len(d.Spec.TokenRequests))
				for i, t := range d.Spec.TokenRequests {
					audiences[i] = t.Audience
				}
				tokens = strings.Join(audiences, ",")
			}
			return []any{d.Name, derefBool(d.Spec.AttachRequired, true), derefBool(d.Spec.PodInfoOnMount, false),
				derefBool(d.Spec.StorageCapacity, false), tokens, derefBool(d.Spec.RequiresRepublish, false),
				orNone(strings.Join(modes, ",")), age(d.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "CSINode"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			n := o.(*storagev1.CSINode)
			return []any{n.Name, int64(len(n.Spec.Drivers)), age(n.CreationTimestamp, now)}
		},
	}
	class := storagev1.StorageClass{}.SwaggerDoc()
	printers[schema.GroupKind{Group: group, Kind: "StorageClass"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Provisioner", class["provisioner"]),
			col("ReclaimPolicy", class["reclaimPolicy"]),
			col("VolumeBindingMode", class["volumeBindingMode"]),
			col("AllowVolumeExpansion", class["allowVolumeExpansion"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			sc := o.(*storagev1.StorageClass)
			name := sc.Name
			if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" ||
				sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
				name += " (default)"
			}
			reclaim, binding := "Delete", "Immediate"
			if sc.ReclaimPolicy != nil {
				reclaim = string(*sc.ReclaimPolicy)
			}
			if sc.VolumeBindingMode != nil {
				binding = string(*sc.VolumeBindingMode)
			}
			return []any{name, sc.Provisioner, reclaim, binding, derefBool(sc.AllowVolumeExpansion, false), age(sc.CreationTimestamp, now)}
		},
	}
	vaSpec := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	printers[schema.GroupKind{Group: group, Kind: "VolumeAttachment"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Attacher", Type: "string", Format: "name", Description: vaSpec["attacher"]},
			col("PV", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
			col("Node", vaSpec["nodeName"]),
			{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			va := o.(*storagev1.VolumeAttachment)
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []any{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp, now)}
		},
	}
}
