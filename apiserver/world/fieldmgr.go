package world

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// Field managers track metadata.managedFields as the apiserver's do:
// apimachinery's managedfields.FieldManager with the schemas of the
// built-in kinds (client-go's applyconfigurations, and those of
// apiextensions-apiserver and kube-aggregator: fieldmgr_types.go), and
// schemas deduced from the objects for other kinds (as for custom
// resources without a structural schema).
var (
	// builtinTypes parses client-go's schemas of every built-in kind
	// (about 150 ms): once, on the first write that needs a field
	// manager, not when a program that links this package starts.
	builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
		return newBuiltinTypes(codec.Scheme())
	})
	deducedTypes = managedfields.NewDeducedTypeConverter()

	managersMu sync.Mutex
	managers   = map[managerKey]*managedfields.FieldManager{}
)

type managerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// fieldManager returns the field manager of a kind (and subresource).
func fieldManager(gvk schema.GroupVersionKind, subresource string) (*managedfields.FieldManager, error) {
	managersMu.Lock()
	defer managersMu.Unlock()
	k := managerKey{gvk, subresource}
	if m := managers[k]; m != nil {
		return m, nil
	}
	var (
		m   *managedfields.FieldManager
		err error
	)
	switch {
	case gvk == scaleGVK:
		// client-go's schemas have no Scale; its one field is a scalar,
		// which a deduced schema tracks the same way.
		m, err = managedfields.NewDefaultFieldManager(deducedTypes, codec.Scheme(), noDefaults{}, codec.Scheme(),
			gvk, gvk.GroupVersion(), subresource, resetFields(gvk, subresource))
	case codec.Known(gvk) && hasSchema(gvk):
		m, err = managedfields.NewDefaultFieldManager(builtinTypes(), versionConvertor{codec.Scheme()}, noDefaults{}, codec.Scheme(),
			gvk, gvk.GroupVersion(), subresource, resetFields(gvk, subresource))
	case codec.Known(gvk):
		// A built-in kind client-go has no apply schema of (the reviews, a
		// TokenRequest): tracked with a deduced one, as the apiserver
		// tracks what its own schema holds.
		m, err = managedfields.NewDefaultFieldManager(deducedTypes, codec.Scheme(), noDefaults{}, codec.Scheme(),
			gvk, gvk.GroupVersion(), subresource, resetFields(gvk, subresource))
	default:
		m, err = managedfields.NewDefaultCRDFieldManager(deducedTypes, unstructuredConverter{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), subresource, resetFields(gvk, subresource))
	}
	if err != nil {
		return nil, fmt.Errorf("state: field manager for %s: %w", gvk, err)
	}
	managers[k] = m
	return m, nil
}

// noDefaults applies no defaults: the apiserver's defaulting functions
// live in k8s.io/kubernetes, not in k8s.io/api.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// unstructuredConverter converts objects of kinds the scheme does not
// know: there is one version of each, so conversion keeps the object.
type unstructuredConverter struct{}

func (unstructuredConverter) Convert(in, out, context any) error {
	return fmt.Errorf("state: cannot convert %T", in)
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}

func (unstructuredConverter) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// newObject returns an empty object of a kind (typed or unstructured).
func newObject(gvk schema.GroupVersionKind) runtime.Object {
	if codec.Known(gvk) {
		if o, err := codec.Scheme().New(gvk); err == nil {
			o.GetObjectKind().SetGroupVersionKind(gvk)
			return o
		}
	}
	u, _ := unstructuredCreater{}.New(gvk)
	return u
}

// hasSchema reports whether client-go's apply schemas describe gvk.
func hasSchema(gvk schema.GroupVersionKind) bool {
	obj := newObject(gvk)
	_, err := builtinTypes().ObjectToTyped(obj)
	return err == nil
}
