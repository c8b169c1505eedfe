package world

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// MaxBodyBytes bounds a request body (an object to create or update, a
// patch): the apiserver's own limit (--max-request-bytes' default for
// resource bodies is 3 MiB; etcd refuses objects past 1.5 MiB).
const MaxBodyBytes = 3 << 20

// Request is an API request to answer from the store.
type Request struct {
	Method string
	Path   string // decoded path, /api/v1/namespaces/demo/configmaps/x
	Query  url.Values
	Header http.Header // Accept, Content-Type and User-Agent are read
	Body   []byte      // at most MaxBodyBytes
	// RecordedOnly leaves the clients' writes out of a Watch: its initial
	// state and its changes are the recording's alone (a replay whose
	// watchers see only the recording while writes are answered).
	RecordedOnly bool
}

// How the store answered (the "how" of the replay's log lines).
const (
	HowGet              = "synth-get"
	HowList             = "synth-list"
	HowCreate           = "synth-create"
	HowUpdate           = "synth-update"
	HowPatch            = "synth-patch"
	HowApply            = "synth-apply"
	HowDelete           = "synth-delete"
	HowDeleteCollection = "synth-delete-collection"
	HowWatch            = "synth-watch"
	HowError            = "synth-error"
)

// Response is the store's answer to a Request.
type Response struct {
	Code        int
	ContentType string
	Body        []byte
	How         string
	// Transcoded is true when the body is not made of recorded bytes as
	// they were recorded (a write's answer, a format change, a
	// transformation, a shifted resourceVersion).
	Transcoded bool
	// Changed is true when the request changed the store (not for
	// dry runs, refused writes and no-op updates).
	Changed bool
	// Warnings are what the apiserver would say in Warning headers
	// (fields a write's object does not declare, with fieldValidation
	// Warn): each one's text (see WarningHeader).
	Warnings []string
}

// Handles reports whether the store answers requests for path: a
// resource it holds objects of, or a built-in resource.
func (s *Store) Handles(path string) bool {
	t, ok := ParsePath(path)
	if !ok {
		return false
	}
	_, ok = s.Info(t.Resource)
	return ok
}

// Serve answers a GET, LIST, create, update, patch, delete or
// delete-collection request from the store, as kube-apiserver v1.33 would
// at the world's point. ok is false for requests the store does not
// answer: paths that are not resources it knows (see Handles), watches
// (see Watch), and verbs on subresources it does not model.
func (s *Store) Serve(r *Request) (resp *Response, ok bool) {
	t, ok := ParsePath(r.Path)
	if !ok || t.Watch || t.Collection() && apipath.WatchParam(r.Query) {
		return nil, false
	}
	info, ok := s.Info(t.Resource)
	if !ok {
		return nil, false
	}
	if info.Namespaced && t.Namespace == "" && !t.Collection() {
		return s.errorResponse(r, codec.NewStatus(http.StatusNotFound, metav1.StatusReasonNotFound,
			"the server could not find the requested resource"), HowError), true
	}
	if !info.Namespaced && t.Namespace != "" {
		return s.errorResponse(r, notFoundPath(), HowError), true
	}
	c := &call{r: r, t: t, info: info, pol: policyFor(info)}
	ep, ok := endpointFor(c)
	if !ok {
		return nil, false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, false
	}
	if !ep.serves(info, c.pol) {
		return s.errorResponse(r, notFoundPath(), HowError), true
	}
	if len(r.Body) > MaxBodyBytes {
		return s.errorResponse(r, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes)), HowError), true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// The field manager's schemas (about 150 ms to build, once) are
		// built here, before the store's lock is taken: watchers waiting
		// on the lock would stall behind them.
		if _, ok := ep.(patcher); ok {
			_, _ = fieldManager(info.GVK(), t.Subresource)
		}
		_, _ = fieldManager(info.GVK(), "")
	}
	resp = s.dispatch(ep, c)
	if w := deprecationWarning(info); w != "" {
		resp.Warnings = append([]string{w}, resp.Warnings...)
	}
	if s.live != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.mu.Lock()
		s.noteRunWrite(r, t, resp)
		s.mu.Unlock()
	}
	return resp, true
}

// Unserved is the apiserver's answer to a request for an API path it
// does not serve (see Handles): 404 NotFound, "the server could not find
// the requested resource", encoded as the client's Accept allows.
func (s *Store) Unserved(r *Request) *Response {
	return s.errorResponse(r, notFoundPath(), HowError)
}

func notFoundPath() error {
	st := codec.NewStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	st.ErrStatus.Details = &metav1.StatusDetails{}
	return st
}

// methodNotAllowed is the apiserver's answer to a method no route of the
// path has (the finalize subresource only takes PUT).
func methodNotAllowed() error {
	st := codec.NewStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		"the server does not allow this method on the requested resource")
	st.ErrStatus.Details = &metav1.StatusDetails{}
	return st
}

func methodNotSupported(info Info, verb string) error {
	return apierrors.NewMethodNotSupported(info.Resource.GroupResource(), verb)
}

// errorResponse answers with a failure Status encoded as the client's
// Accept allows.
func (s *Store) errorResponse(r *Request, err error, how string) *Response {
	st := codec.StatusOf(err)
	m := codec.StatusMedia(r.Header.Get("Accept"))
	return &Response{Code: int(st.Code), ContentType: m.ContentType(codec.TargetObject), Body: codec.StatusBody(m, st),
		How: how, Transcoded: true}
}

// writer negotiates the encoding of a response.
func (s *Store) writer(r *Request, t codec.Target, info Info) (*codec.Writer, error) {
	m, err := codec.Negotiate(r.Header.Get("Accept"), t, info.GVK())
	if err != nil {
		return nil, err
	}
	var topts codec.TableOptions
	if m.As == codec.AsTable {
		topts, err = codec.ParseTableOptions(r.Query.Get("includeObject"))
		if err != nil {
			return nil, err
		}
	}
	return codec.NewWriter(m, topts, s.now), nil
}

// respond encodes one object as a response with code.
func (s *Store) respond(r *Request, info Info, code int, o codec.Object, how string, changed bool) *Response {
	return s.respondRewritten(r, info, code, o, false, how, changed)
}

// respondRewritten is respond for an object whose bytes were rewritten.
func (s *Store) respondRewritten(r *Request, info Info, code int, o codec.Object, rewritten bool, how string, changed bool) *Response {
	w, err := s.writer(r, codec.TargetObject, info)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	b, err := w.Object(o)
	if err != nil {
		return s.errorResponse(r, notAcceptableEncoding(err, w.Media), how)
	}
	return &Response{Code: code, ContentType: w.Media.ContentType(codec.TargetObject), Body: b, How: how,
		Transcoded: w.Transcoded() || rewritten || how != HowGet, Changed: changed}
}

// respondObject encodes a decoded object (a Status, a Scale, a list).
func (s *Store) respondObject(r *Request, info Info, code int, obj runtime.Object, how string, changed bool) *Response {
	w, err := s.writer(r, codec.TargetObject, info)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	b, err := w.RuntimeObject(obj)
	if err != nil {
		return s.errorResponse(r, notAcceptableEncoding(err, w.Media), how)
	}
	return &Response{Code: code, ContentType: w.Media.ContentType(codec.TargetObject), Body: b, How: how,
		Transcoded: true, Changed: changed}
}

// notAcceptableEncoding turns an encoding failure (a custom resource asked
// for in protobuf) into the apiserver's 406.
func notAcceptableEncoding(err error, m codec.Media) error {
	if m.Format == frame.Protobuf {
		return codec.NewStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: application/json, application/yaml")
	}
	return err
}

// servedObject returns e's object in format f when the session holds it
// so (else in its own format), its resourceVersion the one it is served
// with; rewritten says that is not the recorded one.
func (s *Store) servedObject(e *entry, f frame.Format) (o codec.Object, rewritten bool, err error) {
	o = e.obj
	if e.alt.Raw != nil && e.alt.Format == f {
		o = e.alt
	}
	return s.withServedRV(e, o)
}

// withServedRV returns o, one of e's forms, with the resourceVersion e is
// served with; rewritten says that is not the recorded one.
func (s *Store) withServedRV(e *entry, o codec.Object) (_ codec.Object, rewritten bool, err error) {
	want := e.rv
	if !e.synth {
		want = s.clk.served(e.rv)
	}
	if want == e.rv && !e.inferred {
		return o, false, nil
	}
	o, err = setRV(o, formatRV(want))
	return o, true, err
}

// setRV returns o with metadata.resourceVersion set to rv.
func setRV(o codec.Object, rv string) (codec.Object, error) {
	obj, err := codec.Decode(o)
	if err != nil {
		return o, err
	}
	m, err := metaOf(obj)
	if err != nil {
		return o, err
	}
	m.SetResourceVersion(rv)
	return codec.Encode(obj, o.Format)
}

// sortedKeys returns the keys of objs in etcd's order: by their keys'
// bytes, NAMESPACE/NAME (so "a-b/x" before "a/y").
func sortedKeys[V any](objs map[Key]V) []Key {
	keys := make([]Key, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	return keys
}

// keyLess orders keys as etcd orders their objects' keys.
func keyLess(a, b Key) bool {
	if a.Namespace == b.Namespace {
		return a.Name < b.Name
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

func errorf(format string, args ...any) error { return fmt.Errorf("state: "+format, args...) }

func typesUID(s string) types.UID { return types.UID(s) }
