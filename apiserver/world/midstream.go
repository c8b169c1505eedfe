package world

import (
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// MidstreamTarget is the request a watch whose request was not captured
// (a capture that began in the middle of its response) answered, as far as
// its events show it: GET of the collection of their objects' kind — in
// their namespace when every event names the same one, else across all
// namespaces — with watch=true and no other parameter. The resource is
// the kind's plural as the apiserver's REST mapper guesses it
// (ConfigMap → configmaps). ok is false when the events do not show it: an
// opaque body, no event with an object's kind, events of several kinds, or
// Tables and PartialObjectMetadata (a transformation names no resource).
// It reads every event of the exchange. The Store loads such a watch as
// one of this target; package replay matches clients with it.
func MidstreamTarget(f *formats.File, info *formats.ExchangeInfo) (target string, ok bool) {
	ef := info.Response.Events
	if ef == frame.Unknown || info.Response.Status != 0 && info.Response.Status != 200 {
		return "", false
	}
	var gvk schema.GroupVersionKind
	namespace, namespaces := "", 0
	sc := f.ExchangeRecords(info.Request.Exchange)
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			break // damage: what was read shows it, or nothing does
		}
		fr, isFrame := rec.(*formats.Frame)
		if !isFrame {
			continue
		}
		m, err := frame.Peek(ef, fr.Data)
		if err != nil || m.Kind == "" || m.Type == "BOOKMARK" || m.Type == "ERROR" {
			continue
		}
		g := schema.FromAPIVersionAndKind(m.APIVersion, m.Kind)
		switch {
		case gvk.Empty():
			gvk = g
		case g != gvk:
			return "", false
		}
		if namespaces == 0 || m.Namespace != namespace {
			namespace = m.Namespace
			namespaces++
		}
	}
	if gvk.Empty() || gvk.Kind == "Table" || strings.HasPrefix(gvk.Kind, "PartialObjectMetadata") || gvk.Kind == "Status" {
		return "", false
	}
	var b strings.Builder
	if gvk.Group == "" {
		b.WriteString("/api/" + gvk.Version)
	} else {
		b.WriteString("/apis/" + gvk.Group + "/" + gvk.Version)
	}
	if namespaces == 1 && namespace != "" {
		b.WriteString("/namespaces/" + namespace)
	}
	res, _ := meta.UnsafeGuessKindToResource(gvk)
	if gvk.Kind == "Endpoints" {
		res.Resource = "endpoints" // the guesser's plural is wrong
	}
	b.WriteString("/" + res.Resource + "?watch=true")
	return b.String(), true
}
