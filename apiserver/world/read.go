package world

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

func metaOf(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }

// get answers GET of one object (or of its status) at the world's point.
func (s *Store) get(c *call) *Response {
	o, rewritten, err := s.served(c)
	if err != nil {
		return s.errorResponse(c.r, err, HowError)
	}
	return s.respondRewritten(c.r, c.info, http.StatusOK, o, rewritten, HowGet, false)
}

// served returns the object c names as it is served at the world's point,
// in the format its client prefers when the session holds it so
// (servedObject); a NotFound error when there is none.
func (s *Store) served(c *call) (o codec.Object, rewritten bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(c.t.Resource)
	e := s.current(h, c.key())
	if e == nil {
		return o, false, apierrors.NewNotFound(c.info.Resource.GroupResource(), c.t.Name)
	}
	return s.servedAs(e, wantFormat(c.r, c.info), c.info.GVK())
}

// wantFormat guesses the format a client's Accept header prefers, to
// pick the stored version of an object that needs no transcoding.
func wantFormat(r *Request, info Info) frame.Format {
	m, err := codec.Negotiate(r.Header.Get("Accept"), codec.TargetObject, info.GVK())
	if err != nil {
		return codec.JSON.Format
	}
	return m.Format
}

// list answers a LIST at the world's point (or, with
// resourceVersionMatch=Exact, at the resourceVersion asked for).
func (s *Store) list(r *Request, t Target, info Info) *Response {
	w, err := s.writer(r, codec.TargetList, info)
	if err != nil {
		return s.errorResponse(r, err, HowError)
	}
	sel, err := newSelector(r.Query.Get("labelSelector"), r.Query.Get("fieldSelector"), info)
	if err != nil {
		return s.errorResponse(r, err, HowError)
	}
	pg, err := parsePage(r)
	if err != nil {
		return s.errorResponse(r, err, HowError)
	}
	s.mu.Lock()
	at, err := s.readPoint(r.Query.Get("resourceVersion"), r.Query.Get("resourceVersionMatch"), "list")
	if err == nil && pg.rv != 0 {
		// The next page of a paginated list: its first page's snapshot.
		at = pg.rv
		if at < s.oldest {
			err = apierrors.NewResourceExpired(continueExpired)
		}
	}
	if err != nil {
		s.mu.Unlock()
		return s.errorResponse(r, err, HowError)
	}
	items, err := s.collect(t, info, sel, at, w.Media.Format)
	s.mu.Unlock()
	if err != nil {
		return s.errorResponse(r, err, HowError)
	}
	items, lm, err := pg.cut(t, items, at, !sel.empty())
	if err != nil {
		return s.errorResponse(r, err, HowError)
	}
	body, err := w.List(info.APIVersion(), info.Kind, lm, items)
	if err != nil {
		return s.errorResponse(r, notAcceptableEncoding(err, w.Media), HowError)
	}
	return &Response{Code: http.StatusOK, ContentType: w.Media.ContentType(codec.TargetList), Body: body,
		How: HowList, Transcoded: true}
}

// readPoint is the served resourceVersion a read with these parameters
// sees: the world's point, or for an Exact match the one asked for.
func (s *Store) readPoint(rv, match, what string) (uint64, error) {
	if rv == "" || rv == "0" {
		return s.clk.last, nil
	}
	n, ok := parseRV(rv)
	if !ok {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", rv))
	}
	if n > s.clk.last {
		return 0, apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", n, s.clk.last), 1)
	}
	if match == string(metav1.ResourceVersionMatchExact) {
		if n < s.oldest {
			return 0, apierrors.NewResourceExpired(fmt.Sprintf("The resourceVersion for the provided %s is too old.", what))
		}
		return n, nil
	}
	return s.clk.last, nil
}

// collect returns the objects of t's scope matching sel at served
// resourceVersion at, in etcd's key order (the lock is held).
func (s *Store) collect(t Target, info Info, sel *selector, at uint64, f frame.Format) ([]codec.Object, error) {
	return s.collectOf(t, info, sel, at, f, false)
}

// collectOf is collect, leaving the clients' writes out if recordedOnly.
func (s *Store) collectOf(t Target, info Info, sel *selector, at uint64, f frame.Format, recordedOnly bool) ([]codec.Object, error) {
	h, _ := s.hist(t.Resource)
	if h == nil {
		return nil, nil
	}
	var out []codec.Object
	for _, k := range sortedKeys(h.objs) {
		if t.Namespace != "" && k.Namespace != t.Namespace {
			continue
		}
		e := s.latestOf(h, k, at, recordedOnly)
		if e == nil || e.typ == Deleted {
			continue
		}
		ok, err := sel.matchesEntry(e)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		o, _, err := s.servedAs(e, f, info.GVK())
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
