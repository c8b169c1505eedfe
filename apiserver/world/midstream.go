package world

import (
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
	if info.Response == nil {
		return "", false
	}
	target, ok = midstreamTargets(f, []*formats.ExchangeInfo{info})[info.Request.Exchange]
	return target, ok
}

// MidstreamTargets returns MidstreamTarget of every exchange of f whose
// request was not captured and whose events show one, by exchange, reading
// the blocks that hold them once.
func MidstreamTargets(f *formats.File) map[int64]string {
	var xs []*formats.ExchangeInfo
	idx := f.Index()
	for i := range idx.Exchanges {
		if x := &idx.Exchanges[i]; x.Request.Missing && x.Response != nil {
			xs = append(xs, x)
		}
	}
	return midstreamTargets(f, xs)
}

func midstreamTargets(f *formats.File, xs []*formats.ExchangeInfo) map[int64]string {
	guesses := map[int64]*midstreamGuess{}
	var ids []int64
	for _, x := range xs {
		ef := x.Response.Events
		if ef == frame.Unknown || x.Response.Status != 0 && x.Response.Status != 200 {
			continue
		}
		guesses[x.Request.Exchange] = &midstreamGuess{format: ef}
		ids = append(ids, x.Request.Exchange)
	}
	out := map[int64]string{}
	if len(ids) == 0 {
		return out
	}
	sc := f.ExchangeRecords(ids...).WithCache(nil) // one pass: nothing to keep
	for {
		rec, err := sc.NextIntact(nil) // past damage: what was read shows it, or nothing does
		if err != nil {
			break
		}
		if fr, ok := rec.(*formats.Frame); ok {
			if g := guesses[fr.Exchange]; g != nil {
				g.add(fr.Data)
			}
		}
	}
	for id, g := range guesses {
		if t, ok := g.target(); ok {
			out[id] = t
		}
	}
	return out
}

// midstreamGuess is what the events of one watch read so far show of
// the request it answered.
type midstreamGuess struct {
	format     frame.Format
	gvk        schema.GroupVersionKind
	namespace  string
	namespaces int
	mixed      bool // events of several kinds
}

func (g *midstreamGuess) add(data []byte) {
	if g.mixed {
		return
	}
	m, _, err := frame.PeekEvent(g.format, data)
	if err != nil || m.Kind == "" || m.Type == "BOOKMARK" || m.Type == "ERROR" {
		return
	}
	k := schema.FromAPIVersionAndKind(m.APIVersion, m.Kind)
	switch {
	case g.gvk.Empty():
		g.gvk = k
	case k != g.gvk:
		g.mixed = true
		return
	}
	if g.namespaces == 0 || m.Namespace != g.namespace {
		g.namespace = m.Namespace
		g.namespaces++
	}
}

func (g *midstreamGuess) target() (string, bool) {
	gvk := g.gvk
	if g.mixed || gvk.Empty() || gvk.Kind == "Table" || strings.HasPrefix(gvk.Kind, "PartialObjectMetadata") || gvk.Kind == "Status" {
		return "", false
	}
	var b strings.Builder
	if gvk.Group == "" {
		b.WriteString("/api/" + gvk.Version)
	} else {
		b.WriteString("/apis/" + gvk.Group + "/" + gvk.Version)
	}
	if g.namespaces == 1 && g.namespace != "" {
		b.WriteString("/namespaces/" + g.namespace)
	}
	res, _ := meta.UnsafeGuessKindToResource(gvk)
	if gvk.Kind == "Endpoints" {
		res.Resource = "endpoints" // the guesser's plural is wrong
	}
	b.WriteString("/" + res.Resource + "?watch=true")
	return b.String(), true
}
