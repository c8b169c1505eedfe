package world

import (
	"embed"
	"encoding/json"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
)

// The built-in API kube-apiserver v1.33 serves with its default flags:
// its aggregated discovery (/api and /apis, apidiscovery.k8s.io/v2),
// copied from a real one by apiserver/conformance's TestConformance
// (-update rewrites them). A built-in resource is one it lists; the kinds
// client libraries know besides (a later version's, an alpha API's) are
// not served unless a session shows them served.
//
// The legacy discovery documents (/api, /api/v1, /apis, each group and
// group version) and /version are copied too, as it serves them.
//
//go:embed served/api.json served/apis.json served/legacy.json
var servedFS embed.FS

// ServedLegacy returns the file of ServedDocument's documents (a JSON
// object of their texts by path). The caller must not change the bytes.
func ServedLegacy() []byte { return served().legacyFile }

// ServedDocument returns what kube-apiserver v1.33 answers a GET of path
// with as JSON: /version, or one of its legacy discovery documents (/api,
// /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION). ok is false for
// another path. Its /api names the address of the apiserver it was copied
// from (serverAddressByClientCIDRs), which a server replaces with its own.
func ServedDocument(path string) (doc []byte, ok bool) {
	d, ok := served().legacy[path]
	return d, ok
}

// ServedDiscovery returns kube-apiserver v1.33's aggregated discovery
// documents of /api and /apis as it serves them (JSON). The caller must
// not change the bytes.
func ServedDiscovery() (api, apis []byte) {
	d := served()
	return d.api, d.apis
}

// ServedGroups returns the API groups of ServedDiscovery, decoded: /api's
// (the core group) first, then /apis', in the apiserver's order. The
// caller must not change them.
func ServedGroups() []apidiscoveryv2.APIGroupDiscovery { return served().groups }

// servedTable is the embedded discovery, decoded once.
type servedTable struct {
	api, apis  []byte
	legacyFile []byte
	legacy     map[string][]byte
	groups     []apidiscoveryv2.APIGroupDiscovery
	byRes      map[Resource]servedResource
}

// servedResource is what the apiserver serves of one resource.
type servedResource struct {
	kind       string
	namespaced bool
	verbs      []string
	subs       map[string][]string // subresource → its verbs
}

var served = sync.OnceValue(func() *servedTable {
	t := &servedTable{byRes: map[Resource]servedResource{}}
	t.api, _ = servedFS.ReadFile("served/api.json")
	t.apis, _ = servedFS.ReadFile("served/apis.json")
	t.legacyFile, _ = servedFS.ReadFile("served/legacy.json")
	var legacy map[string]string
	if err := json.Unmarshal(t.legacyFile, &legacy); err != nil {
		panic("world: the embedded discovery: " + err.Error())
	}
	t.legacy = map[string][]byte{}
	for p, d := range legacy {
		t.legacy[p] = []byte(d)
	}
	for _, b := range [][]byte{t.api, t.apis} {
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(b, &l); err != nil {
			panic("world: the embedded discovery: " + err.Error())
		}
		t.groups = append(t.groups, l.Items...)
	}
	for _, g := range t.groups {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				sr := servedResource{namespaced: r.Scope == apidiscoveryv2.ScopeNamespace, verbs: r.Verbs, subs: map[string][]string{}}
				if r.ResponseKind != nil {
					sr.kind = r.ResponseKind.Kind
				}
				for _, s := range r.Subresources {
					sr.subs[s.Subresource] = s.Verbs
				}
				t.byRes[Resource{Group: g.Name, Version: v.Version, Resource: r.Resource}] = sr
			}
		}
	}
	return t
})

// servedInfo returns what kube-apiserver v1.33 serves of a built-in
// resource; ok is false for one it does not serve.
func servedInfo(r Resource) (Info, bool) {
	sr, ok := served().byRes[r]
	if !ok {
		return Info{}, false
	}
	return Info{Resource: r, Kind: sr.kind, Namespaced: sr.namespaced}, true
}

// servesSubresource reports whether kube-apiserver v1.33 serves
// subresource sub of built-in resource r (false for a resource it does
// not list: a custom resource's are the session's).
func servesSubresource(r Resource, sub string) (has, known bool) {
	sr, ok := served().byRes[r]
	if !ok {
		return false, false
	}
	_, has = sr.subs[sub]
	return has, true
}
