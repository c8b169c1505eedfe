package world

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	"k8s.io/client-go/applyconfigurations"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationac "k8s.io/kube-aggregator/pkg/client/applyconfiguration"
)

// groupTypes is the type converter of the built-in kinds: client-go's
// schemas (k8s.io/api's groups) and, for the groups kube-apiserver serves
// from its other in-process servers, the schemas their own modules ship
// (apiextensions.k8s.io from k8s.io/apiextensions-apiserver,
// apiregistration.k8s.io from k8s.io/kube-aggregator) — one parser knows
// one module's types only.
type groupTypes struct {
	core   managedfields.TypeConverter
	groups map[string]managedfields.TypeConverter // API group → its converter
}

// newBuiltinTypes parses every schema (about 150 ms for client-go's).
func newBuiltinTypes(s *runtime.Scheme) managedfields.TypeConverter {
	return groupTypes{
		core: applyconfigurations.NewTypeConverter(s),
		groups: map[string]managedfields.TypeConverter{
			apiextensionsv1.GroupName:   apiextensionsac.NewTypeConverter(s),
			apiregistrationv1.GroupName: apiregistrationac.NewTypeConverter(s),
		},
	}
}

func (g groupTypes) of(obj runtime.Object) managedfields.TypeConverter {
	if c, ok := g.groups[obj.GetObjectKind().GroupVersionKind().Group]; ok {
		return c
	}
	return g.core
}

// ObjectToTyped converts obj with the schemas of its group.
func (g groupTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return g.of(obj).ObjectToTyped(obj, opts...)
}

// TypedToObject converts a value back to an unstructured object (the
// same for every converter: the value is not looked up in a schema).
func (g groupTypes) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return g.core.TypedToObject(v)
}
