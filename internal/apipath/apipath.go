// Package apipath reads Kubernetes API request paths the way the
// apiserver's RequestInfoFactory (k8s.io/apiserver pkg/endpoints/request)
// does, for the packages that pair requests: replay (which recorded
// exchange answers a request) and diff (which requests of two sessions
// are the same). It holds no state and allocates only its results.
package apipath

import (
	"net/url"
	"sort"
	"strings"
)

// StripWatchSegment removes the legacy "watch" path segment
// (/api/v1/watch/namespaces/x/pods is a watch of
// /api/v1/namespaces/x/pods; /apis/GROUP/VERSION/watch/… likewise) and
// reports whether it was there. Other paths are returned unchanged.
func StripWatchSegment(path string) (string, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	i := -1
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		i = 2
	case len(segs) >= 4 && segs[0] == "apis":
		i = 3
	}
	if i < 0 || segs[i] != "watch" {
		return path, false
	}
	return "/" + strings.Join(append(segs[:i:i], segs[i+1:]...), "/"), true
}

// varying lists the query parameters that differ from run to run of the
// same client and so take no part in saying two requests are the same
// (replay's matcher and diff's pairing read the same list).
var varying = map[string]bool{
	"resourceVersion":      true,
	"resourceVersionMatch": true,
	"timeoutSeconds":       true,
	"timeout":              true,
	"limit":                true,
	"continue":             true,
	"allowWatchBookmarks":  true,
	"sendInitialEvents":    true,
	"watch":                true,
}

// Param is one query parameter: a name and one of its values.
type Param struct{ Name, Value string }

// StableParams returns the parameters of vals that say which request it
// is — every one but those that vary from run to run (resourceVersion,
// timeoutSeconds, limit, continue, watch, …) — sorted by name, then value,
// so that two requests with the same parameters in any order give the
// same list.
func StableParams(vals url.Values) []Param {
	names := make([]string, 0, len(vals))
	for k := range vals {
		if !varying[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []Param
	for _, k := range names {
		vs := append([]string(nil), vals[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			out = append(out, Param{k, v})
		}
	}
	return out
}
