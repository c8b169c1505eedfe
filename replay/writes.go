package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// Writes says how a replay answers the requests that change the world
// (POST, PUT, PATCH, DELETE) and what its watchers see of them.
type Writes string

const (
	// WritesAnswer (the default) answers writes as the apiserver would,
	// from the session's world (a recorded answer when the session holds
	// the same write); watchers keep seeing the recording.
	WritesAnswer Writes = "answer"
	// WritesApply answers writes as WritesAnswer does, and watchers of the
	// resource also see the events they cause, at the moment they happen,
	// among the recorded ones.
	WritesApply Writes = "apply"
	// WritesReject answers every write with 403 Forbidden: a read-only
	// replay.
	WritesReject Writes = "reject"
	// WritesRecorded serves only what was recorded: a write gets a
	// recorded exchange of the same method and path, or 404.
	WritesRecorded Writes = "recorded"
)

// ParseWrites reads a Writes mode by name ("" is WritesAnswer).
func ParseWrites(s string) (Writes, error) {
	switch w := Writes(s); w {
	case "":
		return WritesAnswer, nil
	case WritesAnswer, WritesApply, WritesReject, WritesRecorded:
		return w, nil
	}
	return "", fmt.Errorf("replay: writes mode %q: want answer, apply, reject or recorded", s)
}

// isWrite reports whether method changes the world.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// stateRequest is the store's view of a request.
func stateRequest(r *http.Request, q query, body []byte) *world.Request {
	return &world.Request{Method: q.method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header, Body: body}
}

// routeWrite decides how a write is answered (WritesAnswer, WritesApply,
// WritesReject): a recorded answer to the same write, else the store's.
func (s *Server) routeWrite(r *http.Request, q query, body []byte) route {
	if s.writes == WritesReject {
		return s.rejectRoute(r, q)
	}
	if x := s.matchWrite(r, q, body); x != nil {
		return s.recordedRoute(r, q, x)
	}
	if resp, ok := s.store.Serve(stateRequest(r, q, body)); ok {
		return storeRoute(resp)
	}
	return s.routeOther(r, q)
}

// storeRoute answers with a response of the store.
func storeRoute(resp *world.Response) route {
	rt := route{how: resp.How, status: resp.Code, serve: func(st *streamer, r *http.Request) {
		h := st.w.Header()
		h.Set("Content-Type", resp.ContentType)
		h.Set("Cache-Control", "no-cache, private")
		for _, w := range resp.Warnings {
			h.Add("Warning", world.WarningHeader(w))
		}
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
		st.w.WriteHeader(resp.Code)
		if r.Method != http.MethodHead {
			st.send(resp.Body)
		}
	}}
	if resp.Transcoded && resp.How == world.HowGet {
		rt.transcoded = "yes"
	}
	return rt
}

// rejectRoute answers a write with 403 Forbidden, worded as the
// apiserver's authorizer refusal.
func (s *Server) rejectRoute(r *http.Request, q query) route {
	gr := schema.GroupResource{}
	name := ""
	if t, ok := world.ParsePath(q.path); ok {
		gr, name = t.Resource.GroupResource(), t.Name
	}
	err := apierrors.NewForbidden(gr, name, errors.New("wtrace replay is read-only (--writes reject)"))
	st := codec.StatusOf(err)
	m := codec.StatusMedia(r.Header.Get("Accept"))
	body := codec.StatusBody(m, st)
	return route{how: howRejected, status: http.StatusForbidden, serve: func(sr *streamer, r *http.Request) {
		h := sr.w.Header()
		h.Set("Content-Type", m.ContentType(codec.TargetObject))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		sr.w.WriteHeader(http.StatusForbidden)
		sr.send(body)
	}}
}

// maxWriteBody bounds a recorded request body read to compare it with a
// client's (the apiserver's own limit on request bodies).
const maxWriteBody = world.MaxBodyBytes

// matchWrite returns the recorded exchange that answers this write: one
// with the same method, path and parameters (see the package doc) whose
// request body is the same after normalization (see normalizeBody), not
// served yet, the first in recorded order. nil if there is none.
func (s *Server) matchWrite(r *http.Request, q query, body []byte) *recorded {
	cands := s.m.byKey[q.key]
	if len(cands) == 0 {
		return nil
	}
	gvk := s.gvkOf(q.path)
	mine := normalizeBody(r.Header.Get("Content-Type"), body, gvk)
	for _, x := range cands {
		s.mu.Lock()
		used := s.usedWrite[x.id]
		s.mu.Unlock()
		if used {
			continue
		}
		theirs, err := s.recordedRequestBody(x, gvk)
		if err != nil || !bytes.Equal(theirs, mine) {
			continue
		}
		s.mu.Lock()
		if s.usedWrite[x.id] { // another client took it meanwhile
			s.mu.Unlock()
			continue
		}
		s.usedWrite[x.id] = true
		s.mu.Unlock()
		return x
	}
	return nil
}

// gvkOf is the kind of the objects of an API path (zero if unknown).
func (s *Server) gvkOf(path string) schema.GroupVersionKind {
	if s.store == nil {
		return schema.GroupVersionKind{}
	}
	t, ok := world.ParsePath(path)
	if !ok {
		return schema.GroupVersionKind{}
	}
	info, ok := s.store.Info(t.Resource)
	if !ok {
		return schema.GroupVersionKind{}
	}
	return info.GVK()
}

// recordedRequestBody returns the normalized request body of recorded
// exchange x (cached).
func (s *Server) recordedRequestBody(x *recorded, gvk schema.GroupVersionKind) ([]byte, error) {
	v, err := s.cache.get("wreq:"+strconv.FormatInt(x.id, 10), func() (any, int64, error) {
		var ct, enc string
		for _, h := range x.info.Request.Header {
			switch http.CanonicalHeaderKey(h.Name) {
			case "Content-Type":
				ct = h.Value
			case "Content-Encoding":
				enc = h.Value
			}
		}
		if enc != "" && !strings.EqualFold(enc, "identity") {
			return nil, 0, fmt.Errorf("replay: exchange %d: request body in %s", x.id, enc)
		}
		b, err := s.requestBody(x)
		if err != nil {
			return nil, 0, err
		}
		n := normalizeBody(ct, b, gvk)
		return n, int64(len(n)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// requestBody reads the request body of recorded exchange x.
func (s *Server) requestBody(x *recorded) ([]byte, error) {
	sc := s.file.ExchangeRecords(x.id)
	var b []byte
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if body, ok := rec.(*formats.Body); ok && body.Dir == formats.ClientToServer {
			if len(b)+len(body.Data) > maxWriteBody {
				return nil, fmt.Errorf("replay: exchange %d: request body over %d bytes", x.id, maxWriteBody)
			}
			b = append(b, body.Data...)
		}
	}
}

// normalizeBody turns a write's request body into what two runs of the
// same client agree on: JSON (from JSON, YAML, protobuf or CBOR), with
// resourceVersion and managedFields left out and every timestamp (a
// string that reads as an RFC 3339 time) blanked, keys sorted. A body
// that cannot be read is compared as it is.
func normalizeBody(contentType string, body []byte, gvk schema.GroupVersionKind) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	mt := mediaType(contentType)
	var j []byte
	switch {
	case strings.Contains(mt, "protobuf"):
		if obj, err := codec.DecodeBody(codec.MediaProtobuf, body, gvk); err == nil {
			if o, err := codec.Encode(obj, frame.JSON); err == nil {
				j = o.Raw
			}
		}
		if j == nil {
			// DeleteOptions and other meta.k8s.io bodies.
			if obj, err := codec.DecodeBody(codec.MediaProtobuf, body, metav1.SchemeGroupVersion.WithKind("DeleteOptions")); err == nil {
				j, _ = json.Marshal(obj)
			}
		}
	case strings.Contains(mt, "cbor"):
		if obj, err := codec.DecodeBody(codec.MediaCBOR, body, gvk); err == nil {
			if o, err := codec.Encode(obj, frame.JSON); err == nil {
				j = o.Raw
			}
		}
	case strings.Contains(mt, "yaml"):
		j, _ = yaml.YAMLToJSON(body)
	default:
		j = body
	}
	var v any
	if j == nil || json.Unmarshal(j, &v) != nil {
		return body
	}
	out, err := json.Marshal(stripVolatile(v))
	if err != nil {
		return body
	}
	return out
}

// stripVolatile removes what differs between two runs of the same write.
func stripVolatile(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			switch k {
			case "resourceVersion", "managedFields":
				delete(t, k)
			default:
				t[k] = stripVolatile(e)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = stripVolatile(e)
		}
	case string:
		if _, err := time.Parse(time.RFC3339, t); err == nil {
			return ""
		}
	}
	return v
}
