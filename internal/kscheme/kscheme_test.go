package kscheme

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestScheme: the scheme knows the built-in kinds and meta.k8s.io's, and
// every call returns the same one.
func TestScheme(t *testing.T) {
	s := Scheme()
	if Scheme() != s {
		t.Fatal("Scheme returned two schemes")
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "Secret"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"},
		{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
		{Group: "meta.k8s.io", Version: "v1", Kind: "Table"},
		{Group: "meta.k8s.io", Version: "v1", Kind: "PartialObjectMetadataList"},
		{Group: "meta.k8s.io", Version: "v1beta1", Kind: "PartialObjectMetadata"},
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}
