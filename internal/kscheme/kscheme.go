// Package kscheme is the Kubernetes API scheme wtrace decodes objects
// with: every kind of k8s.io/api (client-go's scheme), the kinds
// kube-apiserver serves from its other in-process servers
// (apiextensions.k8s.io/v1's CustomResourceDefinition and
// apiregistration.k8s.io/v1's APIService), and meta.k8s.io's Table,
// PartialObjectMetadata and PartialObjectMetadataList (v1 and v1beta1).
package kscheme

import (
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// Scheme returns the scheme, built on its first call (building it at
// start cost every wtrace command about 5 ms, record included, which
// never needs it). It is shared: callers must not modify it.
var Scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(apiregistrationv1.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	utilruntime.Must(metav1beta1.AddMetaToScheme(s))
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
})
