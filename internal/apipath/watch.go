package apipath

import (
	"net/url"
	"strings"
)

// IsWatch reports whether kube-apiserver serves the request method target
// (a request-target as sent: origin-form, or absolute-form through a
// proxy) as a watch stream, reading it as the apiserver's handlers do
// (k8s.io/apiserver pkg/endpoints: RequestInfoFactory, and ListResource,
// which serves a collection's GET as a watch when its watch parameter is
// set):
//
//   - the legacy watch segment (/api/v1/watch/…, /apis/GROUP/VERSION/watch/…)
//     on a GET, after the path is percent-decoded (the apiserver routes the
//     decoded path);
//   - or a GET of a collection (no object name in the path) whose first
//     watch query parameter is set as the apiserver's parameter codec reads
//     a bool: any value but "false" (in any case) and "0", the empty one
//     included (watch=yes, ?watch). Query pairs that do not decode are left
//     out, as net/url's Query does for the apiserver.
//
// A GET of one object (…/pods/NAME?watch=true) is a GET, not a watch, as
// is any other method. A target that is not a valid request-target is no
// watch.
func IsWatch(method, target string) bool {
	if method != "GET" {
		return false
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return false
	}
	path, legacy := StripWatchSegment(u.Path)
	r, ok := ParseResource(path)
	if legacy || !ok || r.Name != "" {
		// The legacy segment makes a watch of what follows it; else only
		// a collection is watched (a name is a GET of one object).
		return legacy && ok
	}
	vals, ok := u.Query()["watch"]
	if !ok || len(vals) == 0 {
		return false
	}
	v := vals[0]
	return v != "0" && !strings.EqualFold(v, "false")
}
