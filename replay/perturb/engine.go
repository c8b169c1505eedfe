package perturb

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Request is what an Engine knows of a request of a client under test.
type Request struct {
	Method string
	// Verb is kube-apiserver's RequestInfo verb: get, list, watch,
	// create, update, patch, delete, deletecollection.
	Verb                                 string
	Group, Resource, Namespace, Name     string
	Subresource                          string
	IsResource, Watch                    bool
	ResourceVersion, Continue, UserAgent string
	Target                               string
	Body                                 []byte
}

// IsWrite reports whether the request changes the world.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Refusal is an answer an Engine gives in the world's place: a Status of
// Code, with Reason and Message, and Retry-After seconds if set.
type Refusal struct {
	Code            int
	Reason, Message string
	RetryAfter      int
}

// Decision is what an Engine makes of a request (Engine.Request): the
// zero value serves it as it is.
type Decision struct {
	// Refuse answers the request with a Status instead of serving it.
	Refuse *Refusal
	// Lose serves the request (the write lands), then answers it with
	// this Status instead of its own answer.
	Lose *Refusal
	// Delay holds the answer this long first.
	Delay time.Duration
	// StaleChanges and StaleAge ask a LIST to be answered from the world
	// as it was that many changes, or that long, before now.
	StaleChanges int
	StaleAge     time.Duration
	// Skip asks a watch from a resourceVersion to resume past the
	// intermediate versions (one event per object changed since), once
	// Delay passed.
	Skip bool
	// Spec is the perturbation that decided, for the log.
	Spec string
}

// Actions are what an Engine does to the replay at a point: the replay
// implements them.
type Actions interface {
	// CloseWatches ends the open watches of resource ("" every one),
	// cleanly or by a connection reset, and returns the resource of
	// each one it ended.
	CloseWatches(resource string, reset bool) []string
	// ExpireWatches ends them with an ERROR event, 410 Expired.
	ExpireWatches(resource string) []string
	// Restart makes the replay restart: every connection closed, /readyz
	// failing and new connections refused for d.
	Restart(d time.Duration)
	// ClientRestart closes the clients' connections and hands over to
	// the harness to restart the controller.
	ClientRestart(sp Spec) error
}

// Applied is one perturbation applied during a run.
type Applied struct {
	// At is when, since the replay's start; Time when, on the replay's
	// clock.
	At   time.Duration
	Time time.Time
	// Spec is the perturbation, as String writes it.
	Spec string
	// Detail says what it did ("closed 3 watches: pods ×3").
	Detail string
	// Finding, when set, is a misbehaviour of the client the
	// perturbation revealed ("retried after 12ms, Retry-After 1s"): a
	// difference of the run, whatever its end state.
	Finding string
}

// appliedPrefix starts an Applied line of a run's Summary note.
const appliedPrefix = "perturbation "

// TimeFormat is the format of an Applied line's time (RFC 3339, UTC,
// nanoseconds).
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// String is the line an Applied takes in a run's Summary note:
// "perturbation +1.234s @TIME SPEC: DETAIL" (and " | finding: …").
func (a Applied) String() string {
	s := fmt.Sprintf("%s+%s @%s %s: %s", appliedPrefix, a.At.Round(time.Millisecond), a.Time.UTC().Format(TimeFormat), a.Spec, a.Detail)
	if a.Finding != "" {
		s += " | finding: " + a.Finding
	}
	return s
}

// lostDetail is how an Applied's Detail says a write's answer was lost.
const lostDetail = " applied, its answer lost: "

// LostWrite reads the method and request-target of a write whose answer
// a perturbation lost (error:when=after) from an Applied's Detail.
func LostWrite(detail string) (method, target string, ok bool) {
	req, _, found := strings.Cut(detail, lostDetail)
	if !found {
		return "", "", false
	}
	method, target, ok = strings.Cut(req, " ")
	return method, target, ok
}

// ParseApplied reads the Applied lines of a run's Summary note (others are
// skipped).
func ParseApplied(note string) []Applied {
	var out []Applied
	for _, line := range strings.Split(note, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), appliedPrefix+"+")
		if !ok {
			continue
		}
		at, rest, ok := strings.Cut(rest, " ")
		d, err := time.ParseDuration(at)
		if !ok || err != nil {
			continue
		}
		a := Applied{At: d}
		if ts, r, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(ts, "@") {
			if tm, err := time.Parse(TimeFormat, ts[1:]); err == nil {
				a.Time, rest = tm, r
			}
		}
		a.Spec, a.Detail, _ = strings.Cut(rest, ": ")
		if det, f, ok := strings.Cut(a.Detail, " | finding: "); ok {
			a.Detail, a.Finding = det, f
		}
		out = append(out, a)
	}
	return out
}

// Engine applies a run's perturbations: the replay tells it of each
// request (Request), each answered write (Wrote) and each watch event
// sent (Event); it decides how each request is answered and, at each
// point, acts on the replay (Actions). Safe for concurrent use.
type Engine struct {
	act   Actions
	clock func() time.Time
	log   func(Applied)

	mu      sync.Mutex
	start   time.Time
	started bool
	specs   []*armed
	applied []Applied
	timers  []*time.Timer
	closed  bool
	// counts says whether Event must count (a point counts events).
	counts bool
}

// armed is one spec's state during a run.
type armed struct {
	Spec
	text    string
	reached bool // its point was reached (or it has none)
	at      time.Time
	n       int // events or writes counted towards the point
	used    int // requests perturbed
	// seen: conflict's objects already refused once.
	seen map[string]bool
	// throttle's requests seen, and its refusals not waited out yet by
	// request (throttleKey), with the requests reported as retried early.
	eligible uint64
	refused  map[string][]refusedAt
	early    map[string]bool
	targets  map[string]string // "METHOD target" by request
	// skip: re-watches to resume past the intermediate versions, by
	// resource.
	skips map[string]int
	// eventDelay: delay on=events is on.
	eventDelay bool
}

// NewEngine returns an Engine for specs acting through act; clock is the
// replay's (nil: the wall clock); log, if set, receives each Applied as
// it happens.
func NewEngine(specs []Spec, act Actions, clock func() time.Time, log func(Applied)) *Engine {
	if clock == nil {
		clock = time.Now
	}
	e := &Engine{act: act, clock: clock, log: log}
	for _, sp := range specs {
		a := &armed{Spec: sp, text: sp.String(), seen: map[string]bool{}, refused: map[string][]refusedAt{}, early: map[string]bool{}, targets: map[string]string{}, skips: map[string]int{}}
		if sp.At.Kind == AtEvent {
			e.counts = true
		}
		e.specs = append(e.specs, a)
	}
	return e
}

// Start starts the run's clock (the replay calls it at the clients'
// first request): the specs without a point apply from now, those at a
// time at theirs.
func (e *Engine) Start() {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return
	}
	e.started = true
	e.start = e.clock()
	var now []*armed
	for _, a := range e.specs {
		switch a.At.Kind {
		case AtStart:
			now = append(now, a)
		case AtTime:
			a := a
			e.timers = append(e.timers, time.AfterFunc(a.At.Time, func() { e.reach(a) }))
		}
	}
	e.mu.Unlock()
	for _, a := range now {
		e.reach(a)
	}
}

// Stop stops the timers of points not reached yet.
func (e *Engine) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, t := range e.timers {
		t.Stop()
	}
}

// Applied returns the perturbations applied so far, in order.
func (e *Engine) Applied() []Applied {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.throttleFindings(e.clock())
	return append([]Applied(nil), e.applied...)
}

// Specs returns the run's specs.
func (e *Engine) Specs() []Spec {
	out := make([]Spec, len(e.specs))
	for i, a := range e.specs {
		out[i] = a.Spec
	}
	return out
}

// note records an Applied (the lock is held).
func (e *Engine) note(a *armed, detail, finding string) {
	now := e.clock()
	ap := Applied{At: now.Sub(e.start), Time: now, Spec: a.text, Detail: detail, Finding: finding}
	e.applied = append(e.applied, ap)
	if e.log != nil {
		e.log(ap)
	}
}

// reach marks a's point reached and, for a kind that acts at its point,
// acts (without the lock: the actions reach the replay).
func (e *Engine) reach(a *armed) {
	e.mu.Lock()
	if a.reached || e.closed {
		e.mu.Unlock()
		return
	}
	a.reached, a.at = true, e.clock()
	switch a.Kind {
	case Stale, Throttle, Error, Conflict:
		e.mu.Unlock() // noted request by request
		return
	case Delay:
		a.eventDelay = a.On == "events"
		e.note(a, fmt.Sprintf("%s delayed %s from here", a.On, a.For), "")
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	var detail string
	var err error
	switch a.Kind {
	case WatchClose:
		detail = "closed " + watches(e.act.CloseWatches(a.Resource, a.Mode == "reset"))
		if a.Mode == "reset" {
			detail += " by a connection reset"
		}
	case Gone:
		detail = "410 Expired on " + watches(e.act.ExpireWatches(a.Resource))
	case Skip:
		closed := e.act.CloseWatches(a.Resource, false)
		e.mu.Lock()
		for _, r := range closed {
			a.skips[r]++
		}
		e.mu.Unlock()
		detail = "closed " + watches(closed) + "; their re-watches skip the intermediate versions"
	case Restart:
		e.act.Restart(a.For)
		detail = fmt.Sprintf("restarted: connections closed, /readyz failing and new connections refused for %s", a.For)
	case ClientRestart:
		detail = "closed the clients' connections; the harness restarts the controller"
		if err = e.act.ClientRestart(a.Spec); err != nil {
			detail += ": " + err.Error()
		}
	}
	e.mu.Lock()
	e.note(a, detail, "")
	e.mu.Unlock()
}

// watches describes the resources of the watches an action ended.
func watches(rs []string) string {
	if len(rs) == 0 {
		return "no open watch"
	}
	n := map[string]int{}
	var order []string
	for _, r := range rs {
		if n[r] == 0 {
			order = append(order, r)
		}
		n[r]++
	}
	parts := make([]string, len(order))
	for i, r := range order {
		parts[i] = fmt.Sprintf("%s ×%d", r, n[r])
	}
	word := "watches"
	if len(rs) == 1 {
		word = "watch"
	}
	return fmt.Sprintf("%d %s (%s)", len(rs), word, strings.Join(parts, ", "))
}

// matches reports whether resource filter f ("pods", "deployments.apps",
// "" any) names the request's resource.
func matches(f string, r Request) bool {
	if f == "" {
		return true
	}
	name, group, hasGroup := strings.Cut(f, ".")
	return name == r.Resource && (!hasGroup || group == r.Group)
}

// objectMatches reports whether the request is of point p's object
// filter.
func (p Point) objectMatches(r Request) bool {
	if !matches(p.Resource, r) {
		return false
	}
	return p.Name == "" || p.Name == r.Name && p.Namespace == r.Namespace
}

// Event notes a watch event of resource sent to a client: the points
// that count events may be reached.
func (e *Engine) Event(resource string) {
	if !e.counts {
		return
	}
	var due []*armed
	e.mu.Lock()
	for _, a := range e.specs {
		if a.At.Kind != AtEvent || a.reached || a.At.Resource != "" && a.At.Resource != resource &&
			!strings.HasPrefix(a.At.Resource, resource+".") {
			continue
		}
		a.n++
		if a.n >= a.At.N {
			due = append(due, a)
		}
	}
	e.mu.Unlock()
	for _, a := range due {
		e.reach(a)
	}
}

// EventDelay is how long each watch event waits before it goes out.
func (e *Engine) EventDelay(resource string) time.Duration {
	var d time.Duration
	e.mu.Lock()
	for _, a := range e.specs {
		if a.eventDelay && (a.Resource == "" || a.Resource == resource || strings.HasPrefix(a.Resource, resource+".")) {
			d += a.For
		}
	}
	e.mu.Unlock()
	return d
}

// Wrote notes a write the replay answered (with status): the points that
// count writes may be reached.
func (e *Engine) Wrote(r Request, status int) {
	var due []*armed
	e.mu.Lock()
	for _, a := range e.specs {
		if a.At.Kind != AtWrite || a.reached || a.Kind == Error || !a.At.objectMatches(r) {
			continue
		}
		a.n++
		if a.n >= a.At.N {
			due = append(due, a)
		}
	}
	e.mu.Unlock()
	for _, a := range due {
		e.reach(a)
	}
}

// Request decides how request r is answered.
func (e *Engine) Request(r Request) Decision {
	var d Decision
	if !r.IsResource {
		return d
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock()
	e.throttleFindings(now)
	for _, a := range e.specs {
		if a.Kind == Error {
			e.decideError(a, r, &d)
			continue
		}
		if !a.reached || !matches(a.Resource, r) {
			continue
		}
		switch a.Kind {
		case Delay:
			if a.On == "answers" {
				d.Delay += a.For
			}
		case Stale:
			if r.Verb == "list" && !r.Watch && a.used < a.Count && r.Continue == "" && r.ResourceVersion == "0" {
				a.used++
				d.StaleChanges, d.StaleAge, d.Spec = a.Changes, a.Age, a.text
				what := fmt.Sprintf("%d changes", a.Changes)
				if a.Age > 0 {
					what = a.Age.String()
				}
				e.note(a, "LIST "+r.Target+" answered as the world was "+what+" earlier", "")
			}
		case Skip:
			if r.Watch && a.skips[r.Resource] > 0 && r.ResourceVersion != "" && r.ResourceVersion != "0" {
				a.skips[r.Resource]--
				d.Skip, d.Spec = true, a.text
				d.Delay += a.For
				e.note(a, "re-watch "+r.Target+" resumed past the intermediate versions", "")
			}
		case Conflict:
			e.decideConflict(a, r, &d)
		case Throttle:
			e.decideThrottle(a, r, now, &d)
		}
		if d.Refuse != nil {
			return d
		}
	}
	return d
}

// decideError refuses, or loses the answer of, the write at a's point
// (the lock is held).
func (e *Engine) decideError(a *armed, r Request, d *Decision) {
	if !r.IsWrite() || a.used >= a.Count || !matches(a.Resource, r) {
		return
	}
	if a.At.Kind == AtWrite {
		if !a.At.objectMatches(r) {
			return
		}
		a.n++
		if a.n < a.At.N {
			return
		}
	} else if !a.reached {
		return
	}
	a.used++
	ref := &Refusal{Code: a.Code, Reason: reasons[a.Code], Message: messages[a.Code]}
	if a.Mode == "after" {
		d.Lose = ref
		e.note(a, fmt.Sprintf("%s %s%s%d", r.Method, r.Target, lostDetail, a.Code), "")
	} else {
		d.Refuse = ref
		e.note(a, fmt.Sprintf("%s %s refused: %d", r.Method, r.Target, a.Code), "")
	}
	d.Spec = a.text
}

var reasons = map[int]string{500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout", 409: "Conflict", 429: "TooManyRequests"}

var messages = map[int]string{
	500: "Internal error occurred: etcdserver: request timed out",
	503: "the server is currently unable to handle the request",
	504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}

// decideConflict refuses the first update of each object (the lock is
// held).
func (e *Engine) decideConflict(a *armed, r Request, d *Decision) {
	if r.Verb != "update" || r.Name == "" || a.Count > 0 && a.used >= a.Count {
		return
	}
	key := strings.Join([]string{r.Group, r.Resource, r.Namespace, r.Name}, "/")
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	a.used++
	kind := r.Resource
	if r.Group != "" {
		kind += "." + r.Group
	}
	msg := fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", kind, r.Name)
	d.Refuse = &Refusal{Code: http.StatusConflict, Reason: "Conflict", Message: msg}
	d.Spec = a.text
	e.note(a, fmt.Sprintf("%s %s refused: 409 Conflict", r.Method, r.Target), "")
}

// retryTolerance is how much sooner than its Retry-After a retry may
// come before it counts as ignoring it (clock granularity, scheduling).
const retryTolerance = 100 * time.Millisecond

// retryGrace is how long past its Retry-After a refusal is given to be
// waited out (a client retrying on time) before a request refused again
// early, and never retried on time, is reported.
const retryGrace = 2 * time.Second

// refusedAt is one 429 a throttle answered: when it may be retried, and
// whether the request came before an earlier 429 of the same request
// could be retried.
type refusedAt struct {
	until time.Time
	early bool
	wait  time.Duration // how soon after that earlier 429 it came
}

// decideThrottle answers a share of the requests 429, and a request
// that comes again before a 429 of it may be retried 429 again (the
// lock is held).
//
// A request identical to one refused (same client, target and body)
// that comes before the Retry-After passed is not proof the client
// ignored it: a controller sends identical requests side by side (a
// ReplicaSet's Pods, created from one template with generateName).
// What tells them apart is what follows: a client that honours
// Retry-After retries each refused request once it passed; one that
// ignores it retries at once, again and again, and never waits. So each
// refusal is booked, a request coming after the oldest refusal's
// Retry-After waits that one out, one coming before it is refused again
// as early (and booked), and a request refused early whose
// refusal is not waited out by retryGrace after its Retry-After is
// reported (throttleFindings), once per request.
func (e *Engine) decideThrottle(a *armed, r Request, now time.Time, d *Decision) {
	if a.On == "reads" && r.IsWrite() || a.On == "writes" && !r.IsWrite() {
		return
	}
	if a.For > 0 && now.Sub(a.at) > a.For {
		return
	}
	key := throttleKey(r)
	retry := time.Duration(a.RetryAfter) * time.Second
	ref := &Refusal{Code: http.StatusTooManyRequests, Reason: "TooManyRequests",
		Message: "Too many requests, please try again later.", RetryAfter: a.RetryAfter}
	if book := a.refused[key]; len(book) > 0 {
		// Early: no refusal of it may be retried yet.
		if early := book[0].until.Sub(now); early > retryTolerance {
			a.refused[key] = append(book, refusedAt{until: now.Add(retry), early: true, wait: retry - early})
			e.note(a, fmt.Sprintf("%s %s refused again: 429 (came %s after a 429 with Retry-After %ds)",
				r.Method, r.Target, (retry-early).Round(time.Millisecond), a.RetryAfter), "")
			d.Refuse, d.Spec = ref, a.text
			return
		}
		// Waited out: the oldest refusal (booked in time order).
		if len(book) == 1 {
			delete(a.refused, key)
		} else {
			a.refused[key] = book[1:]
		}
	}
	if a.Count > 0 && a.used >= a.Count {
		return
	}
	a.eligible++
	if !chosen(a.Seed, a.eligible, a.Share) {
		return
	}
	a.used++
	a.refused[key] = append(a.refused[key], refusedAt{until: now.Add(retry)})
	a.targets[key] = r.Method + " " + r.Target
	d.Refuse, d.Spec = ref, a.text
	e.note(a, fmt.Sprintf("%s %s refused: 429, Retry-After %ds", r.Method, r.Target, a.RetryAfter), "")
}

// throttleFindings notes, once per request, each request refused early
// whose refusal was not waited out by retryGrace past its Retry-After
// (the lock is held; see decideThrottle).
func (e *Engine) throttleFindings(now time.Time) {
	for _, a := range e.specs {
		if a.Kind != Throttle {
			continue
		}
		var keys []string
		for key, book := range a.refused {
			if a.early[key] {
				continue
			}
			for _, b := range book {
				if b.early && now.Sub(b.until) > retryGrace {
					keys = append(keys, key)
					break
				}
			}
		}
		sort.Slice(keys, func(i, j int) bool { return a.refused[keys[i]][0].until.Before(a.refused[keys[j]][0].until) })
		for _, key := range keys {
			a.early[key] = true
			book := a.refused[key]
			n, first := 0, time.Duration(-1)
			for _, b := range book {
				if b.early {
					n++
					if first < 0 {
						first = b.wait
					}
				}
			}
			what := a.targets[key]
			e.note(a, fmt.Sprintf("%s: %d 429s not waited out", what, len(book)),
				fmt.Sprintf("%s retried after %s, Retry-After %ds (%d times before it passed; never retried after it)",
					what, first.Round(time.Millisecond), a.RetryAfter, n))
		}
	}
}

// throttleKey names a request as its client would retry it.
func throttleKey(r Request) string {
	h := sha256.New()
	for _, s := range []string{r.UserAgent, r.Method, r.Target} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(r.Body)
	return string(h.Sum(nil))
}

// chosen reports whether the n-th eligible request is among share of
// them, as seed picks: the same on every run.
func chosen(seed int64, n uint64, share float64) bool {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(seed))
	binary.LittleEndian.PutUint64(b[8:], n)
	sum := sha256.Sum256(b[:])
	return float64(binary.LittleEndian.Uint64(sum[:8])>>11)/float64(1<<53) < share
}
