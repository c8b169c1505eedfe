package diff

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// Defaults of the Options whose zero value means "the default".
const (
	DefaultTimeTolerance  = 100 * time.Millisecond
	DefaultMaxDifferences = 1000
	// DefaultMaxBodySize bounds a body or an event that is decoded to be
	// normalized (its decoded tree takes several times its size); larger
	// ones are compared byte for byte. Kubernetes' own limit on a watch
	// event is the same.
	DefaultMaxBodySize = 16 << 20
	// DefaultWindow is how many events (or writes of one object) diff
	// reads ahead on each side to find where two streams agree again
	// after a difference, and how many unmatched ones it keeps to pair
	// reordered ones.
	DefaultWindow = 1000
	// DefaultWindowBytes bounds the bytes of the events read ahead or
	// kept on each side.
	DefaultWindowBytes = 64 << 20
)

// Options configure a comparison. The zero value compares everything with
// the built-in normalization, resourceVersions ignored, a time tolerance
// of DefaultTimeTolerance.
type Options struct {
	// Ignore lists more paths to leave out of every document compared
	// (event objects, write bodies, response bodies): JSON pointers
	// ("/metadata/labels/app.kubernetes.io~1name") or the dot form
	// (".metadata.labels.x", ".metadata.annotations[\"a.b/c\"]",
	// ".status.conditions[*].reason"). In a List they apply to the list
	// and to each item.
	Ignore []string
	// CompareRV reports events whose object's resourceVersion differs
	// (a replay answering writes numbers them anew: off by default).
	CompareRV bool
	// TimeTolerance is how far an event's time since its stream's start
	// may move before it is a difference. 0 means DefaultTimeTolerance;
	// negative leaves timing out.
	TimeTolerance time.Duration
	// Only limits the comparison to these categories (CategoryWrite,
	// CategoryEvent, CategoryStream, CategoryExchange); empty means all.
	// Timing belongs to CategoryEvent.
	Only []Category
	// MaxDifferences bounds the differences listed in the report (all are
	// counted). 0 means DefaultMaxDifferences; negative lists none.
	MaxDifferences int
	// MaxBodySize bounds what is decoded to be normalized. 0 means
	// DefaultMaxBodySize.
	MaxBodySize int64
	// CollapseRepeats leaves out of the comparison every write that
	// repeats an earlier write of its object in the same session: same
	// verb and parameters, same normalized body, same status. A
	// level-triggered controller repeats its idempotent writes (an
	// update to what is already there, a create answered 409) as often
	// as events wake it, and how often depends on timing — how the
	// workqueue coalesced events, how fast the server answered — not on
	// its logic; with CollapseRepeats a regression check compares the
	// distinct writes, in the order each was first made. Counts.Repeats
	// says how many were left out.
	CollapseRepeats bool
	// Window and WindowBytes bound the look-ahead of the event and write
	// alignment. 0 means DefaultWindow, DefaultWindowBytes.
	Window      int
	WindowBytes int64
	// Verdict lists the categories whose differences make the sessions
	// differ (Report.Same false); the others compared are counted and
	// listed all the same. Empty means the default: when either session
	// holds a write, CategoryState and CategoryWrite — a controller's
	// verdict is what it made of the world and the writes that made it;
	// what it read (watch events, their timing, GETs and LISTs) depends
	// on timing and is reported as information — else every category (a
	// watcher's verdict is what it received). Categories left out by Only
	// are never in it.
	Verdict []Category
	// IgnoreResources leaves out every exchange (write, watch, other) of
	// these resources: "events" (a name without a dot: the resource in
	// every API group), "events.events.k8s.io", "leases.coordination.k8s.io"
	// (resource.group: in that group only).
	IgnoreResources []string
	// IgnoreVerbs leaves out the writes of these methods ("PATCH",
	// "DELETE"; any case).
	IgnoreVerbs []string
	// Leases compares leases.coordination.k8s.io too, which are left out
	// otherwise, with the Events about them: a leader elector renews its
	// Lease on a timer, so how many writes it makes depends on how long a
	// run lasted, and its Events name the process that won, not what the
	// controller did.
	Leases bool
}

// DefaultVerdict is the verdict of sessions that hold writes (see
// Options.Verdict).
var DefaultVerdict = []Category{CategoryState, CategoryWrite}

// AllCategories are every category, in the order of the report.
var AllCategories = []Category{CategoryState, CategoryWrite, CategoryEvent, CategoryStream, CategoryExchange}

// ErrCategory: a category that is none of AllCategories.
var ErrCategory = errors.New("diff: unknown category")

// Sessions compares the session files a (the reference: a recording) and
// b (the run under test: the session of a replay, or a later recording).
// It reads each file a few times in file order (once for the bodies, once
// per watch stream) and holds no more than the files' indexes, a digest
// per exchange, and a bounded window of events (see the package doc).
// Errors are about reading the files; differences are in the Report.
func Sessions(a, b string, opts Options) (*Report, error) {
	fa, err := formats.Open(a, formats.ReaderOptions{})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	defer fa.Close()
	fb, err := formats.Open(b, formats.ReaderOptions{})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	defer fb.Close()
	return Files(fa, a, fb, b, opts)
}

// Files is Sessions for opened files, named nameA and nameB in the
// report. The caller keeps ownership of the files.
func Files(a *formats.File, nameA string, b *formats.File, nameB string, opts Options) (*Report, error) {
	c, err := newComparer(opts)
	if err != nil {
		return nil, err
	}
	c.rep = &Report{A: nameA, B: nameB, Groups: []Group{}}
	for _, f := range []struct {
		f    *formats.File
		name string
	}{{a, nameA}, {b, nameB}} {
		for _, p := range f.f.Problems() {
			c.warn("%s: %v", f.name, p)
		}
	}
	if c.a, err = c.load(a, nameA); err != nil {
		return nil, err
	}
	if c.b, err = c.load(b, nameB); err != nil {
		return nil, err
	}
	c.rep.Pairing = pairing(c.a.names, c.b.names)
	if c.wants(CategoryState) {
		c.compareState()
	}
	if c.wants(CategoryWrite) {
		if err := c.compareWrites(); err != nil {
			return nil, err
		}
	}
	if c.wants(CategoryEvent) || c.wants(CategoryStream) {
		if err := c.compareStreams(); err != nil {
			return nil, err
		}
	}
	if c.wants(CategoryExchange) {
		if err := c.compareExchanges(); err != nil {
			return nil, err
		}
	}
	c.readPerturbations(a, b)
	c.rep.Verdict = c.verdict()
	c.excusePerturbed()
	c.rep.Same = true
	for _, cat := range c.rep.Verdict {
		if c.rep.Summary.of(cat).Differences() > 0 {
			c.rep.Same = false
		}
	}
	c.judgePerturbed()
	return c.rep, nil
}

// verdict is Options.Verdict, or its default, among the categories
// compared.
func (c *comparer) verdict() []Category {
	v := c.opts.Verdict
	if len(v) == 0 {
		v = AllCategories
		if c.a.nWrites+c.b.nWrites > 0 {
			v = DefaultVerdict
		}
		if len(c.rep.Perturbations) > 0 {
			v = PerturbedVerdict
		}
	}
	var out []Category
	for _, cat := range AllCategories {
		if slices.Contains(v, cat) && c.wants(cat) {
			out = append(out, cat)
		}
	}
	if len(out) == 0 { // Only named none of the default's
		for _, cat := range AllCategories {
			if c.wants(cat) {
				out = append(out, cat)
			}
		}
	}
	return out
}

// of returns the counts of a category.
func (s *Summary) of(cat Category) Counts {
	switch cat {
	case CategoryState:
		return s.State
	case CategoryWrite:
		return s.Writes
	case CategoryEvent:
		return s.Events
	case CategoryStream:
		return s.Streams
	case CategoryExchange:
		return s.Exchanges
	}
	return Counts{}
}

// pairing lists the generated names of both sessions by canonical name.
func pairing(a, b *names) []Pair {
	var out []Pair
	at := map[Object]int{}
	for _, g := range a.made {
		id := g.exchange
		at[g.obj] = len(out)
		out = append(out, Pair{Object: g.obj, A: g.server, ExchangeA: &id})
	}
	for _, g := range b.made {
		id := g.exchange
		if i, ok := at[g.obj]; ok {
			out[i].B, out[i].ExchangeB = g.server, &id
			continue
		}
		out = append(out, Pair{Object: g.obj, B: g.server, ExchangeB: &id})
	}
	return out
}

// comparer holds one comparison's state. Not safe for concurrent use.
type comparer struct {
	opts        Options
	rules       *rules
	hasher      *hasher
	seed        maphash.Seed
	tolerance   time.Duration
	maxBody     int64
	maxList     int
	window      int
	windowBytes int64
	a, b        *side
	rep         *Report
	groups      map[string]int // subject → index in rep.Groups
	listed      int
	warned      map[string]bool
	// madeAndGone are the objects one session's clients created and
	// deleted and the other's never wrote: both worlds end without them
	// (perturbed.go).
	madeAndGone map[Object]bool
}

func newComparer(opts Options) (*comparer, error) {
	r, err := newRules(opts.Ignore)
	if err != nil {
		return nil, err
	}
	for _, list := range [][]Category{opts.Only, opts.Verdict} {
		for _, cat := range list {
			if !slices.Contains(AllCategories, cat) {
				return nil, fmt.Errorf("%w %q (state, write, event, stream, exchange)", ErrCategory, cat)
			}
		}
	}
	c := &comparer{opts: opts, rules: r, seed: maphash.MakeSeed(), groups: map[string]int{}, warned: map[string]bool{}}
	c.hasher = newHasher(r, c.seed)
	c.tolerance = cmp.Or(opts.TimeTolerance, DefaultTimeTolerance)
	c.maxBody = positiveOr(opts.MaxBodySize, DefaultMaxBodySize)
	c.maxList = cmp.Or(opts.MaxDifferences, DefaultMaxDifferences)
	c.window = positiveOr(opts.Window, DefaultWindow)
	c.windowBytes = positiveOr(opts.WindowBytes, DefaultWindowBytes)
	return c, nil
}

// positiveOr is v, or def if v is not positive.
func positiveOr[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (c *comparer) wants(cat Category) bool {
	return len(c.opts.Only) == 0 || slices.Contains(c.opts.Only, cat)
}

// listing reports whether one more difference may be listed; if not, it
// is counted as omitted. Callers check before doing the work a listed
// difference needs (reading bodies again for a diff).
func (c *comparer) listing() bool {
	if c.maxList < 0 || c.listed >= c.maxList {
		c.rep.Omitted++
		return false
	}
	return true
}

// add lists difference d under subject (an object if obj is not nil).
// Call it only after listing said yes.
func (c *comparer) add(subject string, obj *Object, d Difference) {
	c.listed++
	i, ok := c.groups[subject]
	if !ok {
		i = len(c.rep.Groups)
		c.groups[subject] = i
		g := Group{Subject: subject}
		if obj != nil {
			o := *obj
			g.Object = &o
		}
		c.rep.Groups = append(c.rep.Groups, g)
	}
	c.rep.Groups[i].Differences = append(c.rep.Groups[i].Differences, d)
}

// warn adds a warning once.
func (c *comparer) warn(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if !c.warned[s] && len(c.warned) < 100 {
		c.warned[s] = true
		c.rep.Warnings = append(c.rep.Warnings, s)
	}
}

// rawHash hashes bytes as they stream by.
type rawHash struct{ h *maphash.Hash }

func (c *comparer) newRawHash() rawHash {
	h := &maphash.Hash{}
	h.SetSeed(c.seed)
	return rawHash{h}
}

func (r rawHash) write(p []byte) { r.h.Write(p) }
func (r rawHash) sum() uint64    { return r.h.Sum64() }
