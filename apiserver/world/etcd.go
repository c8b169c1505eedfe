package world

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// throughStorage returns a built-in object as kube-apiserver hands it back
// from etcd, where it is kept as protobuf: an empty list or map the JSON
// shows (a field without omitempty: a CSINode's "drivers":[]) comes back
// as none ("drivers":null). The registry answers a write, dry run or not,
// with the object decoded from what it stored. Custom resources (kept as
// JSON) and objects that do not encode are returned as they are.
func throughStorage(obj runtime.Object) runtime.Object {
	if _, ok := obj.(runtime.Unstructured); ok {
		return obj
	}
	o, err := codec.Encode(obj, frame.Protobuf)
	if err != nil {
		return obj
	}
	back, err := codec.Decode(o)
	if err != nil {
		return obj
	}
	return back
}

// defaultedOnRead reports whether what etcd holds of e (whose object is
// old) lacks what every read of it defaults, so that an update giving
// back the object as read still writes a new version. A
// PersistentVolumeClaim's strategy clears its status on create, after the
// decoder set phase Pending: etcd holds no phase until the first write
// of it. The world knows this of the claims it created; of a recorded
// one, its status is only Pending and no manager ever wrote its status
// subresource.
func defaultedOnRead(e *entry, old runtime.Object) bool {
	if e == nil {
		return false
	}
	if e.defaulted {
		return true
	}
	pvc, ok := old.(*corev1.PersistentVolumeClaim)
	if !ok || e.synth || !apiequality.Semantic.DeepEqual(pvc.Status, corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}) {
		return false
	}
	for _, mf := range pvc.ManagedFields {
		if mf.Subresource == "status" {
			return false
		}
	}
	return true
}
