package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// Patch content types (k8s.io/apimachinery/pkg/types).
const (
	jsonPatch      = "application/json-patch+json"
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	applyPatch     = "application/apply-patch+yaml"
)

// maxJSONPatchOperations is the apiserver's limit on operations in one
// JSON patch.
const maxJSONPatchOperations = 10000

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

// create answers POST to a collection.
func (s *Store) create(r *Request, t Target, info Info) *Response {
	p, err := parseWriteParams(r, "CreateOptions")
	if err != nil {
		return s.errorResponse(r, err, HowCreate)
	}
	mt, err := bodyType(r)
	if err != nil {
		return s.errorResponse(r, err, HowCreate)
	}
	obj, m, err := decodeObject(mt, r.Body, info.GVK())
	if err != nil {
		return s.errorResponse(r, err, HowCreate)
	}
	warnings, err := checkFields(p.validation, mt, r.Body, info.GVK())
	if err != nil {
		return s.errorResponse(r, err, HowCreate)
	}
	if err := checkNamespace(m, t, info); err != nil {
		return s.errorResponse(r, err, HowCreate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	return withWarnings(s.createLocked(r, info, h, obj, p, HowCreate), warnings)
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

// createLocked creates obj (the lock is held).
func (s *Store) createLocked(r *Request, info Info, h *history, obj runtime.Object, p writeParams, how string) *Response {
	pol := policyFor(info)
	m, _ := meta.Accessor(obj)
	gr := info.Resource.GroupResource()
	// Admission comes before the registry, which generates the name.
	named := m.GetName()
	if named == "" {
		named = m.GetGenerateName()
	}
	if err := s.admitNamespace(info, m.GetNamespace(), named); err != nil {
		return s.errorResponse(r, err, how)
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		base := m.GetGenerateName()
		if len(base) > 58 {
			base = base[:58]
		}
		for {
			name := base + utilrand.String(5)
			if s.current(h, Key{m.GetNamespace(), name}) == nil {
				m.SetName(name)
				break
			}
		}
	}
	if m.GetName() == "" {
		return s.errorResponse(r, apierrors.NewInvalid(info.GVK().GroupKind(), "", field.ErrorList{
			field.Required(field.NewPath("metadata", "name"), "name or generateName is required")}), how)
	}
	key := Key{m.GetNamespace(), m.GetName()}
	if s.current(h, key) != nil {
		return s.errorResponse(r, apierrors.NewAlreadyExists(gr, m.GetName()), how)
	}
	now := s.timeNow()
	m.SetUID(typesUID(s.newUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	if pol.generation {
		m.SetGeneration(1)
	}
	defaultObject(obj)
	prepareCreate(obj, info, pol)
	mgr, err := fieldManager(info.GVK(), "")
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	live := newObject(info.GVK())
	obj = mgr.UpdateNoErrors(live, obj, p.manager)
	if err := s.admit(obj); err != nil {
		return s.errorResponse(r, err, how)
	}
	// After the field manager, which does not count these fields as the
	// client's.
	prepareNamespace(obj)
	fixManagedTimes(live, obj, now)
	obj.GetObjectKind().SetGroupVersionKind(info.GVK())
	resp := s.commit(r, info, h, key, obj, Added, http.StatusCreated, p.dryRun, how)
	if resp.Changed {
		s.pairCreated(info.Resource, obj)
	}
	return resp
}

// commit stores obj under key as an event of type ev and answers code
// with it as stored; with dryRun it stores nothing and answers obj as it
// is.
func (s *Store) commit(r *Request, info Info, h *history, key Key, obj runtime.Object, ev EventType, code int, dryRun bool, how string) *Response {
	if dryRun {
		o, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return s.errorResponse(r, err, how)
		}
		return s.respond(r, info, code, o, how, false)
	}
	o, err := s.store(h, key, obj, ev)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	return s.respond(r, info, code, o, how, true)
}

// prepareCreate does what the registry's strategies do to every new
// object of a kind: status starts empty where a status subresource owns
// it, a Namespace starts Active with its finalizer and name label, a Pod
// starts Pending.
func prepareCreate(obj runtime.Object, info Info, pol policy) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return // after the field manager (createLocked)
	case *corev1.Pod:
		o.Status = corev1.PodStatus{} // Pending after the field manager (admitPod)
		return
	case *unstructured.Unstructured:
		if pol.status {
			unstructured.RemoveNestedField(o.Object, "status")
		}
		return
	}
	if pol.status {
		clearStatus(obj)
	}
}

// clearStatus sets a typed object's Status field to its zero value.
func clearStatus(obj runtime.Object) {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	f := v.FieldByName("Status")
	if f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// store assigns the next resourceVersion to obj and adds it to the history
// (the lock is held). It returns the stored object.
func (s *Store) store(h *history, key Key, obj runtime.Object, typ EventType) (codec.Object, error) {
	m, _ := meta.Accessor(obj)
	rv := s.clk.next()
	s.publish()
	m.SetResourceVersion(formatRV(rv))
	o, err := codec.Encode(obj, frame.JSON)
	if err != nil {
		return codec.Object{}, err
	}
	e := &entry{rv: rv, synth: true, time: s.now().UnixNano(), typ: typ, key: key, obj: o, size: int64(len(o.Raw)) + 128}
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

// update answers PUT of an object (or its status or scale).
func (s *Store) update(r *Request, t Target, info Info) *Response {
	p, err := parseWriteParams(r, "UpdateOptions")
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	pol := policyFor(info)
	if t.Subresource == "status" && !pol.status || t.Subresource == "scale" && !pol.scale {
		return s.errorResponse(r, notFoundPath(), HowUpdate)
	}
	mt, err := bodyType(r)
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	want := info.GVK()
	if t.Subresource == "scale" {
		want = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	}
	obj, m, err := decodeObject(mt, r.Body, want)
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	warnings, err := checkFields(p.validation, mt, r.Body, want)
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	if m.GetName() != t.Name {
		return s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)), HowUpdate)
	}
	if err := checkNamespace(m, t, info); err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	key := Key{t.Namespace, t.Name}
	cur := s.current(h, key)
	if cur == nil {
		if pol.createOnUpdate && t.Subresource == "" {
			return withWarnings(s.createLocked(r, info, h, obj, p, HowUpdate), warnings)
		}
		return s.errorResponse(r, apierrors.NewNotFound(info.Resource.GroupResource(), t.Name), HowUpdate)
	}
	old, err := s.decodeEntry(cur)
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	if t.Subresource == "scale" {
		return s.updateScale(r, info, h, key, old, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			return obj.(*autoscalingv1.Scale), nil
		}, p, HowUpdate)
	}
	if err := s.checkRV(info, pol, t.Name, m.GetResourceVersion(), old); err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	obj, err = s.managed(info, old, obj, t.Subresource, p)
	if err != nil {
		return s.errorResponse(r, err, HowUpdate)
	}
	return withWarnings(s.commitUpdate(r, info, h, key, old, obj, p, HowUpdate), warnings)
}

// managed applies the registry's update rules to obj (prepareUpdate), then
// records the change in its managedFields, as the apiserver's field
// manager sees it (what the rules reset is not the client's).
func (s *Store) managed(info Info, old, obj runtime.Object, subresource string, p writeParams) (runtime.Object, error) {
	defaultObject(obj)
	obj, err := prepareUpdate(obj, old, policyFor(info), subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	mgr, err := fieldManager(info.GVK(), subresource)
	if err != nil {
		return nil, err
	}
	obj = mgr.UpdateNoErrors(old, obj, p.manager)
	if ns, ok := obj.(*corev1.Namespace); ok && subresource == "" {
		// A Namespace's spec.finalizers change through its finalize
		// subresource alone; the strategy puts them back after the field
		// manager, which counts them as the client's.
		ns.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
	}
	return obj, nil
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

// jsonPatchOp is one operation of a JSON patch, as the apiserver decodes
// it first (its error messages name the type "handlers.jsonPatchOp").
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// checkRV applies an update's resourceVersion precondition: none (when
// the kind allows unconditional updates) or the object's current one.
func (s *Store) checkRV(info Info, pol policy, name, rv string, old runtime.Object) error {
	gr := info.Resource.GroupResource()
	om, _ := meta.Accessor(old)
	if rv == "" {
		if pol.unconditionalUpdate {
			return nil
		}
		return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("resourceVersion"), zeroRV{}, "must be specified for an update")})
	}
	if rv != om.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, fmt.Errorf("%s", optimisticLockMsg))
	}
	return nil
}

// zeroRV prints as the apiserver's message shows its uint64 zero ("0x0",
// from the %#v of the apimachinery it is built with).
type zeroRV struct{}

func (zeroRV) MarshalJSON() ([]byte, error) { return nil, errors.New("printed with String") }
func (zeroRV) String() string               { return "0x0" }

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

// prepareUpdate keeps what an update may not change, as the registry's
// BeforeUpdate and strategies do: uid, creation and deletion timestamps,
// generation (bumped when anything but metadata and status changed, for
// kinds that track it); the status of the object for a PUT or PATCH of
// the object itself, everything but the status for one of its status.
func prepareUpdate(obj, old runtime.Object, pol policy, subresource string) (runtime.Object, error) {
	if _, typed := obj.(*unstructured.Unstructured); subresource == "status" && !typed && hasSpec(obj) {
		// The built-in kinds' status strategies: the object as sent, but
		// for its spec (and what each kind's strategy keeps besides).
		if err := statusUpdate(obj, old, pol.resource); err != nil {
			return nil, err
		}
	} else if subresource == "status" {
		// A custom resource's status strategy: the object as it was, with
		// the status sent.
		merged := old.DeepCopyObject()
		if err := copyStatus(merged, obj); err != nil {
			return nil, err
		}
		mm, _ := meta.Accessor(merged)
		nm, _ := meta.Accessor(obj)
		mm.SetManagedFields(nm.GetManagedFields())
		obj = merged
	} else if pol.status {
		if err := copyStatus(obj, old); err != nil {
			return nil, err
		}
	}
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	if m.GetUID() == "" {
		m.SetUID(om.GetUID())
	}
	m.SetCreationTimestamp(om.GetCreationTimestamp())
	if om.GetDeletionTimestamp() != nil {
		m.SetDeletionTimestamp(om.GetDeletionTimestamp())
	}
	if om.GetDeletionGracePeriodSeconds() != nil && m.GetDeletionGracePeriodSeconds() == nil {
		m.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	}
	m.SetGeneration(om.GetGeneration())
	if pol.generation && subresource == "" {
		changed, err := specChanged(obj, old)
		if err != nil {
			return nil, err
		}
		if changed {
			m.SetGeneration(om.GetGeneration() + 1)
		}
	}
	return obj, nil
}

// hasSpec reports whether a typed object has a Spec field.
func hasSpec(obj runtime.Object) bool {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v.Kind() == reflect.Struct && v.FieldByName("Spec").IsValid()
}

// statusKeepsMeta are the kinds whose status strategy keeps the object's
// metadata as it was (metav1.ResetObjectMetaForStatus, or the whole
// ObjectMeta), kube-apiserver v1.33.
var statusKeepsMeta = map[string]bool{
	"servicecidrs": true, "storageversionmigrations": true, "resourceclaims": true, "storageversions": true,
	"volumeattachments": true, "validatingadmissionpolicies": true, "flowschemas": true,
	"prioritylevelconfigurations": true,
}

// statusUpdate is what a built-in kind's status strategy (PrepareForUpdate)
// does to the object of an update of its status: obj keeps what was sent
// but for its spec, and what its kind keeps as it was (a Deployment's
// labels, a Pod's owner references; all of the metadata for some).
func statusUpdate(obj, old runtime.Object, resource string) error {
	nv, ov := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
	nv.FieldByName("Spec").Set(ov.FieldByName("Spec"))
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Labels = om.GetLabels()
	case *corev1.Pod:
		o.OwnerReferences = om.GetOwnerReferences()
		if o.Status.QOSClass == "" {
			o.Status.QOSClass = old.(*corev1.Pod).Status.QOSClass
		}
	}
	if statusKeepsMeta[resource] {
		mf := m.GetManagedFields()
		m.SetLabels(om.GetLabels())
		m.SetAnnotations(om.GetAnnotations())
		m.SetFinalizers(om.GetFinalizers())
		m.SetOwnerReferences(om.GetOwnerReferences())
		m.SetGeneration(om.GetGeneration())
		m.SetManagedFields(mf)
	}
	return nil
}

// copyStatus sets dst's status to src's.
func copyStatus(dst, src runtime.Object) error {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su, ok := src.(*unstructured.Unstructured)
		if !ok {
			return errorf("status of %T", src)
		}
		if st, ok := su.Object["status"]; ok {
			du.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(du.Object, "status")
		}
		return nil
	}
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	df, sf := dv.FieldByName("Status"), sv.FieldByName("Status")
	if !df.IsValid() || !sf.IsValid() {
		return nil
	}
	df.Set(sf)
	return nil
}

// specChanged reports whether anything but metadata and status differs.
func specChanged(obj, old runtime.Object) (bool, error) {
	a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false, err
	}
	b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return false, err
	}
	// ToUnstructured hands back an Unstructured's own map: compare copies.
	strip := func(m map[string]any) map[string]any {
		c := make(map[string]any, len(m))
		for k, v := range m {
			switch k {
			case "metadata", "status", "apiVersion", "kind":
			default:
				c[k] = v
			}
		}
		return c
	}
	return !reflect.DeepEqual(strip(a), strip(b)), nil
}

// commitUpdate finishes an update of key from old to obj, prepared and
// managed (the lock is held): a no-op (the same object: no new
// resourceVersion, no event), a deletion (the last finalizer of an object
// being deleted went away) or a new version.
func (s *Store) commitUpdate(r *Request, info Info, h *history, key Key, old, obj runtime.Object, p writeParams, how string) *Response {
	obj.GetObjectKind().SetGroupVersionKind(info.GVK())
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	now := s.timeNow()
	fixManagedTimes(old, obj, now)
	m.SetResourceVersion(om.GetResourceVersion())
	if sameObject(obj, old) {
		o, err := codec.Encode(old, frame.JSON)
		if err != nil {
			return s.errorResponse(r, err, how)
		}
		return s.respond(r, info, http.StatusOK, o, how, false)
	}
	if deleteDuringUpdate(obj, old) {
		// The registry deletes an object whose deletion only waited for
		// its finalizers, and answers with the object as updated.
		resp, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return s.errorResponse(r, err, how)
		}
		if p.dryRun {
			return s.respond(r, info, http.StatusOK, resp, how, false)
		}
		if _, err := s.store(h, key, old.DeepCopyObject(), Deleted); err != nil {
			return s.errorResponse(r, err, how)
		}
		return s.respond(r, info, http.StatusOK, resp, how, true)
	}
	return s.commit(r, info, h, key, obj, Modified, http.StatusOK, p.dryRun, how)
}

// deleteDuringUpdate is the registry's ShouldDeleteDuringUpdate: an update
// that leaves an object being deleted (with no grace period) without
// finalizers deletes it — for a Namespace, once its spec's finalizers are
// gone too.
func deleteDuringUpdate(obj, old runtime.Object) bool {
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	if om.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if g := om.GetDeletionGracePeriodSeconds(); g != nil && *g != 0 {
		return false
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	return true
}

// sameObject reports whether an update changes nothing that would be
// stored (managedFields timestamps aside, as the apiserver ignores them).
func sameObject(obj, old runtime.Object) bool {
	a, err1 := codec.Encode(obj.DeepCopyObject(), frame.JSON)
	b, err2 := codec.Encode(old.DeepCopyObject(), frame.JSON)
	if err1 != nil || err2 != nil {
		return false
	}
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	// Same but for managedFields times: the apiserver keeps the old ones.
	strip := func(o runtime.Object) []byte {
		c := o.DeepCopyObject()
		m, _ := meta.Accessor(c)
		mf := m.GetManagedFields()
		for i := range mf {
			mf[i].Time = nil
		}
		m.SetManagedFields(mf)
		e, _ := codec.Encode(c, frame.JSON)
		return e.Raw
	}
	return bytes.Equal(strip(obj), strip(old))
}

// scaleReplicas maps each scalable kind's API version to the path of its
// replicas, for the managedFields of the scale subresource
// (managedfields.ScaleHandler, as the apps and core registries use it).
var scaleReplicas = map[string]managedfields.ResourcePathMappings{
	"deployments":            {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"replicasets":            {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"statefulsets":           {"apps/v1": fieldpath.MakePathOrDie("spec", "replicas")},
	"replicationcontrollers": {"v1": fieldpath.MakePathOrDie("spec", "replicas")},
}

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// updateScale answers an update of the scale subresource (the lock is
// held): the object's Scale, with the managedFields of its replicas, goes
// to change (the request's Scale, or a patch of the current one); the new
// replicas and managedFields go back to the object.
func (s *Store) updateScale(r *Request, info Info, h *history, key Key, old runtime.Object, change func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error), p writeParams, how string) *Response {
	om, _ := meta.Accessor(old)
	handler := managedfields.NewScaleHandler(om.GetManagedFields(), info.Resource.GroupVersion(), scaleReplicas[info.Resource.Resource])
	oldScale, err := scaleOf(old)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	if oldScale.ManagedFields, err = handler.ToSubresource(); err != nil {
		return s.errorResponse(r, err, how)
	}
	sc, err := change(oldScale)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	if rv := sc.ResourceVersion; rv != "" && rv != om.GetResourceVersion() {
		return s.errorResponse(r, apierrors.NewConflict(info.Resource.GroupResource(), key.Name, fmt.Errorf("%s", optimisticLockMsg)), how)
	}
	if sc.UID != "" && sc.UID != om.GetUID() {
		gr := info.Resource.GroupResource()
		gr.Resource += "/scale"
		return s.errorResponse(r, apierrors.NewConflict(gr, key.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", sc.UID, om.GetUID())), how)
	}
	if how != HowApply {
		mgr, err := fieldManager(scaleGVK, "scale")
		if err != nil {
			return s.errorResponse(r, err, how)
		}
		sc = mgr.UpdateNoErrors(oldScale, sc, p.manager).(*autoscalingv1.Scale)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	if err := unstructured.SetNestedField(u, int64(sc.Spec.Replicas), "spec", "replicas"); err != nil {
		return s.errorResponse(r, err, how)
	}
	obj := newObject(info.GVK())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		return s.errorResponse(r, err, how)
	}
	mf, err := handler.ToParent(sc.ManagedFields)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	m, _ := meta.Accessor(obj)
	m.SetManagedFields(mf)
	obj, err = prepareUpdate(obj, old, policyFor(info), "")
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	resp := s.commitUpdate(r, info, h, key, old, obj, p, how)
	if resp.Code != http.StatusOK {
		return resp
	}
	cur := old
	if e := s.current(h, key); e != nil && !p.dryRun {
		if cur, err = s.decodeEntry(e); err != nil {
			return s.errorResponse(r, err, how)
		}
	} else if p.dryRun {
		cur = obj
	}
	out, err := scaleOf(cur)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	return s.respondObject(r, scaleInfo, http.StatusOK, out, how, resp.Changed)
}

// patch answers PATCH of an object (or its status or scale): JSON patch,
// JSON merge patch, strategic merge patch, server-side apply.
func (s *Store) patch(r *Request, t Target, info Info) *Response {
	how := HowPatch
	pt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	pt = strings.ToLower(strings.TrimSpace(pt))
	pol := policyFor(info)
	switch pt {
	case jsonPatch, mergePatch:
	case strategicPatch:
		if !pol.builtin {
			return s.errorResponse(r, codec.NewStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				"the body of the request was in an unknown format - accepted media types include: "+jsonPatch+", "+mergePatch+", "+applyPatch), how)
		}
	case applyPatch:
		how = HowApply
	default:
		return s.errorResponse(r, unsupportedMediaType(), how)
	}
	p, err := parseWriteParams(r, "PatchOptions")
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	if pt == applyPatch && !p.named {
		return s.errorResponse(r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")}), how)
	}
	if pt != applyPatch && r.Query.Get("force") != "" {
		return s.errorResponse(r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")}), how)
	}
	if t.Subresource == "status" && !pol.status || t.Subresource == "scale" && !pol.scale {
		return s.errorResponse(r, notFoundPath(), how)
	}
	gr := info.Resource.GroupResource()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.hist(t.Resource)
	key := Key{t.Namespace, t.Name}
	cur := s.current(h, key)
	if cur == nil {
		if pt != applyPatch || t.Subresource != "" {
			return s.errorResponse(r, apierrors.NewNotFound(gr, t.Name), how)
		}
		return s.applyCreate(r, t, info, h, p)
	}
	old, err := s.decodeEntry(cur)
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	var warnings []string
	run := func(base runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
		var (
			obj     runtime.Object
			patched []byte
			shown   string
			err     error
		)
		switch pt {
		case jsonPatch, mergePatch:
			obj, patched, err = applyJSONPatch(pt, r.Body, base, gvk)
			shown = string(patched)
		case strategicPatch:
			obj, patched, shown, err = applyStrategicPatch(r.Body, base, gvk)
		default:
			return s.apply(r.Body, base, gvk, t.Subresource, p)
		}
		if err != nil {
			return nil, err
		}
		if warnings, err = checkPatchedFields(p.validation, patched, shown, gvk); err != nil {
			return nil, err
		}
		return obj, nil
	}
	if t.Subresource == "scale" {
		return s.updateScale(r, info, h, key, old, func(sc *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			obj, err := run(sc, scaleGVK)
			if err != nil {
				return nil, err
			}
			return obj.(*autoscalingv1.Scale), nil
		}, p, how)
	}
	obj, err := run(old, info.GVK())
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != t.Name || (info.Namespaced && m.GetNamespace() != t.Namespace) {
		return s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)), how)
	}
	if err := s.checkRV(info, policy{unconditionalUpdate: true}, t.Name, m.GetResourceVersion(), old); err != nil {
		return s.errorResponse(r, err, how)
	}
	convertStringData(obj)
	if pt == applyPatch {
		defaultObject(obj)
		obj, err = prepareUpdate(obj, old, pol, t.Subresource)
	} else {
		obj, err = s.managed(info, old, obj, t.Subresource, p)
	}
	if err != nil {
		return s.errorResponse(r, err, how)
	}
	return withWarnings(s.commitUpdate(r, info, h, key, old, obj, p, how), warnings)
}

// applyJSONPatch applies a JSON patch or a JSON merge patch to base's
// JSON, as the apiserver's jsonPatcher does.
func applyJSONPatch(pt string, patch []byte, base runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, []byte, error) {
	cur, err := codec.Encode(base.DeepCopyObject(), frame.JSON)
	if err != nil {
		return nil, nil, err
	}
	var patched []byte
	if pt == jsonPatch {
		var ops []jsonPatchOp
		if err := json.Unmarshal(patch, &ops); err != nil {
			msg := strings.ReplaceAll(err.Error(), reflect.TypeOf(jsonPatchOp{}).String(), "handlers.jsonPatchOp")
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %s", msg))
		}
		po, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		if len(po) > maxJSONPatchOperations {
			return nil, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(po)))
		}
		patched, err = po.Apply(cur.Raw)
		if err != nil {
			return nil, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	} else {
		var v map[string]any
		if err := json.Unmarshal(patch, &v); err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		patched, err = jsonpatch.MergePatch(cur.Raw, patch)
		if err != nil {
			if err == jsonpatch.ErrBadJSONPatch {
				return nil, nil, apierrors.NewBadRequest(err.Error())
			}
			return nil, nil, err
		}
	}
	obj, err := codec.Decode(codec.Object{Format: frame.JSON, APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Raw: patched})
	if err != nil {
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), string(patched), err.Error())})
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, patched, nil
}

// applyStrategicPatch applies a strategic merge patch with the Go type of
// a built-in kind as its schema.
func applyStrategicPatch(patch []byte, base runtime.Object, gvk schema.GroupVersionKind) (obj runtime.Object, patchedJSON []byte, shown string, err error) {
	orig, err := runtime.DefaultUnstructuredConverter.ToUnstructured(base)
	if err != nil {
		return nil, nil, "", err
	}
	pm := map[string]any{}
	if err := json.Unmarshal(patch, &pm); err != nil {
		return nil, nil, "", apierrors.NewBadRequest(err.Error())
	}
	schemaObj := newObject(gvk)
	patched, err := strategicpatch.StrategicMergeMapPatch(orig, pm, schemaObj)
	if err != nil {
		switch err {
		case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
			mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
			return nil, nil, "", apierrors.NewBadRequest(err.Error())
		case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
			return nil, nil, "", apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return nil, nil, "", err
	}
	obj = newObject(gvk)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patched, obj); err != nil {
		return nil, nil, "", apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patched), err.Error())})
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	patchedJSON, err = json.Marshal(patched)
	if err != nil {
		return nil, nil, "", err
	}
	return obj, patchedJSON, fmt.Sprintf("%+v", pm), nil
}

// apply runs server-side apply with the apiserver's field manager.
func (s *Store) apply(patch []byte, live runtime.Object, gvk schema.GroupVersionKind, subresource string, p writeParams) (runtime.Object, error) {
	po := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(patch, &po.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	mgr, err := fieldManager(gvk, subresource)
	if err != nil {
		return nil, err
	}
	obj, err := mgr.Apply(live, po, p.manager, p.force)
	if err != nil {
		return nil, err
	}
	fixManagedTimes(live, obj, s.timeNow())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// applyCreate creates an object from an apply patch (the lock is held).
func (s *Store) applyCreate(r *Request, t Target, info Info, h *history, p writeParams) *Response {
	live := newObject(info.GVK())
	lm, _ := meta.Accessor(live)
	lm.SetName(t.Name)
	lm.SetNamespace(t.Namespace)
	obj, err := s.apply(r.Body, live, info.GVK(), "", p)
	if err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != t.Name {
		return s.errorResponse(r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), t.Name)), HowApply)
	}
	if err := checkNamespace(m, t, info); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	if err := s.admitNamespace(info, m.GetNamespace(), m.GetName()); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	pol := policyFor(info)
	now := s.timeNow()
	m.SetUID(typesUID(s.newUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	if pol.generation {
		m.SetGeneration(1)
	}
	defaultObject(obj)
	prepareCreate(obj, info, pol)
	if err := s.admit(obj); err != nil {
		return s.errorResponse(r, err, HowApply)
	}
	prepareNamespace(obj)
	resp := s.commit(r, info, h, Key{t.Namespace, t.Name}, obj, Added, http.StatusCreated, p.dryRun, HowApply)
	if resp.Changed {
		s.pairCreated(info.Resource, obj)
	}
	return resp
}

// prepareNamespace is the namespace strategy's PrepareForCreate for a
// Namespace being created: phase Active, and the kubernetes finalizer
// unless the client named finalizers. Other objects are left as they are.
func prepareNamespace(obj runtime.Object) {
	if o, ok := obj.(*corev1.Namespace); ok {
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		}
	}
}
