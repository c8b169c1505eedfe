package conformance

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Case is one request played against both servers.
type Case struct {
	Row  string // the resource it counts for (Resource.Row)
	Verb string // the verb it counts for; "" for a step that only prepares the next ones
	Name string // what it checks

	Method, Path, Query string
	ContentType, Accept string
	// Body is the request body. $RV(name), $UID(name) and $OBJ(name)
	// stand for the resourceVersion, uid and whole JSON of the object
	// name as each server last answered it; $MARK(m) for the
	// resourceVersion of the list marked m, $CONTINUE for the continue
	// token of the last list (in Query too).
	Body string
	// Mark names the resourceVersion of this list's answer for $MARK.
	Mark string
	// Watch reads the answer as a watch stream to its end (the request
	// has a timeoutSeconds).
	Watch bool
	// Parallel: a watch read at the same time as the other Parallel cases
	// next to it (they only read).
	Parallel bool
	// NotCompared, if set, says why the case's answers, logged as any
	// other's, do not count for its cell: what the apiserver answers
	// depends on what a session of LISTs cannot hold. The table lists it.
	NotCompared string
}

// Media types of the cases.
const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	mergeCT       = "application/merge-patch+json"
	jsonPatchCT   = "application/json-patch+json"
	strategicCT   = "application/strategic-merge-patch+json"
	applyCT       = "application/apply-patch+yaml"
	tableAccept   = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)

// watchTimeout is the timeoutSeconds of the harness's watches: long
// enough for the apiserver's bookmark 2 s before a watch's timeout
// (cacheWatcher.nextBookmarkTime), short enough for CI.
const watchTimeout = 4

// group is a resource and its subresources, played in order on one
// goroutine: the subresources use the resource's objects.
type group struct {
	base Resource
	subs []Resource
}

// groups gathers the resources of discovery by resource.
func groups(rs []Resource) []group {
	var out []group
	idx := map[string]int{}
	for _, r := range rs {
		k := r.GroupVersion() + " " + r.Name
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, group{})
		}
		if r.Subresource == "" {
			out[i].base = r
		} else {
			out[i].subs = append(out[i].subs, r)
		}
	}
	return out
}

// plan is the cases of one group, in the order they are played.
type plan struct {
	r     Resource
	f     fixture
	ns    string
	cases []Case
}

func (p *plan) add(verb, name, method, path, query, body string, set func(*Case)) {
	c := Case{Row: p.r.Row(), Verb: verb, Name: name, Method: method, Path: path, Query: query, Body: body}
	if body != "" && c.ContentType == "" {
		c.ContentType = mediaJSON
	}
	if set != nil {
		set(&c)
	}
	p.cases = append(p.cases, c)
}

// name is the name of the object base of the plan's resource.
func (p *plan) name(base string) string { return p.f.objectName(base) }

func (p *plan) coll() string { return p.r.Collection(p.ns) }

func (p *plan) obj(base string) string { return p.r.Object(p.ns, p.name(base)) }

// scope is the query that limits a list or watch of the plan's resource
// to the harness's objects: a cluster-scoped resource's collection holds
// what the apiserver makes itself.
func (p *plan) scope(q string) string {
	if p.r.Namespaced {
		return q
	}
	sel := "labelSelector=" + url.QueryEscape(Label+"=1")
	if q == "" {
		return sel
	}
	if strings.Contains(q, "labelSelector=") {
		return q
	}
	return sel + "&" + q
}

// body is the JSON of the plan's object base (generate: a generateName),
// with extra labels and, if rv is not "", that resourceVersion.
func (p *plan) body(base string, generate bool, labels map[string]string, rv string) string {
	b := p.f.object(p.r, p.ns, p.name(base), generate, labels)
	if rv != "" {
		b = strings.Replace(b, `"metadata":{`, `"metadata":{"resourceVersion":"`+rv+`",`, 1)
	}
	return b
}

// Seed is the object of each resource both servers hold from the start.
const Seed = "wcf-seed"

// Plan returns the cases of every resource of discovery in namespace ns,
// by group (each group's cases are played in order, groups at the same
// time), and the rows of the exceptions with their reasons.
func Plan(rs []Resource, ns string) (plans [][]Case, exceptions map[string]string) {
	exceptions = map[string]string{}
	at := map[string]int{} // a group's row → its plan
	for _, g := range groups(rs) {
		p := &plan{r: g.base, ns: namespaceOf(g.base, ns)}
		if why, ok := exceptionFor(g.base); ok {
			exceptions[g.base.Row()] = why
		} else if createOnly(g.base) {
			p.f, _ = fixtureFor(g.base)
			p.createOnly()
		} else if f, ok := fixtureFor(g.base); ok {
			p.f = f
			p.resource(g.subs)
		}
		for _, s := range g.subs {
			if why, ok := exceptionFor(s); ok {
				exceptions[s.Row()] = why
			}
		}
		if len(p.cases) == 0 {
			continue
		}
		key := g.base.Row()
		if k, ok := sharedStorage[key]; ok {
			key = k
		}
		if i, ok := at[key]; ok {
			plans[i] = append(plans[i], p.cases...)
			continue
		}
		at[key] = len(plans)
		plans = append(plans, p.cases)
	}
	return plans, exceptions
}

// exceptionFor says why a resource's verbs are not compared, if they are
// not.
func exceptionFor(r Resource) (string, bool) {
	switch r.Subresource {
	case "exec", "attach", "portforward", "log":
		return "needs a kubelet: the apiserver streams it from the Pod's node", true
	case "proxy":
		return "needs the object's backend (a kubelet, a Service's endpoints): the apiserver proxies to it", true
	}
	if r.Name == "componentstatuses" {
		return "probes the control plane's components (deprecated since v1.19): a replay has none to probe", true
	}
	return "", false
}

// createOnly reports whether r is a create-only resource: the reviews,
// the legacy bindings.
func createOnly(r Resource) bool {
	return len(r.Verbs) == 1 && r.Verbs[0] == "create"
}

// resource plans the cases of a resource with the whole set of verbs and
// of its subresources.
func (p *plan) resource(subs []Resource) {
	r := p.r
	p.add("list", "all", "GET", p.coll(), p.scope(""), "", func(c *Case) { c.Mark = "start" })
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("get", "absent", "GET", p.obj("wcf-absent"), "", "", nil)
	p.creates()
	p.lists()
	if r.Has("update") {
		p.updates()
	}
	if r.Has("patch") {
		p.patches()
	}
	for _, s := range subs {
		p.subresource(s)
	}
	p.watches()
	if r.Has("delete") {
		p.deletes()
	}
	if r.Has("deletecollection") {
		p.add("deletecollection", "labelSelector", "DELETE", p.coll(), "labelSelector=wcf-dc%3D1", "", nil)
		if r.Group != "apiextensions.k8s.io" {
			// (A CustomResourceDefinition is deleted once the apiserver's
			// finalizer has cleaned its resources up, some time later.)
			p.add("deletecollection", "list after", "GET", p.coll(), p.scope(""), "", nil)
		}
	}
}

func (p *plan) creates() {
	coll := p.coll()
	p.add("create", "named", "POST", coll, "", p.body("wcf-a", false, map[string]string{"wcf-l": "a"}, ""), nil)
	p.add("create", "again", "POST", coll, "", p.body("wcf-a", false, nil, ""), nil)
	p.add("create", "generateName", "POST", coll, "", p.body("wcf-g-", true, nil, ""), nil)
	p.add("create", "dryRun", "POST", coll, "dryRun=All", p.body("wcf-dry", false, nil, ""), nil)
	p.add("create", "get after dryRun", "GET", p.obj("wcf-dry"), "", "", nil)
	unknown := strings.Replace(p.body("wcf-warn", false, nil, ""), `{"apiVersion"`, `{"wcfUnknown":1,"apiVersion"`, 1)
	p.add("create", "fieldValidation=Strict", "POST", coll, "fieldValidation=Strict", unknown, nil)
	p.add("create", "unknown field warns", "POST", coll, "", unknown, nil)
	p.add("create", "YAML", "POST", coll, "", p.body("wcf-yaml", false, nil, ""), func(c *Case) { c.ContentType = mediaYAML })
	if p.r.Namespaced {
		other := strings.Replace(p.body("wcf-ns", false, nil, ""), `"metadata":{`, `"metadata":{"namespace":"wcf-elsewhere",`, 1)
		p.add("create", "namespace mismatch", "POST", coll, "", other, nil)
	}
	if p.r.Name == "services" && p.r.Group == "" {
		p.serviceTypes()
	}
	for _, n := range []string{"wcf-dc1", "wcf-dc2"} {
		p.add("", "for deletecollection", "POST", coll, "", p.body(n, false, map[string]string{"wcf-dc": "1"}, ""), nil)
	}
}

func (p *plan) lists() {
	coll := p.coll()
	p.add("list", "labelSelector", "GET", coll, "labelSelector=wcf-l%3Da", "", nil)
	p.add("list", "labelSelector, none", "GET", coll, "labelSelector=wcf-l%3Dzzz", "", nil)
	p.add("list", "set-based labelSelector", "GET", coll, p.scope("labelSelector=wcf-dc+in+(1,2),wcf-l!%3Da"), "", nil)
	p.add("list", "fieldSelector metadata.name", "GET", coll, "fieldSelector=metadata.name%3D"+url.QueryEscape(p.name("wcf-a")), "", nil)
	p.add("list", "fieldSelector unknown", "GET", coll, "fieldSelector=spec.wcf%3D1", "", nil)
	p.add("list", "limit", "GET", coll, p.scope("limit=2"), "", nil)
	p.add("list", "continue", "GET", coll, p.scope("limit=2&continue=$CONTINUE"), "", nil)
	p.add("list", "resourceVersion=0", "GET", coll, p.scope("resourceVersion=0"), "", nil)
	p.add("list", "NotOlderThan", "GET", coll, p.scope("resourceVersion=$MARK(start)&resourceVersionMatch=NotOlderThan"), "", nil)
	p.add("list", "Exact", "GET", coll, p.scope("resourceVersion=$MARK(start)&resourceVersionMatch=Exact"), "", nil)
	p.add("list", "Table", "GET", coll, p.scope(""), "", func(c *Case) { c.Accept = tableAccept })
	if p.r.Group != "apiextensions.k8s.io" || p.r.Name != "customresourcedefinitions" {
		p.add("list", "protobuf", "GET", coll, p.scope(""), "", func(c *Case) { c.Accept = mediaProtobuf })
	}
	if p.r.Namespaced {
		p.add("list", "all namespaces", "GET", p.r.Collection(""), "labelSelector="+url.QueryEscape(Label+"=1"), "", nil)
	}
}

func (p *plan) updates() {
	a := p.name("wcf-a")
	p.add("update", "PUT", "PUT", p.obj("wcf-a"), "", p.body("wcf-a", false, map[string]string{"wcf-l": "a", "u": "1"}, "$RV("+a+")"), nil)
	p.add("update", "stale resourceVersion", "PUT", p.obj("wcf-a"), "", p.body("wcf-a", false, map[string]string{"u": "2"}, "1"), nil)
	p.add("update", "no resourceVersion", "PUT", p.obj("wcf-a"), "", p.body("wcf-a", false, map[string]string{"wcf-l": "a", "u": "3"}, ""), nil)
	p.add("update", "name mismatch", "PUT", p.obj("wcf-a"), "", p.body("wcf-b", false, nil, ""), nil)
	p.add("update", "absent", "PUT", p.obj("wcf-put"), "", p.body("wcf-put", false, nil, ""), nil)
}

func (p *plan) patches() {
	a := p.obj("wcf-a")
	p.add("patch", "merge", "PATCH", a, "", `{"metadata":{"labels":{"m":"1"}}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("patch", "JSON patch", "PATCH", a, "", `[{"op":"add","path":"/metadata/labels/j","value":"1"}]`, func(c *Case) { c.ContentType = jsonPatchCT })
	p.add("patch", "JSON patch test fails", "PATCH", a, "", `[{"op":"test","path":"/metadata/labels/j","value":"2"}]`, func(c *Case) { c.ContentType = jsonPatchCT })
	p.add("patch", "strategic merge", "PATCH", a, "", `{"metadata":{"labels":{"s":"1"}}}`, func(c *Case) { c.ContentType = strategicCT })
	p.add("patch", "apply", "PATCH", a, "fieldManager=wcf", p.body("wcf-a", false, map[string]string{"ap": "1"}, ""), func(c *Case) { c.ContentType = applyCT })
	p.add("patch", "apply conflict", "PATCH", a, "fieldManager=wcf-other", p.body("wcf-a", false, map[string]string{"ap": "2"}, ""), func(c *Case) { c.ContentType = applyCT })
	p.add("patch", "apply creates", "PATCH", p.obj("wcf-ap"), "fieldManager=wcf", p.body("wcf-ap", false, nil, ""), func(c *Case) { c.ContentType = applyCT })
	p.add("patch", "absent", "PATCH", p.obj("wcf-absent"), "", `{"metadata":{"labels":{"m":"1"}}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("patch", "bad JSON", "PATCH", a, "", `{bad`, func(c *Case) { c.ContentType = mergeCT })
}

func (p *plan) watches() {
	coll := p.coll()
	q := func(s string) string { return p.scope(s + "&watch=true&timeoutSeconds=" + fmt.Sprint(watchTimeout)) }
	w := func(c *Case) { c.Watch, c.Parallel = true, true }
	p.add("watch", "from a resourceVersion", "GET", coll, q("resourceVersion=$MARK(start)"), "", w)
	p.add("watch", "labelSelector", "GET", coll, q("resourceVersion=$MARK(start)&labelSelector=wcf-l%3Da"), "", w)
	p.add("watch", "bookmarks", "GET", coll, q("resourceVersion=$MARK(start)&allowWatchBookmarks=true"), "", w)
	p.add("watch", "streaming list", "GET", coll, q("sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"), "", w)
	p.add("watch", "expired resourceVersion", "GET", coll, q("resourceVersion=1"), "", func(c *Case) {
		w(c)
		if p.r.Group == "apiextensions.k8s.io" && p.r.Name == "customresourcedefinitions" {
			c.NotCompared = "kube-apiserver serves CustomResourceDefinition watches from etcd, so from resourceVersion 1 " +
				"it sends every version since, the seed's before the session too (its naming and establishing " +
				"controllers' status writes), which the session's LISTs do not hold; the replay sends the versions " +
				"the session shows and every later one (world.TestWatchBeforeSession)"
		}
	})
	p.add("watch", "from 0", "GET", coll, q("resourceVersion=0"), "", w)
}

func (p *plan) deletes() {
	a := p.obj("wcf-a")
	p.add("delete", "dryRun", "DELETE", a, "dryRun=All", "", nil)
	p.add("delete", "get after dryRun", "GET", a, "", "", nil)
	p.add("delete", "precondition uid", "DELETE", a, "", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`, nil)
	p.add("delete", "precondition resourceVersion", "DELETE", a, "", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`, nil)
	p.add("delete", "Foreground", "DELETE", a, "propagationPolicy=Foreground", "", nil)
	if p.r.Group != "apiextensions.k8s.io" {
		// (A CustomResourceDefinition's own finalizer is removed by the
		// apiserver's controller, some time later.)
		p.add("delete", "again while finalizers remain", "DELETE", a, "", "", nil)
		p.add("delete", "finalizers removed", "PATCH", a, "", `{"metadata":{"finalizers":null}}`, func(c *Case) { c.ContentType = mergeCT })
		p.add("delete", "get after", "GET", a, "", "", nil)
	}
	p.add("delete", "Orphan", "DELETE", p.obj("wcf-yaml"), "propagationPolicy=Orphan", "", nil)
	p.add("delete", "bad propagationPolicy", "DELETE", p.obj(Seed), "propagationPolicy=Sideways", "", nil)
	p.add("delete", "gracePeriodSeconds=0", "DELETE", p.obj("wcf-ap"), "gracePeriodSeconds=0", "", nil)
	p.add("delete", "seed", "DELETE", p.obj(Seed), "", "", nil)
	p.add("delete", "absent", "DELETE", p.obj("wcf-absent"), "", "", nil)
}

// createOnly plans the cases of a create-only resource: the reviews
// (answered, never stored), the legacy bindings.
func (p *plan) createOnly() {
	coll := p.coll()
	if p.r.Name == "bindings" {
		pods := Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
		pf, _ := fixtureFor(pods)
		pod := pf.object(pods, p.ns, "wcf-lbind", false, nil)
		p.add("", "a Pod to bind", "POST", pods.Collection(p.ns), "", pod, nil)
		bind := `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"wcf-lbind"},"target":{"name":"wcf-node"}}`
		p.add("create", "binding", "POST", coll, "", bind, nil)
		p.add("create", "bound Pod", "GET", pods.Object(p.ns, "wcf-lbind"), "", "", nil)
		p.add("create", "again", "POST", coll, "", bind, nil)
		p.add("create", "absent Pod", "POST", coll, "", strings.Replace(bind, "wcf-lbind", "wcf-absent", 1), nil)
		p.add("create", "list", "GET", coll, "", "", nil)
		return
	}
	if p.f.fields == nil {
		return
	}
	// A review's metadata must be empty (its validation), as kubectl sends it.
	body := func() string {
		b := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{}`, p.r.GroupVersion(), p.r.Kind)
		if fields := p.f.fields(p.ns, ""); fields != "" {
			b += "," + fields
		}
		return b + "}"
	}
	p.add("create", "review", "POST", coll, "", body(), nil)
	p.accessReviews()
	p.add("create", "dryRun", "POST", coll, "dryRun=All", body(), nil)
	p.add("create", "protobuf", "POST", coll, "", body(), func(c *Case) { c.Accept = mediaProtobuf })
	p.add("create", "get", "GET", coll+"/wcf", "", "", nil)
	p.add("create", "with a name", "POST", coll, "", p.f.object(p.r, p.ns, "wcf-named", false, nil), nil)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ReviewNamespace is where the access reviews' RoleBinding is: a
// namespace of its own, which no other resource's cases list.
const ReviewNamespace = "wcf-reviews"

// accessReviews plans the access reviews RBAC answers: a subject a
// RoleBinding allows (the reason names it), one nothing allows, a
// non-resource URL the bootstrap policy opens to every authenticated
// user.
func (p *plan) accessReviews() {
	var spec string
	switch p.r.Name {
	case "subjectaccessreviews":
		spec = `"spec":{"user":"wcf-reviewer","resourceAttributes":{"namespace":"` + ReviewNamespace + `","verb":"get","resource":"pods"}}`
	case "localsubjectaccessreviews":
		spec = `"spec":{"user":"wcf-reviewer","resourceAttributes":{"namespace":"` + p.ns + `","verb":"get","resource":"pods"}}`
	default:
		return
	}
	if p.r.Name == "subjectaccessreviews" {
		rb := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"wcf-reviewer"},` +
			`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"wcf-reviewer","apiGroup":"rbac.authorization.k8s.io"}]}`
		p.add("", "a RoleBinding", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ReviewNamespace+"/rolebindings", "", rb, nil)
		p.add("create", "allowed by a RoleBinding", "POST", p.coll(), "", p.review(spec), nil)
		p.add("create", "a non-resource URL", "POST", p.coll(), "", p.review(
			`"spec":{"user":"wcf-nobody","groups":["system:authenticated"],"nonResourceAttributes":{"path":"/apis","verb":"get"}}`), nil)
		p.add("create", "no attributes", "POST", p.coll(), "", p.review(`"spec":{"user":"wcf-nobody"}`), nil)
		p.add("create", "no subject", "POST", p.coll(), "", p.review(`"spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}`), nil)
		return
	}
	p.add("create", "nothing allows", "POST", p.coll(), "", p.review(spec), nil)
}

// review is the JSON of a review of the plan's resource with spec.
func (p *plan) review(spec string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{},%s}`, p.r.GroupVersion(), p.r.Kind, spec)
}

// serviceTypes plans the creation of each type of Service: what the
// registry allocates differs (cluster IPs, node ports, IP families).
func (p *plan) serviceTypes() {
	for _, tc := range []struct{ name, spec string }{
		{"NodePort", `"spec":{"type":"NodePort","ports":[{"name":"a","port":80},{"name":"b","port":81,"protocol":"UDP"}]}`},
		{"two ports without names", `"spec":{"ports":[{"port":80},{"port":81}]}`},
		{"LoadBalancer, local traffic", `"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","ports":[{"port":80}]}`},
		{"headless", `"spec":{"clusterIP":"None","selector":{"app":"wcf"},"ports":[{"port":80}]}`},
		{"headless without a selector", `"spec":{"clusterIP":"None","ports":[{"port":80}]}`},
		{"ExternalName", `"spec":{"type":"ExternalName","externalName":"example.com"}`},
		{"ClientIP affinity", `"spec":{"sessionAffinity":"ClientIP","ports":[{"port":80,"targetPort":"http"}]}`},
		{"a cluster IP out of range", `"spec":{"clusterIP":"192.0.2.1","ports":[{"port":80}]}`},
	} {
		name := "wcf-" + strings.ToLower(strings.NewReplacer(" ", "-", ",", "").Replace(tc.name))
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},%s}`, name, tc.spec)
		p.add("create", tc.name, "POST", p.coll(), "", body, nil)
	}
}
