package world

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// fieldManagerMaxLength is the apiserver's limit on a field manager name.
const fieldManagerMaxLength = 128

// optimisticLockMsg is the apiserver's message for a stale resourceVersion.
const optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

// writeParams are the query parameters every write shares.
type writeParams struct {
	dryRun     bool
	manager    string // fieldManager, else the User-Agent's prefix
	named      bool   // fieldManager was given
	force      bool
	validation string // fieldValidation: Strict, Warn or Ignore
}

func parseWriteParams(r *Request, optionsKind string) (writeParams, error) {
	var p writeParams
	for _, v := range r.Query["dryRun"] {
		if v != metav1.DryRunAll {
			return p, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "",
				field.ErrorList{field.NotSupported(field.NewPath("dryRun"), r.Query["dryRun"], []string{metav1.DryRunAll})})
		}
		p.dryRun = true
	}
	if fm := r.Query.Get("fieldManager"); fm != "" {
		if len(fm) > fieldManagerMaxLength {
			return p, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "",
				field.ErrorList{field.TooLong(field.NewPath("fieldManager"), "", fieldManagerMaxLength)})
		}
		p.manager, p.named = fm, true
	} else {
		p.manager = prefixFromUserAgent(r.Header.Get("User-Agent"))
	}
	if v := r.Query.Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, apierrors.NewBadRequest(err.Error())
		}
		p.force = b
	}
	v, err := fieldValidation(r, optionsKind)
	if err != nil {
		return p, err
	}
	p.validation = v
	return p, nil
}

// prefixFromUserAgent is the apiserver's manager name for a client that
// gave none: the User-Agent up to its first '/', printable characters
// only, at most 128 bytes.
func prefixFromUserAgent(u string) string {
	m, _, _ := strings.Cut(u, "/")
	var b strings.Builder
	for _, r := range m {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > fieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// bodyType checks the Content-Type of a create or update body.
func bodyType(r *Request) (string, error) {
	return codec.ContentFormat(r.Header.Get("Content-Type"))
}

func unsupportedMediaType() error {
	st := codec.NewStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "415: Unsupported Media Type")
	st.ErrStatus.Details = &metav1.StatusDetails{}
	return st
}

// timeNow is Options.Now truncated to seconds, as stored timestamps are.
func (s *Store) timeNow() metav1.Time {
	return metav1.NewTime(s.now().Truncate(time.Second))
}

func (s *Store) newUID() string {
	if s.opts.NewUID != nil {
		return s.opts.NewUID()
	}
	return uuid.NewString()
}

// withWarnings adds warnings to a successful answer.
func withWarnings(resp *Response, warnings []string) *Response {
	if resp.Code < 300 {
		resp.Warnings = append(resp.Warnings, warnings...)
	}
	return resp
}

// checkNamespace sets or checks the object's namespace against the
// request's.
func checkNamespace(m metav1.Object, t Target, info Info) error {
	if !info.Namespaced {
		m.SetNamespace("")
		return nil
	}
	switch m.GetNamespace() {
	case "":
		m.SetNamespace(t.Namespace)
	case t.Namespace:
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// commit stores obj under key as an event of type ev and answers code
// with it as stored; with dryRun it stores nothing and answers obj as it
// is.
func (s *Store) commit(c *call, h *history, key Key, obj runtime.Object, ev EventType, code int, dryRun bool) *Response {
	obj = throughStorage(obj)
	if dryRun {
		o, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return s.fail(c, err)
		}
		return s.respond(c.r, c.info, code, o, c.how, false)
	}
	o, err := s.store(h, key, obj, ev)
	if err != nil {
		return s.fail(c, err)
	}
	s.afterWrite(h, key)
	return s.respond(c.r, c.info, code, o, c.how, true)
}

// written is the body of a create or an update read as an object: the
// write's parameters, the object and its metadata, and what field
// validation warns of.
type written struct {
	p        writeParams
	obj      runtime.Object
	m        metav1.Object
	warnings []string
}

// readWrite reads the body of a create or an update (optionsKind
// CreateOptions or UpdateOptions: the kind its parameters' errors name) as
// an object of kind gvk, as the apiserver's handlers do before the
// registry: the parameters, the Content-Type, the object, field validation.
func readWrite(c *call, optionsKind string, gvk schema.GroupVersionKind) (*written, error) {
	p, err := parseWriteParams(c.r, optionsKind)
	if err != nil {
		return nil, err
	}
	mt, err := bodyType(c.r)
	if err != nil {
		return nil, err
	}
	obj, m, err := decodeObject(mt, c.r.Body, gvk)
	if err != nil {
		return nil, err
	}
	warnings, err := checkFields(p.validation, mt, c.r.Body, gvk)
	if err != nil {
		return nil, err
	}
	return &written{p: p, obj: obj, m: m, warnings: warnings}, nil
}

// store assigns the next resourceVersion to obj and adds it to the history
// (the lock is held). It returns the stored object.
func (s *Store) store(h *history, key Key, obj runtime.Object, typ EventType) (codec.Object, error) {
	// Written through another version than its storage's: as the
	// storage's round trip makes it.
	obj, err := roundTrip(obj, h.info.GVK())
	if err != nil {
		return codec.Object{}, apierrors.NewInternalError(err)
	}
	m, _ := meta.Accessor(obj)
	rv := s.clk.next()
	s.publish()
	m.SetResourceVersion(formatRV(rv))
	o, err := codec.Encode(obj, frame.JSON)
	if err != nil {
		return codec.Object{}, err
	}
	e := &entry{rv: rv, synth: true, time: s.now().UnixNano(), typ: typ, key: key, obj: o, size: int64(len(o.Raw)) + 128}
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok && typ == Added {
		e.defaulted = true
	}
	if err := s.addSynth(h, e); err != nil {
		return codec.Object{}, apierrors.NewInternalError(err)
	}
	return o, nil
}

// fixManagedTimes stamps the managedFields entries a write changed with
// the store's clock (the field manager stamps the wall clock's).
func fixManagedTimes(old, obj runtime.Object, now metav1.Time) {
	om, err1 := meta.Accessor(old)
	nm, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return
	}
	before := map[string]*metav1.Time{}
	for _, e := range om.GetManagedFields() {
		before[e.Manager+"\x00"+string(e.Operation)+"\x00"+e.Subresource+"\x00"+e.APIVersion] = e.Time
	}
	mf := nm.GetManagedFields()
	for i := range mf {
		k := mf[i].Manager + "\x00" + string(mf[i].Operation) + "\x00" + mf[i].Subresource + "\x00" + mf[i].APIVersion
		if mf[i].Time == nil {
			continue
		}
		if old, ok := before[k]; ok && old != nil && old.Equal(mf[i].Time) {
			continue
		}
		t := now
		mf[i].Time = &t
	}
	nm.SetManagedFields(mf)
}

// decodeObject decodes the body of a create or an update, of media type
// mt, as an object of kind gvk, its Secret stringData converted
// (convertStringData); m is its metadata.
func decodeObject(mt string, body []byte, gvk schema.GroupVersionKind) (obj runtime.Object, m metav1.Object, err error) {
	if obj, err = codec.DecodeBody(mt, body, gvk); err != nil {
		return nil, nil, err
	}
	convertStringData(obj)
	if m, err = meta.Accessor(obj); err != nil {
		return nil, nil, err
	}
	return obj, m, nil
}

// convertStringData moves a Secret's stringData into its data, as the
// apiserver's conversion does before anything else sees the object.
func convertStringData(obj runtime.Object) {
	sec, ok := obj.(*corev1.Secret)
	if !ok || len(sec.StringData) == 0 {
		return
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	for k, v := range sec.StringData {
		sec.Data[k] = []byte(v)
	}
	sec.StringData = nil
}

// decodeEntry decodes an entry's object as it is served (its served
// resourceVersion).
func (s *Store) decodeEntry(e *entry) (runtime.Object, error) {
	o, _, err := s.servedObject(e, frame.JSON)
	if err != nil {
		return nil, err
	}
	obj, err := codec.Decode(o)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}
