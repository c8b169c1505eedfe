package perturb

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a perturbation does (see the package doc).
type Kind string

// The kinds of perturbation.
const (
	WatchClose    Kind = "watch-close"
	Gone          Kind = "gone"
	Stale         Kind = "stale"
	Skip          Kind = "skip"
	Restart       Kind = "restart"
	Throttle      Kind = "throttle"
	Error         Kind = "error"
	Conflict      Kind = "conflict"
	Delay         Kind = "delay"
	ClientRestart Kind = "client-restart"
)

// Kinds lists every kind, in the order the package doc gives them.
var Kinds = []Kind{WatchClose, Gone, Stale, Skip, Restart, Throttle, Error, Conflict, Delay, ClientRestart}

// PointKind says what a Point counts.
type PointKind uint8

// The kinds of Point.
const (
	AtStart PointKind = iota // no point given: from the replay's start
	AtTime                   // at=DURATION: that long after the replay's start
	AtEvent                  // at=event:N[:RESOURCE]: once the N-th watch event was sent
	AtWrite                  // at=write:N[:RESOURCE[/NS/NAME]], after=write:…: the N-th write of the clients under test
)

// Point is where a perturbation applies: the replay's start, a time after
// it, the N-th watch event the replay sent (of one resource, or of all),
// or the N-th write of the clients under test (of one resource, or one
// object of it). after=write:R/NS/NAME is at=write:1:R/NS/NAME.
type Point struct {
	Kind PointKind
	// Time is the offset from the replay's start (AtTime).
	Time time.Duration
	// N counts events or writes, from 1.
	N int
	// Resource, Namespace and Name narrow what is counted ("" any).
	// Resource is a resource's plural name, optionally with its group
	// ("deployments", "deployments.apps").
	Resource, Namespace, Name string
	// After: written as after=write:… (the same point as at=write:1:…).
	After bool
}

// String is the point as a spec writes it ("" for AtStart).
func (p Point) String() string {
	switch p.Kind {
	case AtTime:
		return "at=" + p.Time.String()
	case AtEvent:
		s := "at=event:" + strconv.Itoa(p.N)
		if p.Resource != "" {
			s += ":" + p.Resource
		}
		return s
	case AtWrite:
		obj := p.Resource
		if p.Name != "" {
			obj += "/" + p.Namespace + "/" + p.Name
		}
		if p.After {
			return "after=write:" + obj
		}
		s := "at=write:" + strconv.Itoa(p.N)
		if obj != "" {
			s += ":" + obj
		}
		return s
	}
	return ""
}

// Spec is one perturbation: its kind, where it applies, and its
// parameters. Parse reads one from its text; String writes it back.
type Spec struct {
	Kind Kind
	// Resource narrows the perturbation to one resource ("pods",
	// "deployments.apps"); "" means every resource.
	Resource string
	At       Point
	// Mode: watch-close's clean (the default: the stream's terminating
	// chunk) or reset (the connection is reset); error's before (the
	// default: the write is refused) or after (the write is applied and
	// its answer lost).
	Mode string
	// For: restart's downtime (default 2s), delay's latency (default
	// 200ms), skip's hold of the re-watch (default 2s), throttle's window
	// (0: the rest of the run).
	For time.Duration
	// Changes and Age: how far behind a stale read is (changes, default
	// 1, or age).
	Changes int
	Age     time.Duration
	// Count bounds how many requests a perturbation that answers requests
	// applies to (stale, error: default 1; conflict, throttle: 0, no
	// bound).
	Count int
	// Share of the requests throttle answers 429 (default 0.1), and the
	// Retry-After seconds it says (default 1).
	Share      float64
	RetryAfter int
	// Seed makes throttle's choice of requests (default 1).
	Seed int64
	// Code is error's status (500, 503 the default, 504).
	Code int
	// On: delay's answers (the default) or events; throttle's all (the
	// default), reads or writes.
	On string
	// Exec and Signal, PID: client-restart's command to run (through
	// sh -c), or signal to send to process PID. Neither: the Go API's
	// Options.ClientRestart, which the CLI leaves unset.
	Exec   string
	Signal string
	PID    int
}

// SpecError is a spec that does not parse: what is wrong, and a hint.
type SpecError struct {
	Spec, Problem, Hint string
}

func (e *SpecError) Error() string {
	s := fmt.Sprintf("perturbation %q: %s", e.Spec, e.Problem)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// keys are the parameters each kind takes (besides at and after).
var keys = map[Kind][]string{
	WatchClose:    {"resource", "mode"},
	Gone:          {"resource"},
	Stale:         {"resource", "changes", "age", "count"},
	Skip:          {"resource", "for"},
	Restart:       {"for"},
	Throttle:      {"resource", "share", "retry-after", "seed", "for", "on", "count"},
	Error:         {"resource", "code", "when", "count"},
	Conflict:      {"resource", "count"},
	Delay:         {"resource", "for", "on"},
	ClientRestart: {"exec", "signal", "pid"},
}

// Parse reads a spec: KIND[:KEY=VALUE,...]. Errors are *SpecError.
func Parse(text string) (Spec, error) {
	s := strings.TrimSpace(text)
	kind, rest, _ := strings.Cut(s, ":")
	sp := Spec{Kind: Kind(kind)}
	bad := func(problem, hint string) (Spec, error) {
		return Spec{}, &SpecError{Spec: text, Problem: problem, Hint: hint}
	}
	allowed, ok := keys[sp.Kind]
	if !ok {
		return bad(fmt.Sprintf("unknown kind %q", kind), "one of "+kindList())
	}
	seen := map[string]bool{}
	if rest != "" || strings.HasSuffix(s, ":") {
		for _, kv := range splitParams(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return bad(fmt.Sprintf("%q is no KEY=VALUE", kv), "write "+kind+":KEY=VALUE,KEY=VALUE; "+kind+" takes "+keyList(allowed))
			}
			if seen[k] {
				return bad(fmt.Sprintf("%s given twice", k), "")
			}
			seen[k] = true
			if k == "at" || k == "after" {
				if seen["at"] && seen["after"] {
					return bad("both at and after", "give one point")
				}
				p, err := parsePoint(k, v)
				if err != nil {
					return bad(err.Error(), "at=2s, at=event:3[:pods], at=write:2[:pods[/NS/NAME]], after=write:pods/NS/NAME")
				}
				sp.At = p
				continue
			}
			if !contains(allowed, k) {
				return bad(fmt.Sprintf("%s takes no %s", kind, k), kind+" takes at, after, "+keyList(allowed))
			}
			if err := sp.set(k, v); err != nil {
				return bad(fmt.Sprintf("%s=%s: %v", k, v, err), "")
			}
		}
	}
	if err := sp.defaults(); err != nil {
		return bad(err.Error(), "")
	}
	return sp, nil
}

// splitParams splits KEY=VALUE pairs at commas; a comma inside exec's
// value (the rest of the spec after exec=) is kept.
func splitParams(s string) []string {
	var out []string
	for s != "" {
		if strings.HasPrefix(s, "exec=") {
			return append(out, s)
		}
		p, rest, found := strings.Cut(s, ",")
		out = append(out, p)
		if !found {
			break
		}
		if rest == "" {
			out = append(out, "")
		}
		s = rest
	}
	return out
}

// set sets parameter k (allowed for the kind) to v.
func (sp *Spec) set(k, v string) error {
	var err error
	switch k {
	case "resource":
		if strings.ContainsAny(v, "/ :") {
			return fmt.Errorf("a resource's plural name (pods, deployments.apps)")
		}
		sp.Resource = v
	case "mode":
		if v != "clean" && v != "reset" {
			return fmt.Errorf("clean or reset")
		}
		sp.Mode = v
	case "when":
		if v != "before" && v != "after" {
			return fmt.Errorf("before (the write is refused) or after (applied, its answer lost)")
		}
		sp.Mode = v
	case "for", "age":
		var d time.Duration
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("a positive duration (200ms, 2s)")
		}
		if k == "for" {
			sp.For = d
		} else {
			sp.Age = d
		}
	case "changes", "count", "retry-after", "pid", "code":
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("a positive whole number")
		}
		switch k {
		case "changes":
			sp.Changes = n
		case "count":
			sp.Count = n
		case "retry-after":
			sp.RetryAfter = n
		case "pid":
			sp.PID = n
		case "code":
			if n != 500 && n != 503 && n != 504 {
				return fmt.Errorf("500, 503 or 504")
			}
			sp.Code = n
		}
	case "share":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return fmt.Errorf("a share of the requests, 0 < share ≤ 1")
		}
		sp.Share = f
	case "seed":
		if sp.Seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("a whole number")
		}
	case "on":
		ok := sp.Kind == Delay && (v == "answers" || v == "events") ||
			sp.Kind == Throttle && (v == "all" || v == "reads" || v == "writes")
		if !ok {
			return fmt.Errorf("delay: answers or events; throttle: all, reads or writes")
		}
		sp.On = v
	case "exec":
		sp.Exec = v
	case "signal":
		if _, ok := Signals[strings.TrimPrefix(strings.ToUpper(v), "SIG")]; !ok {
			return fmt.Errorf("one of %s", strings.Join(signalNames(), ", "))
		}
		sp.Signal = strings.TrimPrefix(strings.ToUpper(v), "SIG")
	}
	return nil
}

// defaults fills in what a kind's parameters default to, and checks the
// combinations.
func (sp *Spec) defaults() error {
	switch sp.Kind {
	case WatchClose:
		if sp.Mode == "" {
			sp.Mode = "clean"
		}
	case Stale:
		if sp.Changes > 0 && sp.Age > 0 {
			return fmt.Errorf("changes and age: give one")
		}
		if sp.Changes == 0 && sp.Age == 0 {
			sp.Changes = 1
		}
		if sp.Count == 0 {
			sp.Count = 1
		}
	case Restart, Skip:
		if sp.For == 0 {
			sp.For = 2 * time.Second
		}
	case Throttle:
		if sp.Share == 0 {
			sp.Share = 0.1
		}
		if sp.RetryAfter == 0 {
			sp.RetryAfter = 1
		}
		if sp.Seed == 0 {
			sp.Seed = 1
		}
		if sp.On == "" {
			sp.On = "all"
		}
	case Error:
		if sp.Code == 0 {
			sp.Code = 503
		}
		if sp.Mode == "" {
			sp.Mode = "before"
		}
		if sp.Count == 0 {
			sp.Count = 1
		}
		if sp.At.Kind == AtStart {
			sp.At = Point{Kind: AtWrite, N: 1}
		}
	case Delay:
		if sp.For == 0 {
			sp.For = 200 * time.Millisecond
		}
		if sp.On == "" {
			sp.On = "answers"
		}
	case ClientRestart:
		if sp.Exec != "" && sp.Signal != "" {
			return fmt.Errorf("exec and signal: give one")
		}
		if (sp.Signal != "") != (sp.PID != 0) {
			return fmt.Errorf("signal needs pid, and pid signal")
		}
	}
	return nil
}

// parsePoint reads the value of at= or after=.
func parsePoint(key, v string) (Point, error) {
	if key == "after" {
		obj, ok := strings.CutPrefix(v, "write:")
		if !ok {
			return Point{}, fmt.Errorf("after=%s: after=write:RESOURCE/NS/NAME", v)
		}
		p := Point{Kind: AtWrite, N: 1, After: true}
		if err := p.setObject(obj, true); err != nil {
			return Point{}, fmt.Errorf("after=%s: %v", v, err)
		}
		return p, nil
	}
	what, rest, _ := strings.Cut(v, ":")
	if what != "event" && what != "write" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return Point{}, fmt.Errorf("at=%s: a duration since the replay's start (2s), event:N[:RESOURCE] or write:N[:RESOURCE[/NS/NAME]]", v)
		}
		return Point{Kind: AtTime, Time: d}, nil
	}
	num, obj, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return Point{}, fmt.Errorf("at=%s: %s:N counts from 1", v, what)
	}
	p := Point{Kind: AtEvent, N: n}
	if what == "write" {
		p.Kind = AtWrite
		if err := p.setObject(obj, false); err != nil {
			return Point{}, fmt.Errorf("at=%s: %v", v, err)
		}
		return p, nil
	}
	if strings.ContainsAny(obj, "/ :") {
		return Point{}, fmt.Errorf("at=%s: event:N:RESOURCE names a resource, not an object", v)
	}
	p.Resource = obj
	return p, nil
}

// setObject reads RESOURCE[/NS/NAME] (RESOURCE/NAME: a cluster-scoped
// object); an object is needed when need.
func (p *Point) setObject(obj string, need bool) error {
	parts := strings.Split(obj, "/")
	switch {
	case len(parts) == 1 && !need:
	case len(parts) == 2:
		p.Name = parts[1]
	case len(parts) == 3:
		p.Namespace, p.Name = parts[1], parts[2]
	default:
		return fmt.Errorf("%q: RESOURCE/NAMESPACE/NAME (RESOURCE/NAME when cluster-scoped)", obj)
	}
	p.Resource = parts[0]
	if p.Resource == "" && obj != "" || len(parts) > 1 && p.Name == "" || strings.ContainsAny(obj, " :") {
		return fmt.Errorf("%q: RESOURCE/NAMESPACE/NAME (RESOURCE/NAME when cluster-scoped)", obj)
	}
	return nil
}
