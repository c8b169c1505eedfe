package world

import (
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationhelper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
)

// ServedExtensions returns what kube-apiserver v1.33's /apis adds to its
// built-in groups for the world's current objects (the lock is taken):
//
//   - legacy: the aggregator's APIGroupList entries of the groups of its
//     APIServices that are not built-in — the world's APIServices, and
//     the one the crdregistration controller registers for each served
//     version of each CRD (groupPriorityMinimum 1000, versionPriority
//     100) — in the aggregator's order (SortedByGroupAndVersion: group
//     priority, then name; versions by priority, then kube-aware order);
//   - aggregated: the apiextensions server's aggregated discovery of the
//     established CRDs' served versions, a group per API group (by name),
//     its versions in kube-aware order, resources by name.
//
// A caller appends them after the built-in groups (which all have higher
// priorities than a CRD's 1000).
func (s *Store) ServedExtensions() (legacy []metav1.APIGroup, aggregated []apidiscoveryv2.APIGroupDiscovery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	builtin := map[string]bool{}
	for _, g := range ServedGroups() {
		builtin[g.Name] = true
	}
	crds := s.currentCRDs()
	services := map[string]*apiregistrationv1.APIService{}
	if h := s.res[apiServiceResource]; h != nil {
		for k := range h.objs {
			if e := s.current(h, k); e != nil {
				if o, err := s.decodeEntry(e); err == nil {
					if as, ok := o.(*apiregistrationv1.APIService); ok {
						services[as.Name] = as
					}
				}
			}
		}
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			name := v.Name + "." + crd.Spec.Group
			if v.Served && services[name] == nil {
				services[name] = &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: apiregistrationv1.APIServiceSpec{Group: crd.Spec.Group, Version: v.Name, GroupPriorityMinimum: 1000, VersionPriority: 100}}
			}
		}
	}
	var list []*apiregistrationv1.APIService
	for _, as := range services {
		if as.Spec.Group != "" && !builtin[as.Spec.Group] {
			list = append(list, as)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name }) // a stable start for the sort
	for _, group := range apiregistrationhelper.SortedByGroupAndVersion(list) {
		g := metav1.APIGroup{Name: group[0].Spec.Group}
		for _, as := range group {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: as.Spec.Group + "/" + as.Spec.Version, Version: as.Spec.Version}
			if len(g.Versions) == 0 {
				g.PreferredVersion = gv
			}
			g.Versions = append(g.Versions, gv)
		}
		legacy = append(legacy, g)
	}
	return legacy, crdDiscovery(crds, builtin)
}

// currentCRDs returns the world's current CRDs (the lock is held).
func (s *Store) currentCRDs() []*apiextensionsv1.CustomResourceDefinition {
	h := s.res[crdResource]
	if h == nil {
		return nil
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for k := range h.objs {
		if e := s.current(h, k); e != nil {
			if o, err := s.decodeEntry(e); err == nil {
				if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
					out = append(out, crd)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// crdVerbs are the verbs of a custom resource, in the apiextensions
// server's order.
var crdVerbs = []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

// crdDiscovery is the aggregated discovery of the established CRDs'
// served versions (their accepted names), built-in groups left out.
func crdDiscovery(crds []*apiextensionsv1.CustomResourceDefinition, builtin map[string]bool) []apidiscoveryv2.APIGroupDiscovery {
	groups := map[string]map[string][]apidiscoveryv2.APIResourceDiscovery{} // group → version → resources
	for _, crd := range crds {
		if !crdEstablished(crd) || builtin[crd.Spec.Group] {
			continue
		}
		names := crd.Status.AcceptedNames
		scope := apidiscoveryv2.ScopeCluster
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
			scope = apidiscoveryv2.ScopeNamespace
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			kind := &metav1.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: names.Kind}
			r := apidiscoveryv2.APIResourceDiscovery{Resource: names.Plural, ResponseKind: kind, Scope: scope,
				SingularResource: names.Singular, Verbs: crdVerbs, ShortNames: names.ShortNames, Categories: names.Categories}
			if sr := v.Subresources; sr != nil {
				if sr.Status != nil {
					r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "status",
						ResponseKind: kind, Verbs: []string{"get", "patch", "update"}})
				}
				if sr.Scale != nil {
					r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "scale",
						ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
						Verbs:        []string{"get", "patch", "update"}})
				}
			}
			if groups[crd.Spec.Group] == nil {
				groups[crd.Spec.Group] = map[string][]apidiscoveryv2.APIResourceDiscovery{}
			}
			groups[crd.Spec.Group][v.Name] = append(groups[crd.Spec.Group][v.Name], r)
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	var out []apidiscoveryv2.APIGroupDiscovery
	for _, g := range names {
		d := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		var versions []string
		for v := range groups[g] {
			versions = append(versions, v)
		}
		sort.Slice(versions, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0 })
		for _, v := range versions {
			rs := groups[g][v]
			sort.Slice(rs, func(i, j int) bool { return strings.Compare(rs[i].Resource, rs[j].Resource) < 0 })
			d.Versions = append(d.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v, Resources: rs,
				Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		out = append(out, d)
	}
	return out
}
