package conformance

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// Unserved returns the resources of the kinds client libraries know (the
// scheme of package codec: client-go's) that served, an apiserver's
// discovery, does not list: a replay of that apiserver must not serve
// them either. Their verbs are list and create, which the apiserver
// answers 404.
func Unserved(served []Resource) []Resource {
	have := map[string]bool{}
	for _, r := range served {
		have[r.GroupVersion()+" "+r.Name] = true
	}
	seen := map[string]bool{}
	var out []Resource
	for gvk := range codec.Scheme().AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") ||
			gvk.Group == "meta.k8s.io" || gvk.Kind == "WatchEvent" || gvk.Kind == "Status" || gvk.Kind == "APIGroupDiscoveryList" {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		r := Resource{Group: gvk.Group, Version: gvk.Version, Name: plural.Resource, Kind: gvk.Kind, Verbs: []string{"create", "list"}}
		k := r.GroupVersion() + " " + r.Name
		if have[k] || seen[k] || !servedGroupVersion(served, r) {
			continue
		}
		seen[k] = true
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return rowLess(out[i].Row(), out[j].Row()) })
	return out
}

// servedGroupVersion leaves out the kinds of group versions that are not
// APIs of resources at all (the kinds of meta, of admission reviews, of
// apidiscovery, …): a group version is one when it is served, or when its
// group is.
func servedGroupVersion(served []Resource, r Resource) bool {
	for _, s := range served {
		if s.Group == r.Group {
			return true
		}
	}
	return false
}

// planUnserved plans, for each unserved resource, a list and a create of
// its collection of every namespace (404 from the apiserver, whatever
// their scope would be).
func planUnserved(rs []Resource, ns string) []Case {
	var out []Case
	for _, r := range rs {
		r.Namespaced = false
		p := &plan{r: r, ns: ns}
		p.add("list", "list", "GET", r.Collection(ns), "", "", nil)
		p.add("create", "create", "POST", r.Collection(ns), "",
			`{"apiVersion":"`+r.GroupVersion()+`","kind":"`+r.Kind+`","metadata":{"name":"wcf-x"}}`, nil)
		out = append(out, p.cases...)
	}
	return out
}

// PlanUnserved returns the cases of the unserved resources, one group.
func PlanUnserved(rs []Resource, ns string) [][]Case {
	if len(rs) == 0 {
		return nil
	}
	return [][]Case{planUnserved(rs, ns)}
}
