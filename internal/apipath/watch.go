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
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	// /api/VERSION/… or /apis/GROUP/VERSION/…: what follows the version.
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return false
	}
	if rest[0] == "watch" {
		return len(rest) >= 2
	}
	// namespaces/NS/RESOURCE/… is RESOURCE/… in namespace NS (a
	// namespace's own subresources, namespaces/NS/status, excepted).
	if rest[0] == "namespaces" && len(rest) > 2 && !namespaceSubresource(rest[2]) {
		rest = rest[2:]
	}
	if len(rest) >= 2 {
		return false // an object's name: a GET of one object
	}
	vals, ok := u.Query()["watch"]
	if !ok || len(vals) == 0 {
		return false
	}
	v := vals[0]
	return v != "0" && !strings.EqualFold(v, "false")
}

// namespaceSubresource reports whether s is a subresource of a namespace
// (k8s.io/apiserver's namespaceSubresources).
func namespaceSubresource(s string) bool {
	return s == "status" || s == "finalize"
}
