package conformance

import (
	"strings"
)

// subresource plans the cases of one subresource of the plan's resource,
// on its objects (the seed, or ones made for it).
func (p *plan) subresource(s Resource) {
	if _, ok := exceptionFor(s); ok {
		return
	}
	sp := &plan{r: s, f: p.f, ns: p.ns}
	switch s.Subresource {
	case "status":
		sp.status()
	case "scale":
		sp.scale()
	case "binding":
		sp.binding(p)
	case "eviction":
		sp.eviction(p)
	case "token":
		sp.token()
	case "approval":
		sp.approval()
	case "ephemeralcontainers":
		sp.ephemeral()
	case "resize":
		sp.resize()
	case "finalize":
		sp.finalize()
	default:
		sp.add("get", "seed", "GET", sp.obj(Seed), "", "", nil)
	}
	p.cases = append(p.cases, sp.cases...)
}

func (p *plan) status() {
	seed := p.name(Seed)
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("get", "absent", "GET", p.obj("wcf-absent"), "", "", nil)
	p.add("update", "PUT as it is", "PUT", p.obj(Seed), "", "$OBJ("+seed+")", nil)
	p.add("patch", "merge", "PATCH", p.obj(Seed), "", `{"metadata":{"labels":{"st":"1"}}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("patch", "apply", "PATCH", p.obj(Seed), "fieldManager=wcf-status",
		`{"apiVersion":"`+p.r.GroupVersion()+`","kind":"`+p.r.Kind+`","metadata":{"name":"`+seed+`"}}`, func(c *Case) { c.ContentType = applyCT })
	p.add("patch", "absent", "PATCH", p.obj("wcf-absent"), "", `{}`, func(c *Case) { c.ContentType = mergeCT })
}

func (p *plan) scale() {
	seed := p.name(Seed)
	scale := func(replicas, rv string) string {
		meta := `"name":"` + seed + `","namespace":"` + p.ns + `"`
		if rv != "" {
			meta += `,"resourceVersion":"` + rv + `"`
		}
		return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{` + meta + `},"spec":{"replicas":` + replicas + `}}`
	}
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("update", "PUT", "PUT", p.obj(Seed), "", scale("2", ""), nil)
	p.add("update", "stale resourceVersion", "PUT", p.obj(Seed), "", scale("2", "1"), nil)
	p.add("patch", "merge", "PATCH", p.obj(Seed), "", `{"spec":{"replicas":3}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("get", "absent", "GET", p.obj("wcf-absent"), "", "", nil)
}

// pod plans the creation of a Pod of the plan's namespace for a
// subresource of Pods, with labels (Label left out in a namespace of its
// own, which lists of every namespace select by it).
func (p *plan) pod(name string, labels map[string]string) {
	pods := Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
	f, _ := fixtureFor(pods)
	body := f.object(pods, p.ns, name, false, labels)
	if p.ns != namespaceOf(p.r, "wcf") {
		body = strings.Replace(body, `"`+Label+`":"1",`, "", 1)
		body = strings.Replace(body, `"`+Label+`":"1"`, "", 1)
	}
	p.add("", "a Pod", "POST", pods.Collection(p.ns), "", body, nil)
}

func (p *plan) binding(parent *plan) {
	p.pod("wcf-bind", nil)
	bind := func(pod, node string) string {
		return `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"` + pod + `"},"target":{"kind":"Node","name":"` + node + `"}}`
	}
	p.add("create", "bind", "POST", p.obj("wcf-bind"), "", bind("wcf-bind", "wcf-node"), nil)
	p.add("create", "bound Pod", "GET", parent.obj("wcf-bind"), "", "", nil)
	p.add("create", "again", "POST", p.obj("wcf-bind"), "", bind("wcf-bind", "wcf-other"), nil)
	p.add("create", "absent Pod", "POST", p.obj("wcf-absent"), "", bind("wcf-absent", "wcf-node"), nil)
	p.add("create", "name mismatch", "POST", p.obj("wcf-bind"), "", bind("wcf-other", "wcf-node"), nil)
	p.add("create", "no target", "POST", p.obj(Seed), "", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"`+Seed+`"}}`, nil)
}

// EvictionNamespace is where the evictions' Pods and budgets are: a
// namespace of its own, which the Pods' and the budgets' own cases do not
// list.
const EvictionNamespace = "wcf-evictions"

func (p *plan) eviction(parent *plan) {
	p.ns = EvictionNamespace
	parent = &plan{r: parent.r, f: parent.f, ns: EvictionNamespace}
	evict := func(pod string) string {
		return `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"` + pod + `","namespace":"` + p.ns + `"}}`
	}
	p.pod("wcf-evict", nil)
	p.add("create", "evict", "POST", p.obj("wcf-evict"), "", evict("wcf-evict"), nil)
	p.add("create", "evicted Pod", "GET", parent.obj("wcf-evict"), "", "", nil)
	p.add("create", "absent Pod", "POST", p.obj("wcf-absent"), "", evict("wcf-absent"), nil)
	p.add("create", "name mismatch", "POST", p.obj(Seed), "", evict("wcf-other"), nil)
	// A Running Pod: its PodDisruptionBudget decides. One no controller
	// has processed yet blocks it; one whose status allows a disruption
	// lets it go, and counts it.
	running := func(pod string, ready bool) {
		p.pod(pod, map[string]string{"wcf-pdb": pod})
		cond := ""
		if ready {
			cond = `,"conditions":[{"type":"Ready","status":"True"}]`
		}
		p.add("", "Running", "PATCH", parent.obj(pod)+"/status", "", `{"status":{"phase":"Running"`+cond+`}}`, func(c *Case) { c.ContentType = mergeCT })
	}
	pdb := func(name string) string {
		return `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"` + name +
			`"},"spec":{"minAvailable":1,"selector":{"matchLabels":{"wcf-pdb":"` + name + `"}}}}`
	}
	pdbs := "/apis/policy/v1/namespaces/" + p.ns + "/poddisruptionbudgets"
	running("wcf-budget", false)
	p.add("", "a PodDisruptionBudget", "POST", pdbs, "", pdb("wcf-budget"), nil)
	p.add("create", "blocked by a budget not processed", "POST", p.obj("wcf-budget"), "", evict("wcf-budget"), nil)
	running("wcf-allowed", true)
	p.add("", "a PodDisruptionBudget", "POST", pdbs, "", pdb("wcf-allowed"), nil)
	p.add("", "its status", "PATCH", pdbs+"/wcf-allowed/status", "",
		`{"status":{"observedGeneration":1,"disruptionsAllowed":1,"currentHealthy":2,"desiredHealthy":1,"expectedPods":2}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("create", "dryRun", "POST", p.obj("wcf-allowed"), "dryRun=All", evict("wcf-allowed"), nil)
	p.add("create", "allowed by its budget", "POST", p.obj("wcf-allowed"), "", evict("wcf-allowed"), nil)
	p.add("create", "the budget after", "GET", pdbs+"/wcf-allowed", "", "", nil)
	p.add("create", "the Pod after", "GET", parent.obj("wcf-allowed"), "", "", nil)
	running("wcf-denied", true)
	p.add("", "a PodDisruptionBudget", "POST", pdbs, "", pdb("wcf-denied"), nil)
	p.add("", "its status", "PATCH", pdbs+"/wcf-denied/status", "",
		`{"status":{"observedGeneration":1,"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}`, func(c *Case) { c.ContentType = mergeCT })
	p.add("create", "denied by its budget", "POST", p.obj("wcf-denied"), "", evict("wcf-denied"), nil)
}

func (p *plan) token() {
	tr := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["https://kubernetes.default.svc.cluster.local"],"expirationSeconds":3600}}`
	p.add("create", "token", "POST", p.obj(Seed), "", tr, nil)
	p.add("create", "default expiry", "POST", p.obj(Seed), "", `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`, nil)
	review := func(c *Case) { c.Row = "authentication.k8s.io/v1 tokenreviews" }
	p.add("create", "a token it issued", "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{},"spec":{"token":"$TOKEN"}}`, review)
	p.add("create", "a token it issued, for another audience", "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{},"spec":{"token":"$TOKEN","audiences":["wcf"]}}`, review)
	p.add("create", "absent account", "POST", p.obj("wcf-absent"), "", tr, nil)
	p.add("create", "bound to a Pod that is not there", "POST", p.obj(Seed), "",
		strings.Replace(tr, `"expirationSeconds":3600`, `"expirationSeconds":3600,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"wcf-absent"}`, 1), nil)
}

func (p *plan) approval() {
	approved := `{"status":{"conditions":[{"type":"Approved","status":"True","reason":"WcfApproved","message":"approved"}]}}`
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("patch", "approve", "PATCH", p.obj(Seed), "", approved, func(c *Case) { c.ContentType = mergeCT })
	p.add("update", "PUT as it is", "PUT", p.obj(Seed), "", "$OBJ("+p.name(Seed)+")", nil)
}

func (p *plan) ephemeral() {
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("patch", "add a debug container", "PATCH", p.obj(Seed), "",
		`{"spec":{"ephemeralContainers":[{"name":"debug","image":"busybox:1.36","targetContainerName":"c"}]}}`, func(c *Case) { c.ContentType = strategicCT })
	p.add("update", "PUT as it is", "PUT", p.obj(Seed), "", "$OBJ("+Seed+")", nil)
}

func (p *plan) resize() {
	p.add("get", "seed", "GET", p.obj(Seed), "", "", nil)
	p.add("patch", "requests", "PATCH", p.obj(Seed), "",
		`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m"}}}]}}`, func(c *Case) { c.ContentType = strategicCT })
	p.add("update", "PUT as it is", "PUT", p.obj(Seed), "", "$OBJ("+Seed+")", nil)
}

func (p *plan) finalize() {
	p.add("update", "finalizers emptied", "PUT", p.obj(Seed), "",
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+Seed+`"},"spec":{"finalizers":[]}}`, nil)
	p.add("update", "absent", "PUT", p.obj("wcf-absent"), "",
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"wcf-absent"},"spec":{"finalizers":[]}}`, nil)
}
