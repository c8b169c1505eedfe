package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
)

// AggregatedAccept is the Accept header of a request for aggregated
// discovery (apidiscovery.k8s.io/v2), as kubectl sends it.
const AggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// Resource is one resource, or one subresource, an apiserver serves.
type Resource struct {
	Group, Version string
	Name           string // plural: "pods"
	Subresource    string // "" for the resource itself: "status", "binding", …
	Kind           string // the kind of its objects (of the resource, for a subresource that answers with it)
	Namespaced     bool
	Verbs          []string // as discovery lists them, sorted
}

// GroupVersion is the resource's group/version ("v1" for the core group).
func (r Resource) GroupVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// Row names the resource in the table: "apps/v1 deployments",
// "v1 pods/binding".
func (r Resource) Row() string {
	n := r.Name
	if r.Subresource != "" {
		n += "/" + r.Subresource
	}
	return r.GroupVersion() + " " + n
}

// Has reports whether the apiserver serves verb on r.
func (r Resource) Has(verb string) bool { return slices.Contains(r.Verbs, verb) }

// prefix is the path of r's group version: /api/v1, /apis/apps/v1.
func (r Resource) prefix() string {
	if r.Group == "" {
		return "/api/" + r.Version
	}
	return "/apis/" + r.Group + "/" + r.Version
}

// Collection is the path of r's collection in namespace ns ("" for a
// cluster-scoped resource, or every namespace).
func (r Resource) Collection(ns string) string {
	if r.Namespaced && ns != "" {
		return r.prefix() + "/namespaces/" + ns + "/" + r.Name
	}
	return r.prefix() + "/" + r.Name
}

// Object is the path of the object name of r in namespace ns, or of its
// subresource.
func (r Resource) Object(ns, name string) string {
	p := r.Collection(ns) + "/" + name
	if r.Subresource != "" {
		p += "/" + r.Subresource
	}
	return p
}

// ParseDiscovery reads the aggregated discovery documents of /api and
// /apis (apidiscovery.k8s.io/v2 APIGroupDiscoveryList, JSON) into the
// resources and subresources they list, every version of every group, in
// a stable order (by group version, then name).
func ParseDiscovery(docs ...[]byte) ([]Resource, error) {
	var out []Resource
	for _, b := range docs {
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("conformance: discovery: %w", err)
		}
		for _, g := range l.Items {
			for _, v := range g.Versions {
				for _, r := range v.Resources {
					res := Resource{Group: g.Name, Version: v.Version, Name: r.Resource,
						Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace, Verbs: sorted(r.Verbs)}
					if r.ResponseKind != nil {
						res.Kind = r.ResponseKind.Kind
					}
					out = append(out, res)
					for _, s := range r.Subresources {
						sub := res
						sub.Subresource, sub.Verbs = s.Subresource, sorted(s.Verbs)
						if s.ResponseKind != nil && s.ResponseKind.Kind != "" {
							sub.Kind = s.ResponseKind.Kind
						}
						out = append(out, sub)
					}
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return rowLess(out[i].Row(), out[j].Row()) })
	return out, nil
}

// rowLess orders rows by group version (the core group first), then
// resource and subresource.
func rowLess(a, b string) bool {
	ga, ra, _ := strings.Cut(a, " ")
	gb, rb, _ := strings.Cut(b, " ")
	ca, cb := !strings.Contains(ga, "/"), !strings.Contains(gb, "/")
	if ca != cb {
		return ca
	}
	if ga != gb {
		return ga < gb
	}
	return ra < rb
}

func sorted(v []string) []string {
	c := slices.Clone(v)
	sort.Strings(c)
	return c
}
