package diff

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// Report is the verdict of a comparison: counts per category, then the
// differences grouped by the object (or stream, or request) they concern.
// Its JSON form (json.Marshal of a Report) is the output of `wtrace diff
// --json`, a stable interface: fields may be added, never renamed (see the
// package doc for the schema).
type Report struct {
	A    string `json:"a"` // the sessions compared, as named to Sessions
	B    string `json:"b"`
	Same bool   `json:"same"`
	// Verdict are the categories whose differences make the sessions
	// differ (Options.Verdict, or its default); the others are compared
	// and listed but do not change Same.
	Verdict []Category `json:"verdict"`
	Summary Summary    `json:"summary"`
	// States is the end state of every object either session wrote (when
	// CategoryState is compared), in the order of its first write.
	States []ObjectState `json:"states,omitempty"`
	// Attempts counts the failed attempts of each session (writes not
	// answered, or not with a 2xx; Summary.Writes.Attempts adds
	// them up): a run that needs more tries than the recording did is
	// not different, but may be worth a look.
	Attempts PerSide `json:"attempts"`
	// Pairing says which name the server generated in A is which in B
	// (see Pair).
	Pairing []Pair  `json:"pairing,omitempty"`
	Groups  []Group `json:"groups"`
	// Omitted counts the differences counted in Summary but not listed in
	// Groups (beyond Options.MaxDifferences).
	Omitted int `json:"omitted"`
	// Perturbations are those a perturbed run applied (its Summary note:
	// package replay/perturb), in time order; Preceding, when the
	// sessions differ, the last one applied before the first difference
	// (or the first with a finding); Findings the misbehaviours of the
	// client they revealed (a retry before Retry-After), each of which
	// makes the sessions differ.
	Perturbations []Perturbation `json:"perturbations,omitempty"`
	Preceding     *Perturbation  `json:"preceding,omitempty"`
	Findings      []string       `json:"findings,omitempty"`
	// Warnings say what could not be compared: damaged regions of a
	// file, bodies too large to normalize, objects that did not decode.
	Warnings []string `json:"warnings,omitempty"`
}

// Summary counts what was compared and what differed, per category.
type Summary struct {
	State     Counts `json:"state"` // objects, by their end state
	Writes    Counts `json:"writes"`
	Events    Counts `json:"events"`
	Streams   Counts `json:"streams"`
	Exchanges Counts `json:"exchanges"`
}

// Counts are the numbers of one category. Every field is always present;
// those that do not apply to a category stay 0 (see the package doc).
type Counts struct {
	Compared        int `json:"compared"`        // pairs found in both sessions
	Missing         int `json:"missing"`         // in A only
	Extra           int `json:"extra"`           // in B only
	Reordered       int `json:"reordered"`       // in both, in another order (writes of one object; events of one stream)
	Changed         int `json:"changed"`         // different after normalization
	Status          int `json:"status"`          // a different HTTP status (writes, exchanges; streams: the set of statuses)
	ResourceVersion int `json:"resourceVersion"` // events whose resourceVersion differs (only with Options.CompareRV)
	Timing          int `json:"timing"`          // events (streams: streams holding events) beyond the time tolerance
	// BytesOnly counts pairs whose bytes differ but that are the same
	// after normalization (resourceVersions, timestamps, encoding): not a
	// difference.
	BytesOnly int `json:"bytesOnly"`
	// Repeats counts the writes left out, in both sessions, as repeats of
	// an earlier write of their object (Options.CollapseRepeats; writes
	// only): not a difference.
	Repeats int `json:"repeats"`
	// Coalesced counts the status reports left out, in both sessions, as
	// intermediate states one controller observed and the other did not,
	// between states both reported (writes of a status subresource
	// only; see intermediate in writes.go): not a difference.
	Coalesced int `json:"coalesced"`
	// Attempts counts the failed attempts left out of the comparison, in
	// both sessions: writes not answered, or answered with anything but a
	// 2xx (409, 429, 5xx, a 403 of a terminating namespace, …)
	// (writes only): not a difference by themselves.
	Attempts int `json:"attempts"`
	// Excused counts the end-state differences of a comparison with a
	// perturbed run that the perturbations explain (an Event reporting a
	// write they failed, an object whose create had its answer lost):
	// not a difference (state only; see PerturbedVerdict).
	Excused int `json:"excused,omitempty"`
}

// PerSide is a number in each session.
type PerSide struct {
	A int `json:"a"`
	B int `json:"b"`
}

// Pair is an object whose name the apiserver generated (a create with
// metadata.generateName), as diff names it in both sessions: Object.Name
// is the canonical name ("web-796cf5c97c-#1", see the package doc), A and
// B the names the server gave in each session ("" where that session did
// not create it), ExchangeA and ExchangeB the creates.
type Pair struct {
	Object    Object `json:"object"`
	A         string `json:"a,omitempty"`
	B         string `json:"b,omitempty"`
	ExchangeA *int64 `json:"exchangeA,omitempty"`
	ExchangeB *int64 `json:"exchangeB,omitempty"`
}

// Differences is the number of differences c counts (BytesOnly and
// Compared are none).
func (c Counts) Differences() int {
	return c.Missing + c.Extra + c.Reordered + c.Changed + c.Status + c.ResourceVersion + c.Timing
}

// Group gathers the differences concerning one subject: an object (its
// writes, the watch events about it, GETs of it), a watch stream (its
// timing, its statuses, a stream found in one session only), or a request
// that names no object.
type Group struct {
	Subject     string       `json:"subject"`          // "configmaps demo/cm-1", "watch configmaps -n demo", "GET /version"
	Object      *Object      `json:"object,omitempty"` // for an object
	Differences []Difference `json:"differences"`
}

// Category is what a difference is about.
type Category string

const (
	CategoryState    Category = "state"    // an object's end state
	CategoryWrite    Category = "write"    // a client write (POST, PUT, PATCH, DELETE)
	CategoryEvent    Category = "event"    // a watch event
	CategoryStream   Category = "stream"   // a watch stream as a whole
	CategoryExchange Category = "exchange" // any other exchange
)

// Kind is how the two sessions differ.
type Kind string

const (
	KindMissing         Kind = "missing"         // in A, not in B
	KindExtra           Kind = "extra"           // in B, not in A
	KindReordered       Kind = "reordered"       // in both, in another order; Diff is set if it changed too
	KindChanged         Kind = "changed"         // different after normalization; Diff shows how
	KindStatus          Kind = "status"          // a different HTTP status
	KindResourceVersion Kind = "resourceVersion" // another resourceVersion (Options.CompareRV)
	KindTiming          Kind = "timing"          // events beyond the tolerance (one difference per stream)
)

// Difference is one thing that differs.
type Difference struct {
	Category Category `json:"category"`
	Kind     Kind     `json:"kind"`
	// What is the verb of a write ("PUT", "PATCH (apply)"), the type of an event
	// ("MODIFIED"), or the method of an exchange ("GET").
	What string `json:"what,omitempty"`
	// Stream names the watch stream of an event or stream difference
	// ("watch configmaps -n demo").
	Stream string `json:"stream,omitempty"`
	A      *Place `json:"a,omitempty"` // where it is in A; nil for extra
	B      *Place `json:"b,omitempty"` // where it is in B; nil for missing
	// Count is, for timing, the number of events beyond the tolerance; for
	// a missing or extra stream, its number of events.
	Count int `json:"count,omitempty"`
	// Delta is, for timing, the largest difference of an event's offset
	// (B − A) in nanoseconds; A and B are then that event's places.
	Delta int64 `json:"delta,omitempty"`
	// Detail says the rest in words ("status 200 → 409").
	Detail string `json:"detail,omitempty"`
	// Diff is a unified diff of the normalized documents of A and B
	// (changed, and reordered when also changed).
	Diff string `json:"diff,omitempty"`
}

// Place locates a write, event or exchange in one session.
type Place struct {
	Exchange int64  `json:"exchange"`
	Request  string `json:"request,omitempty"` // method and request-target as sent
	// Seq is an event's number within its exchange (as in wtrace events).
	Seq *int64 `json:"seq,omitempty"`
	// Index is the position among what was paired: the n-th write of the
	// object, the n-th event of the stream, the n-th exchange of the
	// request (from 0).
	Index int    `json:"index"`
	Time  string `json:"time"` // capture time (RFC 3339, UTC, nanoseconds)
	// Offset is an event's time since the start of its stream, in
	// nanoseconds.
	Offset          *int64 `json:"offset,omitempty"`
	Status          int    `json:"status,omitempty"`          // the response status (writes, exchanges)
	ResourceVersion string `json:"resourceVersion,omitempty"` // an event's object's resourceVersion
	Name            string `json:"name,omitempty"`            // an event's object, namespace/name

	what string // an event's type, for the words of a timing difference
}

func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format(formats.TimeFormat) }

// TextOptions configure Report.WriteText.
type TextOptions struct {
	// Color marks the verdict, removed and added lines with ANSI colours
	// (for a terminal).
	Color bool
}

// WriteText writes the report for a person: the verdict and the counts
// per category, then each group and its differences, unified diffs
// indented under the difference they belong to.
func (r *Report) WriteText(w io.Writer, opts TextOptions) error {
	p := &printer{w: w, color: opts.Color}
	a, b := r.A, r.B
	if a == "" {
		a = "a"
	}
	if b == "" {
		b = "b"
	}
	if r.Same {
		p.printf("%s and %s are the same %s\n", a, b, p.paint(green, "✓"))
	} else {
		p.printf("%s and %s differ %s\n", a, b, p.paint(red, "✗"))
	}
	for _, c := range []struct {
		cat  Category
		name string
		c    Counts
	}{{CategoryState, "end state", r.Summary.State}, {CategoryWrite, "writes", r.Summary.Writes}, {CategoryEvent, "events", r.Summary.Events},
		{CategoryStream, "streams", r.Summary.Streams}, {CategoryExchange, "exchanges", r.Summary.Exchanges}} {
		if c.cat == CategoryState && len(r.States) == 0 && c.c == (Counts{}) {
			continue
		}
		line := countLine(c.c)
		if len(r.Verdict) > 0 && !slices.Contains(r.Verdict, c.cat) && c.c.Differences() > 0 {
			line += " — not in the verdict"
		}
		p.printf("  %-10s %s\n", c.name, line)
	}
	if len(r.Perturbations) > 0 {
		p.printf("  %-10s %d applied\n", "perturbed", len(r.Perturbations))
	}
	for _, f := range r.Findings {
		p.printf("  finding: %s\n", f)
	}
	if pr := r.Preceding; pr != nil {
		p.printf("  the first difference follows the perturbation %s (+%s: %s)\n", pr.Spec, pr.At, pr.Detail)
	}
	if r.Omitted > 0 {
		p.printf("  (%d more differences counted above are not listed)\n", r.Omitted)
	}
	if len(r.States) > 0 {
		p.printf("\n%s\n", p.paint(bold, fmt.Sprintf("end state (%s the clients wrote)", plural(len(r.States), "object"))))
		same := 0
		for _, st := range r.States {
			if st.Same {
				same++
			}
		}
		shown := 0
		for _, st := range r.States {
			if st.Same && len(r.States) > maxStateLines {
				continue
			}
			if shown++; shown > maxStateLines {
				p.printf("  … %d more that differ (listed below)\n", len(r.States)-same-maxStateLines)
				break
			}
			mark, c := "≠", red
			if st.Same {
				mark, c = "=", ""
			}
			p.printf("  %s %-8s %-8s %s\n", p.paint(c, mark), endWord(st.A), endWord(st.B), st.Subject)
		}
		if len(r.States) > maxStateLines && same > 0 {
			p.printf("  (%d more end the same)\n", same)
		}
	}
	if len(r.Pairing) > 0 {
		p.printf("\n%s\n", p.paint(bold, "generated names paired (a → b)"))
		for _, pr := range r.Pairing {
			p.printf("  %s %s: %s → %s\n", pr.Object.Resource, pr.Object.Name, orDash(pr.A), orDash(pr.B))
		}
	}
	for _, g := range r.Groups {
		p.printf("\n%s\n", p.paint(bold, g.Subject))
		for _, d := range g.Differences {
			p.printf("  %s\n", d.line(a, b))
			if d.Diff != "" {
				for _, l := range splitLines(d.Diff) {
					c := ""
					switch {
					case strings.HasPrefix(l, "---") || strings.HasPrefix(l, "+++"):
						c = bold
					case strings.HasPrefix(l, "@@"):
						c = cyan
					case strings.HasPrefix(l, "-"):
						c = red
					case strings.HasPrefix(l, "+"):
						c = green
					}
					p.printf("    %s\n", p.paint(c, l))
				}
			}
		}
	}
	for _, wn := range r.Warnings {
		p.printf("\nwarning: %s", wn)
	}
	if len(r.Warnings) > 0 {
		p.printf("\n")
	}
	return p.err
}

// maxStateLines bounds the end state lines of the text report: past it,
// only the objects that differ are listed.
const maxStateLines = 200

// endWord is an end state in a word ("-": not written).
func endWord(e *EndState) string {
	if e == nil {
		return "-"
	}
	if e.Count > 0 {
		return fmt.Sprintf("%s×%d", e.State, e.Count)
	}
	return string(e.State)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func countLine(c Counts) string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(c.Missing, "missing")
	add(c.Extra, "extra")
	add(c.Reordered, "reordered")
	add(c.Changed, "changed")
	add(c.Status, "with another status")
	add(c.ResourceVersion, "with another resourceVersion")
	add(c.Timing, "beyond the time tolerance")
	s := fmt.Sprintf("%d compared", c.Compared)
	if len(parts) == 0 {
		s += ", no difference"
	} else {
		s += ": " + strings.Join(parts, ", ")
	}
	if c.BytesOnly > 0 {
		s += fmt.Sprintf(" (%d differ only in ignored fields)", c.BytesOnly)
	}
	if c.Repeats > 0 {
		s += fmt.Sprintf(" (%d repeats left out)", c.Repeats)
	}
	if c.Coalesced > 0 {
		s += fmt.Sprintf(" (%s left out)", plural(c.Coalesced, "intermediate status report"))
	}
	if c.Attempts > 0 {
		s += fmt.Sprintf(" (%s left out)", plural(c.Attempts, "failed attempt"))
	}
	if c.Excused > 0 {
		s += fmt.Sprintf(" (%s the perturbation explains)", plural(c.Excused, "difference"))
	}
	return s
}

// line is a difference in one line of text.
func (d *Difference) line(nameA, nameB string) string {
	var b strings.Builder
	b.WriteString(string(d.Category))
	if d.Category == CategoryState {
		b.Reset()
		b.WriteString("end state")
	} else if d.What != "" {
		b.WriteString(" " + d.What)
	}
	switch d.Kind {
	case KindMissing:
		b.WriteString(" missing in " + nameB)
	case KindExtra:
		b.WriteString(" extra in " + nameB)
	case KindTiming:
		b.WriteString(" timing")
	default:
		b.WriteString(" " + string(d.Kind))
	}
	if d.Detail != "" {
		b.WriteString(": " + d.Detail)
	}
	var at []string
	if d.A != nil {
		at = append(at, "a: "+d.A.String())
	}
	if d.B != nil {
		at = append(at, "b: "+d.B.String())
	}
	if d.Stream != "" && d.Category == CategoryEvent {
		at = append(at, d.Stream)
	}
	if len(at) > 0 {
		b.WriteString(" (" + strings.Join(at, "; ") + ")")
	}
	return b.String()
}

func (p *Place) String() string {
	s := fmt.Sprintf("exchange %d", p.Exchange)
	if p.Seq != nil {
		s += fmt.Sprintf(" event %d", *p.Seq)
	}
	if p.Offset != nil {
		s += " at " + fmtOffset(*p.Offset)
	} else {
		s += " at " + p.Time
	}
	if p.Status != 0 {
		s += fmt.Sprintf(", status %d", p.Status)
	}
	return s
}

// fmtOffset formats a stream offset: "+1.234s".
func fmtOffset(ns int64) string {
	d := time.Duration(ns).Round(time.Millisecond)
	if ns < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

const (
	red   = "\x1b[31m"
	green = "\x1b[32m"
	cyan  = "\x1b[36m"
	bold  = "\x1b[1m"
	reset = "\x1b[0m"
)

type printer struct {
	w     io.Writer
	color bool
	err   error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *printer) paint(c, s string) string {
	if !p.color || c == "" {
		return s
	}
	return c + s + reset
}
