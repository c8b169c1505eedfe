package codec

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/munnerz/goautoneg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/frame"
)

// Media types the apiserver serves, in its order of preference.
const (
	MediaJSON     = "application/json"
	MediaYAML     = "application/yaml"
	MediaProtobuf = "application/vnd.kubernetes.protobuf"
	// MediaCBOR and MediaCBORSeq (a watch) are what kube-apiserver
	// serves with its CBORServingAndStorage gate on. Negotiate does not
	// offer them (v1.33's default); package replay serves CBOR recordings
	// to clients that accept them as recorded.
	MediaCBOR    = "application/cbor"
	MediaCBORSeq = "application/cbor-seq"
)

// Target is what a response carries.
type Target uint8

const (
	TargetObject Target = iota // one object (GET, a write's answer)
	TargetList                 // a list (LIST, DELETE of a collection)
	TargetWatch                // a watch stream of events
)

// Transformations a client can ask for with as=.
const (
	AsTable       = "Table"
	AsPartial     = "PartialObjectMetadata"
	AsPartialList = "PartialObjectMetadataList"
)

// Media is a negotiated response encoding.
type Media struct {
	Format frame.Format // frame.JSON (also for YAML) or frame.Protobuf
	YAML   bool         // application/yaml (Format is frame.JSON)
	// As is the transformation asked for ("", AsTable, AsPartial,
	// AsPartialList) and AsVersion its version (v1 or v1beta1, group
	// meta.k8s.io).
	As        string
	AsVersion string
}

// Plain reports whether m asks for the object itself, untransformed.
func (m Media) Plain() bool { return m.As == "" }

// ContentType is the Content-Type of a response in m: for a watch,
// application/json or application/vnd.kubernetes.protobuf;stream=watch,
// as the apiserver says (transformations do not show in it).
func (m Media) ContentType(t Target) string {
	switch {
	case m.YAML:
		return MediaYAML
	case m.Format == frame.Protobuf && t == TargetWatch:
		return MediaProtobuf + ";stream=watch"
	case m.Format == frame.Protobuf:
		return MediaProtobuf
	}
	return MediaJSON
}

// String names m for logs: "json", "protobuf", "json;as=Table", ….
func (m Media) String() string {
	s := m.Format.String()
	if m.YAML {
		s = "yaml"
	}
	if m.As != "" {
		s += ";as=" + m.As
	}
	return s
}

// JSON is the Media of a client that does not say.
var JSON = Media{Format: frame.JSON}

// serializers lists what the apiserver offers for built-in kinds, in its
// order (k8s.io/apiserver negotiation over the scheme's
// SupportedMediaTypes: JSON, YAML, protobuf; CBOR is off in v1.33).
var serializers = []struct {
	typ, sub string
	media    string
	stream   bool
}{
	{"application", "json", MediaJSON, true},
	{"application", "yaml", MediaYAML, false},
	{"application", "vnd.kubernetes.protobuf", MediaProtobuf, true},
}

// Negotiate picks the encoding of a response to a request with the given
// Accept header, as kube-apiserver v1.33 does. builtin says whether the
// resource is a built-in kind (custom resources have no protobuf form of
// their own; PartialObjectMetadata has one for every resource). The error
// is a *StatusError (406 NotAcceptable, or 400 for bad Table options)
// worded like the apiserver's.
func Negotiate(accept string, t Target, gvk schema.GroupVersionKind) (Media, error) {
	builtin := Known(gvk)
	if strings.TrimSpace(accept) == "" {
		return JSON, nil
	}
	clauses := goautoneg.ParseAccept(accept)
	if !routeAccepts(clauses) {
		// go-restful refuses the request before the apiserver's own
		// negotiation runs; its message lists the route's media types.
		st := NewStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"406: Not Acceptable\n\nAvailable representations: "+producesList(t))
		st.ErrStatus.Details = &metav1.StatusDetails{}
		return Media{}, st
	}
	for _, c := range clauses {
		for _, s := range serializers {
			if !(c.Type == s.typ && (c.SubType == s.sub || c.SubType == "*") || c.Type == "*" && c.SubType == "*") {
				continue
			}
			m, ok := acceptParams(c.Params, s.media, s.stream, builtin)
			if !ok {
				continue
			}
			if t == TargetWatch && !s.stream {
				return Media{}, notAcceptable(t)
			}
			return m, checkTarget(m, t, gvk)
		}
	}
	return Media{}, notAcceptable(t)
}

// routeAccepts mirrors go-restful's check of the Accept header against a
// route's produced types (type and subtype only, wildcards allowed).
func routeAccepts(clauses []goautoneg.Accept) bool {
	for _, c := range clauses {
		if c.Type == "*" && c.SubType == "*" {
			return true
		}
		for _, s := range serializers {
			if c.Type == s.typ && (c.SubType == s.sub || c.SubType == "*") {
				return true
			}
		}
	}
	return false
}

func producesList(t Target) string {
	if t == TargetWatch {
		return MediaJSON + ", " + MediaYAML + ", " + MediaProtobuf + ", " + MediaJSON + ";stream=watch, " + MediaProtobuf + ";stream=watch"
	}
	return MediaJSON + ", " + MediaYAML + ", " + MediaProtobuf
}

// acceptParams applies a clause's parameters as the apiserver's
// acceptMediaTypeOptions and RequestScope.AllowsMediaTypeTransform do.
func acceptParams(params map[string]string, media string, stream, builtin bool) (Media, bool) {
	m := Media{Format: frame.JSON}
	switch media {
	case MediaYAML:
		m.YAML = true
	case MediaProtobuf:
		m.Format = frame.Protobuf
	}
	var as, g, v string
	convert := false
	for k, val := range params {
		switch k {
		case "as":
			as, convert = val, true
		case "g":
			g, convert = val, true
		case "v":
			v, convert = val, true
		case "stream":
			if val != "" && (!stream || val != "watch") {
				return Media{}, false
			}
		case "sv":
			if val != "" {
				return Media{}, false // the apiserver allows no server version
			}
		}
	}
	if !convert {
		// No transformation: custom resources offer JSON and YAML only.
		return m, builtin || media != MediaProtobuf
	}
	if g != "meta.k8s.io" || (v != "v1" && v != "v1beta1") {
		return Media{}, false
	}
	switch as {
	case AsTable:
		if media == MediaProtobuf {
			return Media{}, false
		}
	case AsPartial, AsPartialList:
	default:
		return Media{}, false
	}
	m.As, m.AsVersion = as, v
	return m, true
}

// checkTarget refuses transformations that do not fit what the response
// carries, with the apiserver's messages (which name the apiserver's
// internal Go type). A watch transforms each event's object; one that
// cannot be transformed goes out as it is, as from the apiserver.
func checkTarget(m Media, t Target, gvk schema.GroupVersionKind) error {
	switch {
	case m.As == AsPartialList && t == TargetObject:
		return NewStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%s)", internalType(gvk, false)))
	case m.As == AsPartial && t == TargetList:
		return NewStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%s)", internalType(gvk, true)))
	}
	return nil
}

// internalType names the Go type the apiserver holds for gvk (or its
// list), as its messages print it: *core.ConfigMap, *apps.DeploymentList,
// *unstructured.Unstructured.
func internalType(gvk schema.GroupVersionKind, list bool) string {
	if !Known(gvk) {
		if list {
			return "*unstructured.UnstructuredList"
		}
		return "*unstructured.Unstructured"
	}
	pkg, _, _ := strings.Cut(gvk.Group, ".")
	switch gvk.Group {
	case "", "events.k8s.io":
		pkg = "core"
	case "rbac.authorization.k8s.io":
		pkg = "rbac"
	case "admissionregistration.k8s.io":
		pkg = "admissionregistration"
	}
	kind := gvk.Kind
	if list {
		kind += "List"
	}
	return "*" + pkg + "." + kind
}

func notAcceptable(t Target) error {
	list := MediaJSON + ", " + MediaYAML + ", " + MediaProtobuf
	if t == TargetWatch {
		list = MediaJSON + ";stream=watch, " + MediaProtobuf + ";stream=watch"
	}
	return NewStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		fmt.Sprintf("only the following media types are accepted: %s", list))
}

// ContentFormat reads a request body's Content-Type: JSON (also when
// empty), YAML, protobuf, CBOR (client-go with ClientsPreferCBOR writes
// in it, as the apiserver with CBORServingAndStorage reads it), or one of
// the patch types (returned as is, lower
// case, without parameters). The error is a 415 Status worded like the
// apiserver's.
func ContentFormat(contentType string) (mediaType string, err error) {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch mt {
	case "":
		return MediaJSON, nil
	case MediaJSON, MediaYAML, MediaProtobuf, MediaCBOR:
		return mt, nil
	}
	return "", NewStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: "+MediaJSON+", "+MediaYAML+", "+MediaProtobuf)
}
