package discovery

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/world"
)

// aggregatedType is the Content-Type of aggregated discovery, as the
// apiserver answers a client that asks for it.
const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// served fills d with kube-apiserver v1.33's discovery documents, and the
// session's resources it does not serve added to them.
func (d *Docs) served(found map[gvr]*resource, order []gvr) {
	for _, p := range servedPaths() {
		if b, ok := world.ServedDocument(p); ok {
			d.byPath[p] = b
		}
	}
	api, apis := world.ServedDiscovery()
	d.aggregated = map[string][]byte{"/api": api, "/apis": apis}
	var extra []*resource
	for _, k := range order {
		r := found[k]
		if _, ok := world.BuiltinInfo(world.Resource{Group: r.group, Version: r.version, Resource: r.name}); ok {
			continue
		}
		if r.kind == "" {
			r.kind = wellKnown[k.gv+"/"+k.name].kind
		}
		if r.kind == "" {
			r.kind = guessKind(r.name)
		}
		extra = append(extra, r)
	}
	if len(extra) > 0 {
		d.add(extra)
	}
}

// servedPaths are the paths of kube-apiserver v1.33's legacy documents.
func servedPaths() []string {
	out := []string{"/api", "/api/v1", "/apis"}
	for _, g := range world.ServedGroups() {
		if g.Name == "" {
			continue
		}
		out = append(out, "/apis/"+g.Name)
		for _, v := range g.Versions {
			out = append(out, "/apis/"+g.Name+"/"+v.Version)
		}
	}
	return out
}

// add adds resources the apiserver does not serve to the documents: to
// their group version's list (made when there is none), their group (made
// when there is none) and to the aggregated /api or /apis.
func (d *Docs) add(rs []*resource) {
	lists := map[string]*metav1.APIResourceList{}
	for _, r := range rs {
		gv := r.groupVersion()
		path := versionPath(gv)
		l := lists[gv]
		if l == nil {
			l = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
			if b, ok := d.byPath[path]; ok {
				_ = json.Unmarshal(b, l)
			}
			lists[gv] = l
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.name, SingularName: strings.ToLower(r.kind),
			Namespaced: r.namespaced, Kind: r.kind, Verbs: allVerbs})
		if r.group != "" {
			d.addGroupVersion(r.group, r.version)
		}
		d.addAggregated(r)
	}
	for gv, l := range lists {
		sort.Slice(l.APIResources, func(i, j int) bool { return l.APIResources[i].Name < l.APIResources[j].Name })
		b, _ := json.Marshal(l)
		d.byPath[versionPath(gv)] = b
	}
}

func versionPath(gv string) string {
	if !strings.Contains(gv, "/") {
		return "/api/" + gv
	}
	return "/apis/" + gv
}

// addGroupVersion adds version to group in /apis and /apis/GROUP.
func (d *Docs) addGroupVersion(group, version string) {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + version, Version: version}
	var gl metav1.APIGroupList
	_ = json.Unmarshal(d.byPath["/apis"], &gl)
	i := -1
	for j := range gl.Groups {
		if gl.Groups[j].Name == group {
			i = j
		}
	}
	if i < 0 {
		gl.Groups = append(gl.Groups, metav1.APIGroup{Name: group, PreferredVersion: gv})
		i = len(gl.Groups) - 1
	}
	for _, v := range gl.Groups[i].Versions {
		if v.Version == version {
			return
		}
	}
	gl.Groups[i].Versions = append(gl.Groups[i].Versions, gv)
	gl.Kind, gl.APIVersion = "APIGroupList", "v1"
	b, _ := json.Marshal(gl)
	d.byPath["/apis"] = b
	g := gl.Groups[i]
	g.Kind, g.APIVersion = "APIGroup", "v1"
	b, _ = json.Marshal(g)
	d.byPath["/apis/"+group] = b
}

// addAggregated adds r to the aggregated discovery of its group version.
func (d *Docs) addAggregated(r *resource) {
	path := "/apis"
	if r.group == "" {
		path = "/api"
	}
	var l apidiscoveryv2.APIGroupDiscoveryList
	_ = json.Unmarshal(d.aggregated[path], &l)
	gi := -1
	for i := range l.Items {
		if l.Items[i].Name == r.group {
			gi = i
		}
	}
	if gi < 0 {
		l.Items = append(l.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: r.group}})
		gi = len(l.Items) - 1
	}
	g := &l.Items[gi]
	vi := -1
	for i := range g.Versions {
		if g.Versions[i].Version == r.version {
			vi = i
		}
	}
	if vi < 0 {
		g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: r.version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		vi = len(g.Versions) - 1
	}
	scope := apidiscoveryv2.ScopeCluster
	if r.namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	g.Versions[vi].Resources = append(g.Versions[vi].Resources, apidiscoveryv2.APIResourceDiscovery{Resource: r.name,
		ResponseKind: &metav1.GroupVersionKind{Group: r.group, Version: r.version, Kind: r.kind}, Scope: scope,
		SingularResource: strings.ToLower(r.kind), Verbs: allVerbs})
	l.Kind, l.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
	b, _ := json.Marshal(l)
	d.aggregated[path] = b
}

// wantsAggregated reports whether an Accept header asks for aggregated
// discovery (apidiscovery.k8s.io/v2), as kubectl and client-go do first.
func wantsAggregated(accept string) bool {
	for _, mr := range strings.Split(accept, ",") {
		params := map[string]string{}
		for _, p := range strings.Split(mr, ";")[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			params[strings.ToLower(k)] = v
		}
		if params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// serveAggregated writes the aggregated document of path, if the client
// asks for it and d has it.
func (d *Docs) serveAggregated(w http.ResponseWriter, r *http.Request, path string) bool {
	b, ok := d.aggregated[path]
	if !ok || !wantsAggregated(r.Header.Get("Accept")) {
		return false
	}
	if path == "/apis" {
		b = d.withAggregatedExtensions(b)
	}
	write(w, aggregatedType, b)
	return true
}
