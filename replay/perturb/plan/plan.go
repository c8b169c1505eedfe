package plan

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/perturb"
)

// DefaultMax bounds a plan when Options.Max is 0: 40 runs of a few
// seconds to a minute each (a kcm recording's replay settles in 10–20 s),
// a plan that runs within a coffee break and still gives each kind four
// points.
const DefaultMax = 40

// throttleSeeds is how many seeds of each throttle variant are
// candidates: throttle chooses its requests by seed, so each seed is
// another run; more than a handful only repeat what a few show.
const throttleSeeds = 4

// Options says whose points New plans, and how many. The zero value
// plans DefaultMax points of the client that wrote most, of every kind.
type Options struct {
	// Client is a regular expression (RE2, unanchored) on the User-Agent
	// of the client under test; "" picks the client that wrote most.
	Client string
	// Max bounds the number of specs: 0 is DefaultMax, a negative value
	// no bound.
	Max int
	// Kinds keeps only the specs of these kinds (nil: every kind).
	Kinds []perturb.Kind
}

// ErrNoWrites is returned by New when the client under test wrote
// nothing: there is no point to perturb a controller at, nor anything to
// judge its run by.
var ErrNoWrites = errors.New("plan: the client under test wrote nothing")

// Plan is what New found in a session and the specs it planned.
type Plan struct {
	// Client is the selector of the client under test (wtrace replay
	// --client, world.ParseClient): user-agent=REGEXP. UserAgent is the
	// User-Agent of its first request.
	Client    string
	UserAgent string
	// Writes, Watches and Lists count the client's requests of each
	// kind; Events the watch events it was sent (bookmarks left out).
	Writes, Watches, Lists, Events int
	// Candidates is the number of distinct specs before the bound.
	Candidates int
	// Specs are the planned perturbations, one run each, in a stable
	// order (see the package doc). The slice belongs to the Plan.
	Specs []perturb.Spec
}

// Strings returns the specs' texts (what perturb.Parse reads back).
func (p *Plan) Strings() []string {
	out := make([]string, len(p.Specs))
	for i, sp := range p.Specs {
		out[i] = sp.String()
	}
	return out
}

// request is one of the session's requests, read once.
type request struct {
	q    apipath.Request
	ua   string
	time int64
	// events is the number of watch events (not bookmarks) it was sent.
	events int
}

// candidate is a spec, where in the recording it applies, from 0 (the
// start) to 1 (the end), and the group of its kind it belongs to (a
// resource's watch points, a variant of throttle or error), among which
// the kind's share is shared out in turn.
type candidate struct {
	spec  perturb.Spec
	pos   float64
	group string
}

// New reads the index of session f and plans the points worth
// perturbing of its client under test (see the package doc). f stays
// the caller's; New reads no body.
func New(f *formats.File, opts Options) (*Plan, error) {
	reqs := requests(f.Index())
	var match *regexp.Regexp
	p := &Plan{}
	if opts.Client != "" {
		re, err := regexp.Compile(opts.Client)
		if err != nil {
			return nil, fmt.Errorf("plan: client %q: %w", opts.Client, err)
		}
		match = re
		p.Client = "user-agent=" + opts.Client
	} else {
		product, ok := mostWrites(reqs)
		if !ok {
			return nil, ErrNoWrites
		}
		match = regexp.MustCompile("^" + regexp.QuoteMeta(product) + "(/|$)")
		p.Client = "user-agent=" + match.String()
	}
	var mine []request
	for _, r := range reqs {
		if match.MatchString(r.ua) {
			mine = append(mine, r)
		}
	}
	if len(mine) > 0 {
		p.UserAgent = mine[0].ua
	}
	cands := candidates(mine, p)
	if p.Writes == 0 {
		return nil, ErrNoWrites
	}
	if len(opts.Kinds) > 0 {
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return !slices.Contains(opts.Kinds, c.spec.Kind) })
	}
	cands = dedupe(cands)
	p.Candidates = len(cands)
	max := opts.Max
	if max == 0 {
		max = DefaultMax
	}
	p.Specs = choose(cands, max)
	return p, nil
}

// requests reads the session's requests, in the order they began.
func requests(idx *formats.Index) []request {
	var out []request
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		if x.Request.Missing {
			continue
		}
		q, err := apipath.Parse(x.Request.Method, x.Request.Target)
		if err != nil || !q.IsResource {
			continue
		}
		r := request{q: q, ua: header(x.Request.Header, "User-Agent"), time: x.Request.Time}
		if q.Watch {
			r.events = int(x.Frames - x.FrameTypes["BOOKMARK"] - x.FrameTypes["ERROR"])
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].time < out[j].time })
	return out
}

func header(hs []formats.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// product is a User-Agent's first token: client-go's program name
// ("kube-controller-manager/v1.33.13 (linux/amd64) …/deployment-controller").
func product(ua string) string {
	p, _, _ := strings.Cut(ua, " ")
	p, _, _ = strings.Cut(p, "/")
	return p
}

// mostWrites is the product of the User-Agents that wrote most (ties:
// the first in name order).
func mostWrites(reqs []request) (string, bool) {
	n := map[string]int{}
	for _, r := range reqs {
		if isWrite(r.q) {
			n[product(r.ua)]++
		}
	}
	best, most := "", 0
	for p, c := range n {
		if c > most || c == most && p < best {
			best, most = p, c
		}
	}
	return best, most > 0
}

// isWrite reports whether a replay counts the request among the writes
// of the clients under test (perturb.Request.IsWrite).
func isWrite(q apipath.Request) bool {
	switch q.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// resourceName is the resource as a spec names it: its plural, with its
// group unless it is the core group's ("pods", "deployments.apps").
func resourceName(r apipath.Resource) string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// isEvent reports whether r is an Event's resource (core or
// events.k8s.io).
func isEvent(r apipath.Resource) bool {
	return r.Resource == "events" && (r.Group == "" || r.Group == "events.k8s.io")
}

// object is a spec's object: R/NS/NAME, R/NAME when cluster-scoped.
func object(r apipath.Resource) string {
	if r.Namespace == "" {
		return resourceName(r) + "/" + r.Name
	}
	return resourceName(r) + "/" + r.Namespace + "/" + r.Name
}

// candidates lists every spec worth a run for the client's requests,
// counting them into p.
func candidates(mine []request, p *Plan) []candidate {
	var out []candidate
	addTo := func(group, text string, pos float64) {
		sp, err := perturb.Parse(text)
		if err != nil {
			panic("plan: a planned spec does not parse: " + err.Error()) // a bug of this package
		}
		out = append(out, candidate{sp, pos, group})
	}
	add := func(text string, pos float64) { addTo("", text, pos) }
	if len(mine) == 0 {
		return nil
	}
	t0, t1 := mine[0].time, mine[len(mine)-1].time
	at := func(t int64) float64 {
		if t1 == t0 {
			return 0
		}
		return float64(t-t0) / float64(t1-t0)
	}
	objWrites := map[string]int{}
	events := map[string]int{} // per resource
	var watched []string       // in order of their first watch
	listed := map[string]int{} // LISTs from the watch cache per resource
	updated := map[string]bool{}
	created := map[string]bool{} // R/NS the client created objects in
	for _, r := range mine {
		q := r.q
		res := resourceName(q.Resource)
		switch {
		case isWrite(q):
			p.Writes++
			n := p.Writes
			pos := at(r.time)
			add(fmt.Sprintf("restart:at=write:%d", n), pos)
			addTo("before", fmt.Sprintf("error:at=write:%d", n), pos)
			addTo("after", fmt.Sprintf("error:at=write:%d,when=after", n), pos)
			if q.Verb == "update" && !isEvent(q.Resource) && !updated[res] {
				updated[res] = true
				add("conflict:resource="+res, pos)
			}
			coll := resourceName(q.Resource) + "/" + q.Namespace
			switch {
			case isEvent(q.Resource):
			case q.Name == "":
				created[coll] = true
				add(fmt.Sprintf("client-restart:at=write:%d", n), pos)
			case created[coll] && objWrites[object(q.Resource)] == 0:
				// Perhaps an object it created, whose name was
				// generated: another in the run.
				add(fmt.Sprintf("client-restart:at=write:%d", n), pos)
			default:
				obj := object(q.Resource)
				objWrites[obj]++
				if k := objWrites[obj]; k == 1 {
					add("client-restart:after=write:"+obj, pos)
				} else {
					add(fmt.Sprintf("client-restart:at=write:%d:%s", k, obj), pos)
				}
			}
		case q.Watch:
			p.Watches++
			p.Events += r.events
			if _, ok := events[res]; !ok {
				watched = append(watched, res)
			}
			events[res] += r.events
		case q.Verb == "list" && q.Continue == "" && (q.ResourceVersion == "0" || q.ResourceVersion == ""):
			p.Lists++
			listed[res]++
			if listed[res] == 1 {
				add("stale:resource="+res, at(r.time))
			} else if p.Writes > 0 {
				add(fmt.Sprintf("stale:resource=%s,at=write:%d", res, p.Writes), at(r.time))
			}
		case q.Verb == "list":
			p.Lists++
		}
	}
	for _, res := range watched {
		n := events[res]
		for k := 1; k <= n; k++ {
			pos := float64(k) / float64(n+1)
			for _, kind := range []string{"watch-close", "gone", "skip"} {
				addTo(res, fmt.Sprintf("%s:resource=%s,at=event:%d:%s", kind, res, k, res), pos)
			}
		}
	}
	if len(listed) > 1 {
		add("stale:changes=3,count="+strconv.Itoa(len(listed)), 0)
	}
	runWide(addTo)
	return out
}

// runWide adds the candidates of the run as a whole: throttles by seed,
// on every request and on writes; delays of answers and of events.
func runWide(addTo func(group, text string, pos float64)) {
	for seed := 1; seed <= throttleSeeds; seed++ {
		pos := float64(seed) / float64(throttleSeeds+1)
		addTo("all", fmt.Sprintf("throttle:share=0.2,seed=%d", seed), pos)
		addTo("writes", fmt.Sprintf("throttle:share=0.3,seed=%d,on=writes", seed), pos)
	}
	addTo("", "delay", 0)
	addTo("", "delay:for=100ms,on=events", 0.5)
}

// dedupe keeps the first candidate of each spec text.
func dedupe(cands []candidate) []candidate {
	seen := map[string]bool{}
	out := cands[:0]
	for _, c := range cands {
		s := c.spec.String()
		if !seen[s] {
			seen[s] = true
			out = append(out, c)
		}
	}
	return out
}

// choose keeps max of cands (all when max < 0): the bound shared out
// among the kinds in turn, each kind's share among its groups in turn,
// each group's share spread evenly over its candidates in recording
// order; the result ordered by kind, then position (then as planned).
func choose(cands []candidate, max int) []perturb.Spec {
	byKind := map[perturb.Kind][]candidate{}
	for _, c := range cands {
		byKind[c.spec.Kind] = append(byKind[c.spec.Kind], c)
	}
	lens := make([]int, len(perturb.Kinds))
	for i, k := range perturb.Kinds {
		lens[i] = len(byKind[k])
	}
	shares := shareOut(max, lens)
	var out []perturb.Spec
	for i, k := range perturb.Kinds {
		kept := spreadGroups(byKind[k], shares[i])
		sort.SliceStable(kept, func(i, j int) bool { return kept[i].pos < kept[j].pos })
		for _, c := range kept {
			out = append(out, c.spec)
		}
	}
	return out
}

// shareOut shares n out among parts of the given sizes, one at a time in
// turn, none beyond its size (n < 0: each its size).
func shareOut(n int, sizes []int) []int {
	share := make([]int, len(sizes))
	total := 0
	for _, s := range sizes {
		total += s
	}
	if n < 0 || n >= total {
		copy(share, sizes)
		return share
	}
	for n > 0 {
		for i := range sizes {
			if n > 0 && share[i] < sizes[i] {
				share[i]++
				n--
			}
		}
	}
	return share
}

// spreadGroups keeps n of cands: shared out among their groups (in the
// order of their first candidate), each group's share the middles of as
// many equal parts of its candidates in recording order.
func spreadGroups(cands []candidate, n int) []candidate {
	var order []string
	groups := map[string][]candidate{}
	for _, c := range cands {
		if _, ok := groups[c.group]; !ok {
			order = append(order, c.group)
		}
		groups[c.group] = append(groups[c.group], c)
	}
	sizes := make([]int, len(order))
	for i, g := range order {
		sort.SliceStable(groups[g], func(a, b int) bool { return groups[g][a].pos < groups[g][b].pos })
		sizes[i] = len(groups[g])
	}
	var out []candidate
	for i, q := range shareOut(n, sizes) {
		cs := groups[order[i]]
		for j := 0; j < q; j++ {
			out = append(out, cs[(2*j+1)*len(cs)/(2*q)]) // the middle of the j-th of q parts
		}
	}
	return out
}
