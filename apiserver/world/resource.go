package world

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Resource is an API resource: group, version and plural name ("" and
// "v1" for the core group).
type Resource = schema.GroupVersionResource

// Target is what an API path names: a collection, or one object (Name),
// maybe one of its subresources.
type Target struct {
	Resource    Resource
	Namespace   string // "" for cluster-scoped resources and all-namespace collections
	Name        string // "" for a collection
	Subresource string // "status", "scale", … or ""
	Watch       bool   // the legacy /watch/ path segment was present
}

// Collection reports whether t names a collection.
func (t Target) Collection() bool { return t.Name == "" }

// ParsePath reads an API path: /api/v1/namespaces/demo/configmaps[/name[/sub]],
// /apis/apps/v1/deployments, /api/v1/namespaces[/name[/status|finalize]],
// with or without the legacy "watch" segment, as the apiserver does
// (internal/apipath). ok is false for anything else (discovery, /version,
// non-resource paths, empty segments, subresources of subresources).
func ParsePath(path string) (t Target, ok bool) {
	p, watch := apipath.StripWatchSegment(path)
	r, ok := apipath.ParseResource(p)
	return target(p, r, ok, watch)
}

// TargetOf is what request r names, read as ParsePath reads its path
// (from what apipath.Parse read of it, without reading it again).
func TargetOf(r apipath.Request) (t Target, ok bool) {
	return target(r.Path, r.Resource, r.IsResource, r.LegacyWatch)
}

// target is the Target of resource r (ok: the path p names one), read
// from p, which had the legacy watch segment if watch.
func target(p string, r apipath.Resource, ok, watch bool) (t Target, _ bool) {
	if strings.Contains(strings.Trim(p, "/"), "//") {
		return t, false
	}
	if !ok || r.Version == "" || strings.Contains(r.Subresource, "/") {
		return t, false
	}
	if r.Resource == "namespaces" && r.Namespace != "" {
		return t, false
	}
	t = Target{Resource: Resource{Group: r.Group, Version: r.Version, Resource: r.Resource},
		Namespace: r.Namespace, Name: r.Name, Subresource: r.Subresource, Watch: watch}
	return t, true
}

// isNamespaces reports whether r is the core Namespace resource.
func isNamespaces(r Resource) bool {
	return r.Group == "" && r.Version == "v1" && r.Resource == "namespaces"
}

// Path builds the API path of t (no legacy watch segment).
func (t Target) Path() string {
	var b strings.Builder
	if t.Resource.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(t.Resource.Group)
		b.WriteByte('/')
	}
	b.WriteString(t.Resource.Version)
	if t.Namespace != "" && t.Resource.Resource != "namespaces" {
		b.WriteString("/namespaces/")
		b.WriteString(t.Namespace)
	}
	b.WriteByte('/')
	b.WriteString(t.Resource.Resource)
	if t.Name != "" {
		b.WriteByte('/')
		b.WriteString(t.Name)
		if t.Subresource != "" {
			b.WriteByte('/')
			b.WriteString(t.Subresource)
		}
	}
	return b.String()
}

// clusterScoped lists the resources of the scheme that are not
// namespaced, for those kube-apiserver v1.33 does not serve (its own are
// in its discovery).
var clusterScoped = map[string]bool{
	"namespaces": true, "nodes": true, "persistentvolumes": true, "componentstatuses": true,
	"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true,
	"validatingadmissionpolicies": true, "validatingadmissionpolicybindings": true,
	"mutatingadmissionpolicies": true, "mutatingadmissionpolicybindings": true,
	"customresourcedefinitions": true, "apiservices": true, "tokenreviews": true,
	"selfsubjectaccessreviews": true, "selfsubjectrulesreviews": true, "selfsubjectreviews": true,
	"subjectaccessreviews": true, "certificatesigningrequests": true, "clustertrustbundles": true,
	"flowschemas": true, "prioritylevelconfigurations": true, "ingressclasses": true,
	"ipaddresses": true, "servicecidrs": true, "runtimeclasses": true, "clusterrolebindings": true,
	"clusterroles": true, "priorityclasses": true, "csidrivers": true, "csinodes": true,
	"storageclasses": true, "volumeattachments": true, "volumeattributesclasses": true,
	"deviceclasses": true, "resourceslices": true, "devicetaintrules": true,
	"storageversionmigrations": true, "storageversions": true,
}

// Info is what the store knows about a resource.
type Info struct {
	Resource   Resource
	Kind       string // "ConfigMap"
	Namespaced bool
}

// APIVersion is the apiVersion of the resource's objects.
func (i Info) APIVersion() string { return i.Resource.GroupVersion().String() }

// GVK is the group, version and kind of the resource's objects.
func (i Info) GVK() schema.GroupVersionKind { return i.Resource.GroupVersion().WithKind(i.Kind) }

// builtinKinds maps the resources of every kind the codec's scheme knows
// to their kinds, guessing plurals as the apiserver's REST mapper does.
// Built on first use, with the scheme.
var builtinKinds = sync.OnceValue(func() map[Resource]string {
	m := map[Resource]string{}
	for gvk := range codec.Scheme().AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		if _, ok := m[plural]; !ok {
			m[plural] = gvk.Kind
		}
	}
	// Plurals the guesser gets wrong.
	m[Resource{Version: "v1", Resource: "endpoints"}] = "Endpoints"
	return m
})

// BuiltinInfo returns what kube-apiserver v1.33 serves of a built-in
// resource: its kind and its scope. ok is false for a resource it does not
// serve (a custom resource, a kind of a later version or of an API it
// does not enable).
func BuiltinInfo(r Resource) (Info, bool) { return builtinInfo(r) }

// builtinInfo returns what kube-apiserver v1.33 serves of a built-in
// resource (served.go).
func builtinInfo(r Resource) (Info, bool) { return servedInfo(r) }

// schemeInfo returns what the scheme knows of a resource, served by
// kube-apiserver v1.33 or not: the kind and scope of one a session shows
// served (by an apiserver of another version, or with other APIs on).
func schemeInfo(r Resource) (Info, bool) {
	if info, ok := servedInfo(r); ok {
		return info, true
	}
	kind, ok := builtinKinds()[r]
	if !ok {
		return Info{}, false
	}
	return Info{Resource: r, Kind: kind, Namespaced: !clusterScoped[r.Resource]}, true
}
