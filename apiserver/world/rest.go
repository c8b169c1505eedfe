package world

import (
	"net/http"
)

// The store answers each path of a resource through an endpoint: the
// resource itself (its collection and its objects) or one of its
// subresources, as kube-apiserver answers each through a REST storage of
// its own (pkg/registry/core/pod/storage/storage.go: REST, StatusREST,
// BindingREST, EvictionREST, …). An endpoint implements the verbs it
// serves as the interfaces below; a method it does not implement gets
// the apiserver's 405, whose router has no route for it. A new
// subresource is a new type beside the others (binding.go, scale.go,
// status.go, …) and a line of subresources.

// endpoint answers the requests of one path of a resource. serves
// reports whether the resource of info has it (kube-apiserver v1.33).
type endpoint interface {
	serves(info Info, pol policy) bool
}

// The verbs of an endpoint, by the method and path the apiserver routes
// to them: GET of a collection (lister) or of one object or subresource
// (getter); POST to a collection (creater) or to a subresource (a
// binding, an eviction: namedCreater); PUT, PATCH; DELETE of one object
// (deleter) or of a collection (collectionDeleter).
type (
	getter interface {
		get(s *Store, c *call) *Response
	}
	lister interface {
		list(s *Store, c *call) *Response
	}
	creater interface {
		create(s *Store, c *call) *Response
	}
	namedCreater interface {
		createNamed(s *Store, c *call) *Response
	}
	updater interface {
		update(s *Store, c *call) *Response
	}
	patcher interface {
		patch(s *Store, c *call) *Response
	}
	deleter interface {
		delete(s *Store, c *call) *Response
	}
	collectionDeleter interface {
		deleteCollection(s *Store, c *call) *Response
	}
)

// subresources are the subresources the store answers, by name. One the
// resource of a request does not have gets 404; one not listed is not the
// store's to answer (Serve's ok is false).
var subresources = map[string]endpoint{
	"status":   statusREST{},
	"scale":    scaleREST{},
	"finalize": finalizeREST{},
	"binding":  bindingREST{},
	"token":    tokenREST{},
	"eviction": evictionREST{},

	"ephemeralcontainers": ephemeralContainersREST{},
	"resize":              resizeREST{},
	"approval":            approvalREST{},
}

// resources are the resources whose own path is answered by an endpoint
// of its own rather than objectREST's storage of objects: the legacy
// bindings, which only binds Pods; the reviews, answered and never
// stored (reviews.go).
var resources = map[Resource]endpoint{
	{Version: "v1", Resource: "bindings"}:                                                 legacyBindingREST{},
	{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}:  reviewREST{},
	{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}:      reviewREST{},
	{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews"}: reviewREST{},
	{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"}:   reviewREST{},
	{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}:             reviewREST{},
	{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}:       reviewREST{},
}

// call is one request to an endpoint: the request, what its path names,
// the resource's facts and write policy, and how the answer is logged.
type call struct {
	r    *Request
	t    Target
	info Info
	pol  policy
	how  string
}

// key names the object of the request's path.
func (c *call) key() Key { return Key{c.t.Namespace, c.t.Name} }

// fail answers c with err's Status.
func (s *Store) fail(c *call, err error) *Response { return s.errorResponse(c.r, err, c.how) }

// endpointFor returns the endpoint of c's path; ok is false when the
// store does not answer it (a subresource it does not model).
func endpointFor(c *call) (ep endpoint, ok bool) {
	if c.t.Subresource == "" {
		if ep, ok := resources[c.t.Resource]; ok {
			return ep, true
		}
		return objectREST{}, true
	}
	ep, ok = subresources[c.t.Subresource]
	return ep, ok
}

// dispatch answers c through ep: the verb its method and path name, or
// the apiserver's 405 when ep has none.
func (s *Store) dispatch(ep endpoint, c *call) *Response {
	coll := c.t.Collection()
	switch c.r.Method {
	case http.MethodGet, http.MethodHead:
		if l, ok := ep.(lister); ok && coll {
			return l.list(s, c)
		}
		if g, ok := ep.(getter); ok && !coll {
			return g.get(s, c)
		}
	case http.MethodPost:
		c.how = HowCreate
		if cr, ok := ep.(creater); ok && coll {
			return cr.create(s, c)
		}
		if cr, ok := ep.(namedCreater); ok && !coll {
			return cr.createNamed(s, c)
		}
	case http.MethodPut:
		c.how = HowUpdate
		if u, ok := ep.(updater); ok && !coll {
			return u.update(s, c)
		}
		if coll {
			return s.errorResponse(c.r, methodNotSupported(c.info, "update"), HowError)
		}
	case http.MethodPatch:
		c.how = HowPatch
		if p, ok := ep.(patcher); ok && !coll {
			return p.patch(s, c)
		}
		if coll {
			return s.errorResponse(c.r, methodNotSupported(c.info, "patch"), HowError)
		}
	case http.MethodDelete:
		if d, ok := ep.(collectionDeleter); ok && coll {
			c.how = HowDeleteCollection
			return d.deleteCollection(s, c)
		}
		if d, ok := ep.(deleter); ok && !coll {
			c.how = HowDelete
			return d.delete(s, c)
		}
		if !coll {
			return s.errorResponse(c.r, methodNotSupported(c.info, "delete"), HowError)
		}
	}
	if !coll && !objectPaths(ep) {
		// A create-only resource has no paths below its collection.
		return s.errorResponse(c.r, notFoundPath(), HowError)
	}
	return s.errorResponse(c.r, methodNotAllowed(), HowError)
}

// objectPaths reports whether ep answers any verb of an object's path.
func objectPaths(ep endpoint) bool {
	switch ep.(type) {
	case getter, namedCreater, updater, patcher, deleter:
		return true
	}
	return false
}

// held is the object a request names, under the store's lock: its
// resource's history, its key, its current version (nil when there is
// none).
type held struct {
	h   *history
	key Key
	cur *entry
}

// withObject runs f with the store's lock held and the object c names:
// the preamble of every write of one object.
func (s *Store) withObject(c *call, f func(o held) *Response) *Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(c.t.Resource)
	key := c.key()
	return f(held{h: h, key: key, cur: s.current(h, key)})
}

// objectREST is a resource's own storage: its collection (list, create,
// delete-collection) and its objects (get, update, patch, delete), for
// every resource the store holds objects of.
type objectREST struct{}

func (objectREST) serves(Info, policy) bool { return true }

func (objectREST) list(s *Store, c *call) *Response             { return s.list(c.r, c.t, c.info) }
func (objectREST) get(s *Store, c *call) *Response              { return s.get(c) }
func (objectREST) create(s *Store, c *call) *Response           { return s.create(c) }
func (objectREST) update(s *Store, c *call) *Response           { return s.put(c, "", c.pol.createOnUpdate) }
func (objectREST) patch(s *Store, c *call) *Response            { return s.patch(c, "") }
func (objectREST) delete(s *Store, c *call) *Response           { return s.delete(c) }
func (objectREST) deleteCollection(s *Store, c *call) *Response { return s.deleteCollection(c) }

// statusREST is the status subresource of the kinds that have one: the
// object as the status strategy of its kind changes it.
type statusREST struct{}

func (statusREST) serves(_ Info, pol policy) bool { return pol.status }

func (statusREST) get(s *Store, c *call) *Response    { return s.get(c) }
func (statusREST) update(s *Store, c *call) *Response { return s.put(c, "status", false) }
func (statusREST) patch(s *Store, c *call) *Response  { return s.patch(c, "status") }

// finalizeREST is a Namespace's finalize subresource: its
// spec.finalizers, which the namespace controller empties to end its
// termination.
type finalizeREST struct{}

func (finalizeREST) serves(info Info, _ policy) bool { return isNamespaces(info.Resource) }

func (finalizeREST) update(s *Store, c *call) *Response { return s.put(c, "finalize", false) }
