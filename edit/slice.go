package edit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// SliceOptions configure Slice. The zero value of a filter keeps
// everything: no From, no To, every namespace, resource and exchange.
type SliceOptions struct {
	// Output is the slice's session file (Path, or Out for a stream). Its
	// Meta, if Meta.Tool is empty, is the input's with the labels of the
	// slice (see Slice).
	Output formats.FileSinkOptions
	// From and To bound the window, capture times in Unix ns (see
	// ParseTime); 0 leaves that side open.
	From, To int64
	// Namespaces keeps only these namespaces' objects.
	Namespaces []string
	// Resources keeps only these resources: "configmaps", or
	// "deployments.apps" with the group.
	Resources []string
	// Exchanges keeps only these exchanges (numbers of the input).
	Exchanges []int64
	// Tool names the slicing tool in the Meta's "sliced-by" label.
	Tool string
	// StateBytes bounds the object bytes held to rebuild the world at
	// From (see world.Options.MaxBytes); 0 means world.DefaultMaxBytes.
	StateBytes int64
}

// SliceResult says what Slice did.
type SliceResult struct {
	// Records is the number of records written (Meta and Summary
	// excepted); Exchanges the exchanges written, synthesized ones
	// included.
	Records   int64
	Exchanges int
	// Cut is the number of watches cut at From, each started from the
	// world at that moment; Synthesized the LISTs made for them.
	Cut, Synthesized int
	// Notes say what the user should know (a cut watch whose world could
	// not be rebuilt).
	Notes []string
	// Damage lists the damaged regions of the input that could not be
	// read.
	Damage []error
	// Files are the session files written.
	Files []string
}

// Slice writes the part of session in that opts select as a session that
// stands alone, streaming: the input is read once in file order (plus,
// when watches are cut, once up to From to rebuild the world there).
//
// An exchange is kept when it began inside the window [From, To] and
// passes the filters. A watch that began before From and was still open
// at From is cut there: the slice starts it from the world as it was at
// From, the world of apiserver/world loaded from what the session shows
// before From, at the resourceVersion of the watch's last event before
// From (or the one it started from, without events):
//
//   - a watch from a resourceVersion (an informer's LIST then WATCH):
//     a LIST of its scope at that resourceVersion is synthesized on its
//     connection, and the watch is rewritten to start from it;
//   - a streaming list (sendInitialEvents=true): its initial ADDED events
//     are those of the world at that resourceVersion, then the
//     initial-events-end BOOKMARK.
//
// The watch then goes on with its recorded events after From, bytes and
// times as recorded, renumbered. Exchanges that ended before From are
// dropped; the records of connections open at From are moved to From. At
// To the slice ends as a capture would: what comes later is dropped,
// exchanges still open end truncated at To, connections stay open.
//
// Namespaces: requests of another namespace are dropped; from collections
// of every namespace (a cluster-wide LIST or watch) the events and items
// of other namespaces are dropped; objects of cluster-scoped resources
// are dropped, Namespace objects excepted for the namespaces kept.
// Non-resource requests (discovery, /version) are kept. Connections and
// exchanges are numbered anew, from 0, in the order they are written.
//
// The Meta is the input's, with labels "sliced-from" (the input's base
// name), "slice-from", "slice-to" (RFC 3339), "slice-namespaces",
// "slice-resources", "slice-exchanges" and "sliced-by".
//
// Memory: the input's index, the objects the session shows before From
// (only when a watch is cut; bounded by StateBytes), and one LIST body at
// a time when items are filtered.
func Slice(ctx context.Context, in string, opts SliceOptions) (SliceResult, error) {
	f, err := formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		return SliceResult{}, fmt.Errorf("edit: %w", err) // a *formats.OpenError: it names in
	}
	defer f.Close()
	return SliceFile(ctx, f, in, opts)
}

// SliceFile is Slice of the open session f, named in (for its Meta's
// labels and errors): a caller that opened the file already (to read the
// window from its index) does not open it again. The caller keeps f.
func SliceFile(ctx context.Context, f *formats.File, in string, opts SliceOptions) (SliceResult, error) {
	var res SliceResult
	if opts.To != 0 && opts.From != 0 && opts.To < opts.From {
		return res, errors.New("edit: the window ends before it starts")
	}
	s := &slicer{opts: opts, in: in, f: f, res: &res, plans: map[int64]*exPlan{}, conns: map[uint64]*connPlan{},
		ids: &numbering{conns: map[connKey]uint64{}, exchanges: map[exKey]int64{}}}
	s.plan()
	if err := s.loadWorld(); err != nil {
		return res, err
	}

	out := opts.Output
	out.Inputs = append(slices.Clip(out.Inputs), in)
	if out.Meta.Tool == "" {
		out.Meta = s.meta()
	}
	out.Totals = func() formats.Totals { return formats.Totals{Last: s.last} }
	sink, err := formats.NewFileSink(out)
	if err != nil {
		return res, err
	}
	s.sink = sink
	werr := s.writePrefix()
	if werr == nil {
		werr = s.copyRecords(ctx)
	}
	if werr == nil {
		werr = s.finish()
	}
	res.Files, err = closeSink(sink, formats.Ending{}, werr)
	return res, err
}

// exPlan is what Slice does with one exchange of the input.
type exPlan struct {
	info     *formats.ExchangeInfo
	conn     uint64
	cut      bool // a watch cut at From
	nsFilter bool // a collection of every namespace: items and events filtered
	rewrite  bool // a watch whose body is rewritten (cut, filtered)
	list     bool // an opaque LIST body filtered by namespace
	format   frame.Format

	// Cut watches.
	target    world.Target
	query     url.Values
	streaming bool
	rv        uint64 // resourceVersion of the world it starts from
	hasRV     bool

	// Writing.
	wroteResp, wroteEnd bool
	off, seq            int64 // rewritten body: next offset and event number
	size                int64 // bytes of the response body written (passed through)
	body                []byte
}

// connPlan is what Slice does with one connection.
type connPlan struct {
	info  *formats.ConnInfo
	early bool // began before From: announced at From
}

type slicer struct {
	opts  SliceOptions
	in    string
	f     *formats.File
	res   *SliceResult
	plans map[int64]*exPlan
	conns map[uint64]*connPlan
	cuts  []*exPlan
	world *world.Store
	sink  *formats.FileSink
	ids   *numbering
	synth int64 // synthesized exchanges so far
	last  int64 // time of the last record written
}

// plan decides, from the index, which exchanges and connections are kept.
func (s *slicer) plan() {
	idx := s.f.Index()
	connOf := map[int64]uint64{}
	for i := range idx.Conns {
		c := &idx.Conns[i]
		for _, id := range c.Exchanges {
			connOf[id] = c.Conn.ID
		}
	}
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		p := s.planExchange(x)
		if p == nil {
			continue
		}
		c, ok := connOf[x.Request.Exchange]
		if !ok {
			c = x.Request.Conn
		}
		p.conn = c
		s.plans[x.Request.Exchange] = p
		if p.cut {
			s.cuts = append(s.cuts, p)
		}
	}
	for i := range idx.Conns {
		c := &idx.Conns[i]
		for _, id := range c.Exchanges {
			if s.plans[id] != nil {
				s.conns[c.Conn.ID] = &connPlan{info: c, early: s.opts.From != 0 && c.Conn.Time < s.opts.From}
				break
			}
		}
	}
}

// planExchange is the plan of exchange x, nil to drop it.
func (s *slicer) planExchange(x *formats.ExchangeInfo) *exPlan {
	o := &s.opts
	id := x.Request.Exchange
	if len(o.Exchanges) > 0 && !slices.Contains(o.Exchanges, id) {
		return nil
	}
	start := x.Request.Time
	if x.Request.Missing {
		start = x.First
	}
	if o.To != 0 && start > o.To {
		return nil
	}
	p := &exPlan{info: x}
	if x.Response != nil {
		p.format = x.Response.Events
	}
	watch := p.format == frame.JSON || p.format == frame.Protobuf
	if o.From != 0 && start < o.From {
		if !watch || x.Request.Missing || x.Response.Status != http.StatusOK || (x.End != nil && x.End.Time < o.From) {
			return nil
		}
		p.cut = true
	}
	if x.Request.Missing {
		if len(o.Namespaces) > 0 || len(o.Resources) > 0 {
			return nil
		}
		return p
	}
	req, err := apipath.Parse(x.Request.Method, x.Request.Target)
	if err != nil {
		return nil
	}
	t, ok := world.TargetOf(req)
	if !ok {
		if p.cut {
			return nil
		}
		return p // discovery, /version: no objects
	}
	p.target, p.query = t, req.Query
	if len(o.Resources) > 0 && !s.resourceKept(t.Resource) {
		return nil
	}
	if len(o.Namespaces) > 0 {
		switch {
		case t.Namespace != "":
			if !slices.Contains(o.Namespaces, t.Namespace) {
				return nil
			}
		case t.Resource.Resource == "namespaces" && t.Name != "":
			if !slices.Contains(o.Namespaces, t.Name) {
				return nil
			}
		case t.Collection() && t.Subresource == "" && x.Request.Method == http.MethodGet:
			p.nsFilter = true
		default:
			return nil
		}
	}
	p.streaming, _ = strconv.ParseBool(p.query.Get("sendInitialEvents"))
	p.rewrite = watch && (p.cut || p.nsFilter)
	p.list = !watch && p.nsFilter && x.Response != nil && x.Response.Status == http.StatusOK
	return p
}

func (s *slicer) resourceKept(r world.Resource) bool {
	for _, want := range s.opts.Resources {
		name, group, _ := strings.Cut(want, ".")
		if name == r.Resource && (group == "" || group == r.Group) {
			return true
		}
	}
	return false
}

// objectKept reports whether an object of namespace ns (kind, name) is
// kept by the namespace filter.
func (s *slicer) objectKept(ns, kind, name string) bool {
	if len(s.opts.Namespaces) == 0 {
		return true
	}
	if ns == "" && kind == "Namespace" {
		return slices.Contains(s.opts.Namespaces, name)
	}
	return slices.Contains(s.opts.Namespaces, ns)
}

// write writes r (its numbers already the output's).
func (s *slicer) write(r formats.Record) error {
	if t := recordTime(r); t > s.last {
		s.last = t
	}
	s.res.Records++
	return s.sink.Write(r)
}

// clamp moves a time before From to From.
func (s *slicer) clamp(t int64) int64 {
	return max(t, s.opts.From)
}

// after reports whether t is past the window.
func (s *slicer) after(t int64) bool {
	return s.opts.To != 0 && t > s.opts.To
}

func (s *slicer) exID(id int64) int64 {
	n := len(s.ids.exchanges)
	v := s.ids.exchange(0, id)
	if len(s.ids.exchanges) > n {
		s.res.Exchanges++
	}
	return v
}

// ParseTime reads a point of a session for --from and --to: a duration
// after the session's start ("90s", "42m"), or an RFC 3339 time.
func ParseTime(s string, start int64) (int64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("edit: %q: a duration after the session's start cannot be negative", s)
		}
		return start + int64(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("edit: %q: want a duration after the session's start (90s, 42m) or an RFC 3339 time (2026-11-21T10:42:00Z)", s)
	}
	return t.UnixNano(), nil
}

// Start is the capture time a session starts at: its first connection's
// or exchange's, 0 for an empty session.
func Start(idx *formats.Index) int64 {
	var t int64
	for _, c := range idx.Conns {
		if c.Conn.Time != 0 && (t == 0 || c.Conn.Time < t) {
			t = c.Conn.Time
		}
	}
	for _, x := range idx.Exchanges {
		if x.First != 0 && (t == 0 || x.First < t) {
			t = x.First
		}
	}
	return t
}
