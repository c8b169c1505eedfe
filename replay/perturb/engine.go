package perturb

import (
	"fmt"
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
