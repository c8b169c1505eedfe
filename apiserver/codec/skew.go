package codec

import (
	"bytes"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// newerFields removes from j (the JSON of obj, a typed object) what the
// k8s.io/api this module builds with writes and kube-apiserver v1.33 does
// not serve: a CSINode's empty status (a struct field added after v1.33,
// which omitempty does not omit). A CSINode's JSON holds no other status.
func newerFields(obj any, j []byte) []byte {
	switch obj.(type) {
	case *storagev1.CSINode, *storagev1.CSINodeList:
		return bytes.ReplaceAll(j, []byte(`,"status":{}}`), []byte(`}`))
	}
	return j
}

// partialOf is an object's metadata as kube-apiserver shows it in a
// PartialObjectMetadata (alone, in a list, in a Table's rows): read from
// its internal object, where a DaemonSet's
// deprecated.daemonset.template.generation annotation is no annotation
// but its spec.templateGeneration.
func partialOf(obj runtime.Object, m metav1.Object) *metav1.PartialObjectMetadata {
	p := meta.AsPartialObjectMetadata(m)
	if _, ok := obj.(*appsv1.DaemonSet); ok {
		if _, has := p.Annotations[appsv1.DeprecatedTemplateGeneration]; has {
			a := make(map[string]string, len(p.Annotations))
			for k, v := range p.Annotations {
				if k != appsv1.DeprecatedTemplateGeneration {
					a[k] = v
				}
			}
			if len(a) == 0 {
				a = nil
			}
			p.Annotations = a
		}
	}
	return p
}
