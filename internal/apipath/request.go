package apipath

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Request is a request as kube-apiserver reads it: its RequestInfoFactory
// (k8s.io/apiserver pkg/endpoints/request: the path's group, version,
// resource, namespace, name and subresource, and the verb) and its
// handlers' decision to serve a watch stream (ListResource: the legacy
// watch segment, or a collection's watch parameter; a named object is
// never watched through the parameter). Every package that reads a
// request, recorded or incoming — record, replay, the world, diff,
// slice, export, the metrics — reads it through Parse, so that what one
// calls a watch, or which object a path names, the others do too.
type Request struct {
	// Method is the method in upper case.
	Method string
	// Path is the percent-decoded path (the apiserver routes the decoded
	// path), without the legacy watch segment.
	Path string
	// Query holds the query parameters as net/url reads them for the
	// apiserver: pairs that do not decode are left out.
	Query url.Values
	// Resource is what Path names; IsResource says whether it names a
	// resource at all (not /version, /apis/apps/v1, discovery).
	Resource
	IsResource bool
	// LegacyWatch says the path had the legacy watch segment
	// (/api/v1/watch/…, /apis/GROUP/VERSION/watch/…).
	LegacyWatch bool
	// Watch says kube-apiserver serves the request as a watch stream: a
	// GET of a resource through the legacy watch segment (a collection or
	// one object), or a GET of a collection whose first watch parameter
	// is set as its parameter codec reads a bool — any value but "false"
	// (in any case) and "0", the empty one included (?watch, ?watch=yes).
	Watch bool
	// Verb is RequestInfo's verb for a resource: get, list, watch,
	// create, update, patch, delete, deletecollection; for any other
	// path, the method in lower case.
	Verb string
	// The parameters that say which version of the world the request
	// reads (as sent), how a list continues, and what it selects.
	ResourceVersion, ResourceVersionMatch, Continue string
	LabelSelector, FieldSelector                    string
	// Timeout is timeoutSeconds (0: none or not a positive number; a
	// year at most, larger values are no timeout).
	Timeout time.Duration
	// SendInitialEvents says sendInitialEvents is set (a streaming list),
	// read as the watch parameter is.
	SendInitialEvents bool
	// DryRun says the request carries a dryRun parameter (dryRun=All).
	DryRun bool
	// Key names the request by what says which request it is (see Key).
	Key string
}

// maxTimeout bounds the timeoutSeconds a request may ask for (a year):
// larger values are treated as no timeout.
const maxTimeout = 365 * 24 * time.Hour

// ErrTarget is the error Parse returns for a target that is not a valid
// request-target, or is longer than MaxTargetLen.
var ErrTarget = errors.New("malformed request-target")

// Parse reads a request-target as sent (origin-form, or absolute-form
// through a proxy) with its method, as kube-apiserver reads it (see
// Request). It bounds the target's length before reading it, and never
// panics. A target it cannot read is an ErrTarget; the Request then holds
// the method and its verb (as for a path that is no resource) alone.
func Parse(method, target string) (Request, error) {
	if len(target) > MaxTargetLen {
		return unread(method), fmt.Errorf("%w: %d bytes (limit %d)", ErrTarget, len(target), MaxTargetLen)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return unread(method), fmt.Errorf("%w: %v", ErrTarget, err)
	}
	vals, _ := url.ParseQuery(u.RawQuery) // what decodes, as u.Query() for the apiserver
	return newRequest(method, u.Path, vals), nil
}

// unread is what is known of a request whose target cannot be read.
func unread(method string) Request {
	return Request{Method: strings.ToUpper(method), Verb: strings.ToLower(method)}
}

func newRequest(method, path string, vals url.Values) Request {
	r := Request{Method: strings.ToUpper(method), Query: vals}
	r.Path, r.LegacyWatch = StripWatchSegment(path)
	r.Resource, r.IsResource = ParseResource(r.Path)
	r.ResourceVersion = vals.Get("resourceVersion")
	r.ResourceVersionMatch = vals.Get("resourceVersionMatch")
	r.Continue = vals.Get("continue")
	r.LabelSelector = vals.Get("labelSelector")
	r.FieldSelector = vals.Get("fieldSelector")
	r.SendInitialEvents = BoolParam(vals, "sendInitialEvents")
	_, r.DryRun = vals["dryRun"]
	if n, err := strconv.ParseInt(vals.Get("timeoutSeconds"), 10, 64); err == nil && n > 0 && n <= int64(maxTimeout/time.Second) {
		r.Timeout = time.Duration(n) * time.Second
	}
	r.Verb = r.verb()
	r.Watch = r.Method == "GET" && r.Verb == "watch" && (r.LegacyWatch || r.Name == "")
	r.Key = Key(r.Method, r.Path, r.Watch, vals)
	return r
}

// verb is RequestInfoFactory's verb (NewRequestInfo).
func (r *Request) verb() string {
	if !r.IsResource {
		return strings.ToLower(r.Method)
	}
	if r.LegacyWatch {
		return "watch" // the verb is the path's (specialVerbs)
	}
	named := r.Name != ""
	switch r.Method {
	case "GET", "HEAD":
		switch {
		case named:
			return "get"
		case WatchParam(r.Query):
			return "watch"
		}
		return "list"
	case "POST":
		return "create"
	case "PUT":
		return "update"
	case "PATCH":
		return "patch"
	case "DELETE":
		if !named {
			return "deletecollection"
		}
		return "delete"
	}
	return ""
}

// WatchParam reports whether query vals set the watch parameter as
// kube-apiserver's parameter codec reads a bool (Convert_Slice_string_To_bool):
// its first value is anything but "false" (in any case) and "0", the
// empty value included.
func WatchParam(vals url.Values) bool { return BoolParam(vals, "watch") }

// BoolParam reads parameter name of vals as kube-apiserver's parameter
// codec reads a bool: false when absent, or when its first value is
// "false" (in any case) or "0"; true otherwise.
func BoolParam(vals url.Values, name string) bool {
	vs := vals[name]
	return len(vs) > 0 && vs[0] != "0" && !strings.EqualFold(vs[0], "false")
}

// IsWatch reports whether kube-apiserver serves the request method
// target as a watch stream (Parse(method, target).Watch); a target that
// is not a valid request-target is no watch.
func IsWatch(method, target string) bool {
	r, err := Parse(method, target)
	return err == nil && r.Watch
}
