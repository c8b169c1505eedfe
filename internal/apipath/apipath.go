// Package apipath reads Kubernetes API requests the way kube-apiserver
// does — its RequestInfoFactory (k8s.io/apiserver pkg/endpoints/request)
// and its handlers' decision to serve a watch — once, for every package
// that reads a request: Parse turns a method and a request-target into
// a Request (the path's group, version, resource, namespace, name and
// subresource, whether it is a watch, the verb, resourceVersion and its
// match, continue, selectors, timeout, dry run, and the Key that says
// which request it is). Record (the proxy's watches in flight, capture's
// exchanges), replay (which recorded exchange answers a request, the
// world's answers, the metrics), the world's load, diff (which requests
// of two sessions are the same), slice, export and report read through
// it, so that what one calls a watch the others do too. It holds no
// state and allocates only its results.
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

// WatchSuffix ends the Key of a watch.
const WatchSuffix = " (watch)"

// Key names a request by what says which request it is: the method, the
// decoded path, its StableParams as a query (in their order) and, for a
// watch, WatchSuffix — "GET /api/v1/pods?labelSelector=app=a (watch)".
// Two requests with the same Key ask the same thing; the replay's matcher
// and diff's pairing both use it, so what a replay answers as the same
// request diff pairs as the same request.
func Key(method, path string, watch bool, vals url.Values) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte(' ')
	b.WriteString(path)
	sep := byte('?')
	for _, p := range StableParams(vals) {
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(p.Name)
		b.WriteByte('=')
		b.WriteString(p.Value)
	}
	if watch {
		b.WriteString(WatchSuffix)
	}
	return b.String()
}

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

// Resource is what a resource path names: the API group ("" for the core
// group) and version, the resource, and, where the path has them, the
// namespace, the object's name and its subresource ("status", "scale";
// deeper paths joined with "/").
type Resource struct {
	Group, Version, Resource string
	Namespace, Name          string
	Subresource              string
}

// namespaceSubresources are the subresources of a namespace, which
// /api/v1/namespaces/NAME/SUB names the way a namespaced resource's
// collection is named; the apiserver reads them as the namespace's
// subresources (k8s.io/apiserver pkg/endpoints/request,
// namespaceSubresources).
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// ParseResource reads a resource path (no query; the legacy watch segment
// already stripped) as the apiserver's RequestInfoFactory does:
// /api/VERSION/… or /apis/GROUP/VERSION/…, then
// namespaces/NS/RESOURCE[/NAME[/SUBRESOURCE…]] or
// RESOURCE[/NAME[/SUBRESOURCE…]]; /api/v1/namespaces/NS/status and
// /finalize are the namespace's subresources. ok is false for a path that
// names no resource (/version, /apis/apps/v1, discovery).
func ParseResource(path string) (r Resource, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		r.Version, rest = segs[1], segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		r.Group, r.Version, rest = segs[1], segs[2], segs[3:]
	default:
		return Resource{}, false
	}
	if rest[0] == "namespaces" && len(rest) > 2 && !namespaceSubresources[rest[2]] {
		r.Namespace, rest = rest[1], rest[2:]
	}
	r.Resource = rest[0]
	if len(rest) > 1 {
		r.Name = rest[1]
	}
	if len(rest) > 2 {
		r.Subresource = strings.Join(rest[2:], "/")
	}
	if r.Resource == "" {
		return Resource{}, false
	}
	return r, true
}
