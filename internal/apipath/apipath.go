// Package apipath reads Kubernetes API request paths the way the
// apiserver's RequestInfoFactory (k8s.io/apiserver pkg/endpoints/request)
// does, for the packages that pair requests: replay (which recorded
// exchange answers a request) and diff (which requests of two sessions
// are the same). It holds no state and allocates only its results.
package apipath

import "strings"

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
