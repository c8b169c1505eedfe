package world

import (
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
