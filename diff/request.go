package diff

import (
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
)

// class is what an exchange is to diff.
type class uint8

const (
	classOther class = iota // a GET that is not a watch, discovery, anything else
	classWrite              // POST, PUT, PATCH, DELETE
	classWatch              // a watch request, or a response split into events
)

// Object names a Kubernetes object as a request path does: the resource
// (with its API group), the namespace, the name and the subresource. A
// create names the object its body does (metadata.name, or
// metadata.generateName followed by "*").
type Object struct {
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// Event is, for a Kubernetes Event (core/v1 or events.k8s.io), what it
	// says — type, reason, the object it is about, message, reporting
	// component — which names it instead of its Name (see kevents.go).
	Event string `json:"event,omitempty"`
}

// String is how the report names the object: "configmaps demo/cm-1",
// "deployments.apps demo/web (status)", "nodes n1", "configmaps demo (collection)".
func (o Object) String() string {
	var b strings.Builder
	b.WriteString(o.Resource)
	if o.Group != "" {
		b.WriteByte('.')
		b.WriteString(o.Group)
	}
	b.WriteByte(' ')
	switch {
	case o.Event != "" && o.Namespace != "":
		b.WriteString(o.Namespace + ": " + o.Event)
	case o.Event != "":
		b.WriteString(o.Event)
	case o.Namespace != "" && o.Name != "":
		b.WriteString(o.Namespace + "/" + o.Name)
	case o.Name != "":
		b.WriteString(o.Name)
	case o.Namespace != "":
		b.WriteString(o.Namespace + " (collection)")
	default:
		b.WriteString("(collection)")
	}
	if o.Subresource != "" {
		b.WriteString(" (" + o.Subresource + ")")
	}
	return b.String()
}

// request is an exchange's request reduced to what diff pairs and groups
// exchanges by.
type request struct {
	method   string // upper case
	path     string // decoded, legacy watch segment removed
	watch    bool
	key      string // method, path, watch and every non-varying parameter, order-insensitive
	resource bool   // the path names a resource (obj is set)
	obj      Object // for a collection, Name is ""
	version  string // API version of the path ("v1")
	label    string // labelSelector
	field    string // fieldSelector
	as       string // the transformation the Accept header asks for ("Table", "PartialObjectMetadata"), if any
	ctype    string // the request's Content-Type media type, lower case
	cenc     string // the request's Content-Encoding
}

// parseRequest reduces a recorded request. A request that was not
// captured, or whose target does not parse, gets a key of its own kind
// and is compared with the like of it.
func parseRequest(r *formats.Request) request {
	if r.Missing {
		return request{method: "?", key: "? (request not captured)"}
	}
	q := request{method: strings.ToUpper(r.Method)}
	for _, h := range r.Header {
		switch strings.ToLower(h.Name) {
		case "accept":
			q.as = acceptAs(h.Value)
		case "content-type":
			q.ctype = mediaType(h.Value)
		case "content-encoding":
			q.cenc = strings.ToLower(strings.TrimSpace(h.Value))
		}
	}
	req, err := apipath.Parse(q.method, r.Target)
	switch {
	case err != nil && len(r.Target) > apipath.MaxTargetLen:
		q.key = q.method + " (target of " + strconv.Itoa(len(r.Target)) + " bytes)"
		return q
	case err != nil:
		q.path, q.key = r.Target, q.method+" "+r.Target
		return q
	}
	q.path, q.watch = req.Path, req.Watch
	q.label, q.field = req.LabelSelector, req.FieldSelector
	q.obj, q.version, q.resource = objectOf(req)
	q.key = req.Key
	if q.as != "" {
		q.key += " (as " + q.as + ")"
	}
	return q
}

// classify says what exchange x is: a write by its method, a watch by its
// request or by its response (a body the recorder split into events).
func classify(q request, x *formats.ExchangeInfo) class {
	if apipath.IsWrite(q.method) {
		return classWrite
	}
	if q.watch || (x.Response != nil && x.Response.Events != 0) {
		return classWatch
	}
	return classOther
}

// objectOf is the object request r names, and its API version, as the
// apiserver reads its path (apipath.Request); false for a path that is
// no resource.
func objectOf(r apipath.Request) (Object, string, bool) {
	if !r.IsResource {
		return Object{}, "", false
	}
	return Object{Group: r.Group, Resource: r.Resource.Resource, Namespace: r.Namespace, Name: r.Name, Subresource: r.Subresource}, r.Version, true
}

// acceptAs returns the transformation an Accept header asks for first
// (as=Table, as=PartialObjectMetadata, …), or "".
func acceptAs(accept string) string {
	for _, clause := range strings.Split(accept, ",") {
		_, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		if as := params["as"]; as != "" {
			return as
		}
	}
	return ""
}

// mediaType returns a Content-Type's media type in lower case, without
// parameters.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// scope names a watch stream: the resource and namespace its path names
// and its selectors.
func (q request) scope() string {
	var b strings.Builder
	b.WriteString("watch ")
	if q.resource {
		b.WriteString(q.obj.Resource)
		if q.obj.Group != "" {
			b.WriteString("." + q.obj.Group)
		}
		switch {
		case q.obj.Name != "":
			// A watch of one object's path (/api/v1/namespaces/ns/pods/p?watch=1).
			if q.obj.Namespace != "" {
				b.WriteString(" " + q.obj.Namespace + "/" + q.obj.Name)
			} else {
				b.WriteString(" " + q.obj.Name)
			}
		case q.obj.Namespace != "":
			b.WriteString(" -n " + q.obj.Namespace)
		default:
			b.WriteString(" (all namespaces)")
		}
	} else {
		b.WriteString(q.path)
	}
	if q.label != "" {
		b.WriteString(" labelSelector=" + q.label)
	}
	if q.field != "" {
		b.WriteString(" fieldSelector=" + q.field)
	}
	if q.as != "" {
		b.WriteString(" (as " + q.as + ")")
	}
	return b.String()
}

// String is a short description for error messages.
func (q request) String() string { return fmt.Sprintf("%s %s", q.method, q.path) }
