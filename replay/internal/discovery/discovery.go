package discovery

import (
	"encoding/json"

	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// maxDiscoveryBody bounds a LIST body read at start-up only to learn its
// kind for synthesized discovery.
const maxDiscoveryBody = 16 << 20

// resource is one API resource the session shows requests for.
type resource struct {
	group, version, name string
	namespaced           bool
	kind                 string
}

func (r resource) groupVersion() string {
	if r.group == "" {
		return r.version
	}
	return r.group + "/" + r.version
}

// parseResourcePath reads group, version and resource from an API path
// (internal/apipath, as the apiserver reads it); namespaced says that the
// path named a namespace, and for a built-in resource it is its real scope.
func parseResourcePath(path string) (resource, bool) {
	p, _ := apipath.StripWatchSegment(path)
	ar, ok := apipath.ParseResource(p)
	if !ok || ar.Version == "" {
		return resource{}, false
	}
	r := resource{group: ar.Group, version: ar.Version, name: ar.Resource, namespaced: ar.Namespace != ""}
	if info, ok := world.BuiltinInfo(world.Resource{Group: ar.Group, Version: ar.Version, Resource: ar.Resource}); ok {
		r.namespaced, r.kind = info.Namespaced, info.Kind
	}
	return r, true
}

// wellKnown gives kind and short names of common resources, for sessions
// that show a resource's path but not one of its objects.
var wellKnown = map[string]struct {
	kind  string
	short []string
}{
	"v1/configmaps":                      {"ConfigMap", []string{"cm"}},
	"v1/secrets":                         {"Secret", nil},
	"v1/services":                        {"Service", []string{"svc"}},
	"v1/pods":                            {"Pod", []string{"po"}},
	"v1/namespaces":                      {"Namespace", []string{"ns"}},
	"v1/nodes":                           {"Node", []string{"no"}},
	"v1/events":                          {"Event", []string{"ev"}},
	"v1/endpoints":                       {"Endpoints", []string{"ep"}},
	"v1/serviceaccounts":                 {"ServiceAccount", []string{"sa"}},
	"v1/persistentvolumeclaims":          {"PersistentVolumeClaim", []string{"pvc"}},
	"v1/persistentvolumes":               {"PersistentVolume", []string{"pv"}},
	"v1/podtemplates":                    {"PodTemplate", nil},
	"v1/replicationcontrollers":          {"ReplicationController", []string{"rc"}},
	"v1/resourcequotas":                  {"ResourceQuota", []string{"quota"}},
	"v1/limitranges":                     {"LimitRange", []string{"limits"}},
	"apps/v1/deployments":                {"Deployment", []string{"deploy"}},
	"apps/v1/replicasets":                {"ReplicaSet", []string{"rs"}},
	"apps/v1/statefulsets":               {"StatefulSet", []string{"sts"}},
	"apps/v1/daemonsets":                 {"DaemonSet", []string{"ds"}},
	"batch/v1/jobs":                      {"Job", nil},
	"batch/v1/cronjobs":                  {"CronJob", []string{"cj"}},
	"coordination.k8s.io/v1/leases":      {"Lease", nil},
	"events.k8s.io/v1/events":            {"Event", []string{"ev"}},
	"discovery.k8s.io/v1/endpointslices": {"EndpointSlice", nil},
}

// guessKind makes a kind from a plural resource name when nothing better
// is known: "widgets" → "Widget", "policies" → "Policy".
func guessKind(name string) string {
	s := name
	switch {
	case strings.HasSuffix(s, "ies"):
		s = strings.TrimSuffix(s, "ies") + "y"
	case strings.HasSuffix(s, "sses"):
		s = strings.TrimSuffix(s, "es")
	case strings.HasSuffix(s, "s"):
		s = strings.TrimSuffix(s, "s")
	}
	if s == "" {
		return name
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Docs holds the discovery documents, by path: legacy ones, and the
// aggregated /api and /apis of a replay with a world.
type Docs struct {
	byPath     map[string][]byte
	aggregated map[string][]byte
	store      *world.Store // the world whose CRDs and APIServices /apis adds (extensions.go), or nil
}

// readVerbs and allVerbs are the verbs discovery lists: a replay without a
// world serves reads only; with one, every verb a resource of the
// apiserver has (in the apiserver's order).
var (
	readVerbs = []string{"get", "list", "watch"}
	allVerbs  = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)

// New finds the resources of the recorded GET requests and their kinds
// (from a watch event or a LIST body of the session, else well-known
// names) and builds the discovery documents a replay serves. Without a
// world (store nil) they are the legacy documents of those resources, with
// the read verbs. With one they are kube-apiserver v1.33's (its legacy and
// aggregated discovery, world.ServedDocument), with the session's
// resources it does not serve (custom resources) added, every verb
// theirs. /version is v1.33's either way.
func New(f *formats.File, m *tape.Matcher, store *world.Store) *Docs {
	found, order := sessionResources(f, m)
	d := &Docs{byPath: map[string][]byte{}}
	if v, ok := world.ServedDocument("/version"); ok {
		d.byPath["/version"] = v
	}
	if store == nil {
		d.synthesize(found, order, readVerbs)
		return d
	}
	d.served(found, order)
	d.store = store
	return d
}

// gvr names a resource of the session: its group version and plural.
type gvr struct{ gv, name string }

// sessionResources returns the resources of the session's GET requests,
// in the order they first appear.
func sessionResources(f *formats.File, m *tape.Matcher) (map[gvr]*resource, []gvr) {
	found := map[gvr]*resource{}
	var order []gvr
	for _, x := range m.All {
		if x.Q.Method != http.MethodGet {
			continue
		}
		r, ok := parseResourcePath(x.Q.Path)
		if !ok {
			continue
		}
		k := gvr{r.groupVersion(), r.name}
		have := found[k]
		if have == nil {
			have = &r
			found[k] = have
			order = append(order, k)
		}
		if r.namespaced {
			have.namespaced = true
		}
		if have.kind == "" && x.Info.Response.Status == http.StatusOK && IsCollection(x.Q.Path) {
			have.kind = kindOf(f, x)
		}
	}
	return found, order
}

// synthesize builds the legacy documents of the resources found, in
// order, with verbs.
func (d *Docs) synthesize(found map[gvr]*resource, order []gvr, verbs []string) {
	groups := map[string][]string{} // group → versions
	var groupOrder []string
	lists := map[string][]apiResource{}
	for _, k := range order {
		r := found[k]
		wk := wellKnown[k.gv+"/"+k.name]
		if r.kind == "" {
			r.kind = wk.kind
		}
		if r.kind == "" {
			r.kind = guessKind(r.name)
		}
		lists[k.gv] = append(lists[k.gv], apiResource{
			Name: r.name, SingularName: strings.ToLower(r.kind), Namespaced: r.namespaced,
			Kind: r.kind, Verbs: verbs, ShortNames: wk.short,
		})
		if r.group != "" {
			if _, ok := groups[r.group]; !ok {
				groupOrder = append(groupOrder, r.group)
			}
			if !contains(groups[r.group], r.version) {
				groups[r.group] = append(groups[r.group], r.version)
			}
		}
	}
	put := func(path string, v any) {
		b, _ := json.Marshal(v)
		d.byPath[path] = b
	}
	put("/api", map[string]any{"kind": "APIVersions", "versions": []string{"v1"}, "serverAddressByClientCIDRs": nil})
	var gl []apiGroup
	for _, g := range groupOrder {
		ag := apiGroup{Name: g}
		for _, v := range groups[g] {
			ag.Versions = append(ag.Versions, groupVersion{GroupVersion: g + "/" + v, Version: v})
		}
		ag.PreferredVersion = ag.Versions[0]
		gl = append(gl, ag)
		put("/apis/"+g, map[string]any{"kind": "APIGroup", "apiVersion": "v1", "name": ag.Name,
			"versions": ag.Versions, "preferredVersion": ag.PreferredVersion})
	}
	if gl == nil {
		gl = []apiGroup{}
	}
	put("/apis", map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": gl})
	if _, ok := lists["v1"]; !ok {
		lists["v1"] = []apiResource{}
	}
	for gv, rs := range lists {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
		path := "/apis/" + gv
		if !strings.Contains(gv, "/") {
			path = "/api/" + gv
		}
		put(path, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs})
	}
}

type apiResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
}

type groupVersion struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Name             string         `json:"name"`
	Versions         []groupVersion `json:"versions"`
	PreferredVersion groupVersion   `json:"preferredVersion"`
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// IsCollection reports whether an API path names a collection (a LIST or
// WATCH target), not one object.
func IsCollection(path string) bool {
	p, _ := apipath.StripWatchSegment(path)
	r, ok := apipath.ParseResource(p)
	return ok && r.Name == ""
}

// kindOf reads the kind of the objects exchange x carries: from its first
// watch event, or from its LIST body.
func kindOf(f *formats.File, x *tape.Exchange) string {
	sc := f.ExchangeRecords(x.ID)
	var body []byte
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ""
		}
		switch r := rec.(type) {
		case *formats.Frame:
			m, err := frame.Peek(x.Format, r.Data)
			if err == nil && m.Kind != "" && m.Kind != "Status" {
				return m.Kind
			}
		case *formats.Body:
			if r.Dir != formats.ServerToClient || x.Format != frame.Unknown {
				continue
			}
			if len(body)+len(r.Data) > maxDiscoveryBody {
				return ""
			}
			body = append(body, r.Data...)
		}
	}
	if body == nil || x.Info.Response.Encoding != "" {
		return ""
	}
	l, err := frame.ListItems(x.ListFormat(), body)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(l.Kind, "List")
}

// Has reports whether path (a trailing slash aside) is a document d holds.
func (d *Docs) Has(path string) bool {
	_, ok := d.byPath[strings.TrimSuffix(path, "/")]
	return ok
}

// Serve answers a discovery request the session did not record: the
// aggregated document of /api or /apis when the client asks for it and d
// has one, else the legacy document. It reports false if path is not a
// document it has.
func (d *Docs) Serve(w http.ResponseWriter, r *http.Request) bool {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if d.serveAggregated(w, r, path) {
		return true
	}
	b, ok := d.byPath[path]
	if !ok {
		return false
	}
	if path == "/apis" {
		b = d.withLegacyExtensions(b)
	}
	if path == "/api" && d.aggregated != nil {
		// kube-apiserver's, naming the address it is reached at.
		b, _ = json.Marshal(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	}
	// Plain application/json: a client that asked for aggregated discovery
	// (apidiscovery.k8s.io/v2) falls back to these legacy documents.
	write(w, "application/json", b)
	return true
}

func write(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
