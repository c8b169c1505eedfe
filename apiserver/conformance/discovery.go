package conformance

import (
	"sort"
)

// DiscoveryPaths are the documents a client reads to learn the API:
// /version, the legacy discovery of /api, /apis and each group and group
// version of rs, in the apiserver's order.
func DiscoveryPaths(rs []Resource) []string {
	out := []string{"/version", "/api", "/api/v1", "/apis"}
	seen := map[string]bool{}
	var groups []string
	gvs := map[string][]string{}
	for _, r := range rs {
		if r.Group == "" || seen[r.GroupVersion()] {
			continue
		}
		seen[r.GroupVersion()] = true
		if len(gvs[r.Group]) == 0 {
			groups = append(groups, r.Group)
		}
		gvs[r.Group] = append(gvs[r.Group], r.Version)
	}
	sort.Strings(groups)
	for _, g := range groups {
		out = append(out, "/apis/"+g)
		for _, v := range gvs[g] {
			out = append(out, "/apis/"+g+"/"+v)
		}
	}
	return out
}

// PlanDiscovery returns the cases of the discovery documents: each
// legacy document, and /api and /apis as aggregated discovery too. Their
// rows are the paths, their verb get.
func PlanDiscovery(rs []Resource) [][]Case {
	var cases []Case
	for _, p := range DiscoveryPaths(rs) {
		cases = append(cases, Case{Row: p, Verb: "get", Name: "legacy", Method: "GET", Path: p, Accept: mediaJSON})
		if p == "/api" || p == "/apis" {
			cases = append(cases, Case{Row: p, Verb: "get", Name: "aggregated", Method: "GET", Path: p,
				Accept: AggregatedAccept + ",application/json"})
		}
	}
	return [][]Case{cases}
}

// DiscoveryRows are the table's rows of the discovery documents.
func DiscoveryRows(rs []Resource, results []Result) []Row {
	by := map[string][]Result{}
	for _, r := range results {
		by[r.Case.Row] = append(by[r.Case.Row], r)
	}
	var out []Row
	for _, p := range DiscoveryPaths(rs) {
		out = append(out, Row{Name: p, Cells: map[string]Cell{"get": cellOf(by[p])}})
	}
	return out
}
