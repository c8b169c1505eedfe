package edit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
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
	var res SliceResult
	if opts.To != 0 && opts.From != 0 && opts.To < opts.From {
		return res, errors.New("edit: the window ends before it starts")
	}
	f, err := formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		return res, fmt.Errorf("edit: %s: %w", in, err)
	}
	defer f.Close()
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

// cutPoints finds the resourceVersion each cut watch starts from: its
// last event's before From, or the one it was started from.
func (s *slicer) cutPoints() error {
	if len(s.cuts) == 0 {
		return nil
	}
	open := map[int64]*exPlan{}
	var ids []int64
	for _, p := range s.cuts {
		id := p.info.Request.Exchange
		open[id] = p
		ids = append(ids, id)
		if n, err := strconv.ParseUint(p.query.Get("resourceVersion"), 10, 64); err == nil && n > 0 && !p.streaming {
			p.rv, p.hasRV = n, true
		}
	}
	// The frames of each before From, newest last: only those after the
	// last one with a resourceVersion need reading back.
	last := map[int64][][]byte{}
	done := func(p *exPlan) {
		fs := last[p.info.Request.Exchange]
		for i := len(fs) - 1; i >= 0; i-- {
			m, err := frame.Peek(p.format, fs[i])
			if err != nil || m.Type == "ERROR" {
				continue
			}
			if n, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil && n > 0 {
				p.rv, p.hasRV = n, true
				break
			}
		}
		delete(last, p.info.Request.Exchange)
		delete(open, p.info.Request.Exchange)
	}
	sc := s.f.ExchangeRecords(ids...).WithCache(nil) // one pass: nothing to keep
	for len(open) > 0 {
		rec, err := sc.NextIntact(nil) // copyRecords reports the damage
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("edit: %s: %w", s.in, err)
		}
		fr, ok := rec.(*formats.Frame)
		if !ok {
			continue
		}
		p := open[fr.Exchange]
		if p == nil {
			continue
		}
		if fr.Time >= s.opts.From {
			done(p)
			continue
		}
		// Keep the newest few: an ERROR or a frame without a
		// resourceVersion is rare, and never many in a row.
		fs := append(last[fr.Exchange], fr.Data)
		if len(fs) > 8 {
			fs = fs[len(fs)-8:]
		}
		last[fr.Exchange] = fs
	}
	for _, p := range open {
		done(p)
	}
	return nil
}

// loadWorld loads the world as the session shows it before From, for the
// cut watches, while cutPoints reads where each was at From: two passes
// over the session's blocks, side by side.
func (s *slicer) loadWorld() error {
	if len(s.cuts) == 0 {
		return nil
	}
	var st *world.Store
	var loadErr error
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		st, loadErr = world.Load(s.f, world.Options{Until: s.opts.From, MaxBytes: s.opts.StateBytes})
	}()
	cutErr := s.cutPoints()
	<-loaded
	if cutErr != nil {
		return cutErr
	}
	if loadErr != nil {
		return fmt.Errorf("edit: the world at the start of the slice: %w", loadErr)
	}
	var top uint64
	for _, p := range s.cuts {
		if p.hasRV {
			top = max(top, p.rv)
		}
	}
	if top > 0 {
		st.Observe(strconv.FormatUint(top, 10))
	}
	s.world = st
	return nil
}

// meta is the slice's Meta.
func (s *slicer) meta() formats.Meta {
	var m formats.Meta
	if im := s.f.Index().Meta; im != nil {
		m = *im
	}
	labels := map[string]string{}
	for k, v := range m.Labels {
		if k != "part" && k != "previous" {
			labels[k] = v
		}
	}
	m.Labels = labels
	m.Labels["sliced-from"] = filepath.Base(s.in)
	if s.opts.Tool != "" {
		m.Labels["sliced-by"] = s.opts.Tool
	}
	if s.opts.From != 0 {
		m.Labels["slice-from"] = time.Unix(0, s.opts.From).UTC().Format(time.RFC3339Nano)
	}
	if s.opts.To != 0 {
		m.Labels["slice-to"] = time.Unix(0, s.opts.To).UTC().Format(time.RFC3339Nano)
	}
	if len(s.opts.Namespaces) > 0 {
		m.Labels["slice-namespaces"] = strings.Join(s.opts.Namespaces, ",")
	}
	if len(s.opts.Resources) > 0 {
		m.Labels["slice-resources"] = strings.Join(s.opts.Resources, ",")
	}
	if len(s.opts.Exchanges) > 0 {
		var xs []string
		for _, x := range s.opts.Exchanges {
			xs = append(xs, strconv.FormatInt(x, 10))
		}
		m.Labels["slice-exchanges"] = strings.Join(xs, ",")
	}
	if m.Description != "" {
		m.Description = "slice of " + m.Description
	} else {
		m.Description = "slice of " + filepath.Base(s.in)
	}
	m.Recorded = 0
	return m
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

// writePrefix writes, at From, the connections open then and the start
// of every cut watch.
func (s *slicer) writePrefix() error {
	if s.opts.From == 0 {
		return nil
	}
	for _, c := range s.f.Index().Conns {
		cp := s.conns[c.Conn.ID]
		if cp == nil || !cp.early {
			continue
		}
		cr := c.Conn
		cr.ID = s.ids.conn(0, cr.ID)
		cr.Time = s.clamp(cr.Time)
		if err := s.write(&cr); err != nil {
			return err
		}
		if c.TLS != nil && c.TLS.Time < s.opts.From {
			tr := *c.TLS
			tr.Conn, tr.Time = cr.ID, s.clamp(tr.Time)
			if err := s.write(&tr); err != nil {
				return err
			}
		}
	}
	for _, p := range s.cuts {
		if err := s.startCut(p); err != nil {
			return err
		}
	}
	return nil
}

// startCut writes the start of cut watch p: a synthesized LIST and the
// watch from its resourceVersion, or a streaming list's initial events.
func (s *slicer) startCut(p *exPlan) error {
	s.res.Cut++
	x := p.info
	at := s.opts.From
	conn := s.ids.conn(0, p.conn)
	var items *frame.List
	if p.hasRV {
		body, ctype, err := s.worldList(p)
		if err != nil {
			s.res.Notes = append(s.res.Notes, fmt.Sprintf("exchange %d (%s): the world at %d could not be listed (%v); the watch goes on from its recorded start",
				x.Request.Exchange, x.Request.Target, p.rv, err))
		} else if p.streaming {
			l, err := frame.ListItems(p.format, body)
			if err != nil {
				return fmt.Errorf("edit: the world's list for exchange %d: %w", x.Request.Exchange, err)
			}
			items = &l
		} else if err := s.synthList(p, conn, body, ctype); err != nil {
			return err
		}
	} else {
		s.res.Notes = append(s.res.Notes, fmt.Sprintf("exchange %d (%s): no resourceVersion before the cut; the watch goes on from its recorded start",
			x.Request.Exchange, x.Request.Target))
	}
	id := s.exID(x.Request.Exchange)
	req := x.Request
	req.Exchange, req.Conn, req.Time = id, conn, at
	if p.hasRV && !p.streaming {
		q := p.query
		q.Set("resourceVersion", strconv.FormatUint(p.rv, 10))
		req.Target = rewriteQuery(req.Target, q)
	}
	if err := s.write(&req); err != nil {
		return err
	}
	if e := x.RequestEnd; e != nil {
		re := *e
		re.Exchange, re.Time = id, s.clamp(re.Time)
		if err := s.write(&re); err != nil {
			return err
		}
	}
	resp := *x.Response
	resp.Exchange, resp.Time = id, at
	if err := s.write(&resp); err != nil {
		return err
	}
	p.wroteResp = true
	if items == nil {
		return nil
	}
	kind := strings.TrimSuffix(items.Kind, "List")
	for _, it := range items.Items {
		ev := frame.WatchEvent(p.format, "ADDED", items.APIVersion, kind, it)
		if err := s.writeFrame(p, id, at, nil, ev, nil); err != nil {
			return err
		}
	}
	gvk := schema.FromAPIVersionAndKind(items.APIVersion, kind)
	bm, err := codec.EndBookmark(p.format, gvk, strconv.FormatUint(p.rv, 10))
	if err != nil {
		return fmt.Errorf("edit: the initial-events-end bookmark of exchange %d: %w", x.Request.Exchange, err)
	}
	return s.writeFrame(p, id, at, nil, bm, nil)
}

// listQuery is the query of the LIST of cut watch p's scope in the world
// at p.rv: its selectors, that exact resourceVersion.
func (p *exPlan) listQuery() url.Values {
	q := url.Values{}
	for _, k := range []string{"labelSelector", "fieldSelector"} {
		if v := p.query.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	q.Set("resourceVersion", strconv.FormatUint(p.rv, 10))
	q.Set("resourceVersionMatch", "Exact")
	return q
}

// worldList is the LIST of cut watch p's scope in the world at p.rv, in
// the watch's format, filtered by namespace.
func (s *slicer) worldList(p *exPlan) (body []byte, ctype string, err error) {
	q := p.listQuery()
	accept := codec.MediaJSON
	if p.format == frame.Protobuf {
		accept = codec.MediaProtobuf
	}
	t := p.target
	t.Watch = false
	resp, ok := s.world.Serve(&world.Request{Method: http.MethodGet, Path: t.Path(), Query: q, Header: http.Header{"Accept": {accept}}})
	if !ok {
		return nil, "", errors.New("not a resource the world holds")
	}
	if resp.Code != http.StatusOK {
		return nil, "", fmt.Errorf("%d %s", resp.Code, bytes.TrimSpace(resp.Body))
	}
	body = resp.Body
	if p.nsFilter {
		if body, err = s.filterList(p.format, body); err != nil {
			return nil, "", err
		}
	}
	return body, resp.ContentType, nil
}

// synthList writes a LIST exchange of cut watch p at From, on its
// connection: the world's body.
func (s *slicer) synthList(p *exPlan, conn uint64, body []byte, ctype string) error {
	x := p.info
	at := s.opts.From
	s.synth++
	s.res.Synthesized++
	id := s.exID(-1 - s.synth)
	q := p.listQuery()
	path, _, _ := strings.Cut(x.Request.Target, "?")
	req := formats.Request{Exchange: id, Conn: conn, Stream: s.synthStream(p), Time: at, Method: http.MethodGet,
		Target: path + "?" + q.Encode(), Proto: x.Request.Proto, Header: x.Request.Header}
	resp := formats.Response{Exchange: id, Time: at, Proto: x.Response.Proto, Status: http.StatusOK, Reason: "OK",
		Header:  []formats.Header{{Name: "Content-Type", Value: ctype}, {Name: "Content-Length", Value: strconv.Itoa(len(body))}},
		Framing: formats.FramingLength, Events: frame.Unknown}
	if x.Response.Framing == formats.FramingH2 {
		resp.Framing = formats.FramingH2
		resp.Header = resp.Header[:1]
	}
	recs := []formats.Record{&req,
		&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: at},
		&resp,
		&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: at, Data: body},
		&formats.End{Exchange: id, Dir: formats.ServerToClient, Time: at, Size: int64(len(body))}}
	for _, r := range recs {
		if err := s.write(r); err != nil {
			return err
		}
	}
	return nil
}

// synthStream is the HTTP/2 stream of a LIST synthesized for p: an odd
// number no exchange of its connection uses (0 over HTTP/1.1).
func (s *slicer) synthStream(p *exPlan) uint32 {
	if p.info.Request.Stream == 0 {
		return 0
	}
	var top uint32
	if c := s.conns[p.conn]; c != nil {
		for _, id := range c.info.Exchanges {
			if x := s.f.Exchange(id); x != nil {
				top = max(top, x.Request.Stream)
			}
		}
	}
	return top + 2*uint32(s.synth) + (top+1)%2
}

// rewriteQuery replaces the query of target.
func rewriteQuery(target string, q url.Values) string {
	path, _, _ := strings.Cut(target, "?")
	return path + "?" + q.Encode()
}

// filterList keeps the items of a LIST body that the namespace filter
// keeps.
func (s *slicer) filterList(f frame.Format, body []byte) ([]byte, error) {
	l, err := frame.ListItems(f, body)
	if err != nil {
		return nil, err
	}
	kind := strings.TrimSuffix(l.Kind, "List")
	var keep [][]byte
	for _, it := range l.Items {
		m, err := frame.PeekObject(f, l.APIVersion, kind, it)
		if err != nil {
			return nil, err
		}
		if s.objectKept(m.Namespace, m.Kind, m.Name) {
			keep = append(keep, it)
		}
	}
	return frame.BuildList(f, l.APIVersion, l.Kind, l.ResourceVersion, keep), nil
}

// writeFrame writes an event of rewritten watch p (output number id):
// Pre, or the framing of its format when pre is nil, then data, and a
// chunk of its own.
func (s *slicer) writeFrame(p *exPlan, id, t int64, pre, data []byte, redacted []int) error {
	if pre == nil {
		switch p.format {
		case frame.Protobuf:
			pre = binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		default:
			if p.off > 0 {
				pre = []byte("\n")
			}
		}
	} else if p.format == frame.JSON && p.off == 0 {
		pre = nil // a body starts with its first event
	} else if p.format == frame.JSON && len(pre) == 0 {
		pre = []byte("\n")
	}
	fr := &formats.Frame{Exchange: id, Seq: p.seq, Time: t, Offset: p.off, Pre: pre, Data: data, Redacted: redacted}
	n := int64(len(pre) + len(data))
	if err := s.write(fr); err != nil {
		return err
	}
	if p.chunked() {
		if err := s.write(&formats.Chunk{Exchange: id, Time: t, Offset: p.off, Size: n}); err != nil {
			return err
		}
	}
	p.seq++
	p.off += n
	return nil
}

// chunked reports whether rewritten watch p gets a chunk per event: its
// body was chunked (HTTP/1.1 or HTTP/2 DATA frames) and not compressed
// (chunks count compressed bytes, which a rewritten body no longer has).
func (p *exPlan) chunked() bool {
	r := p.info.Response
	return (r.Framing == formats.FramingChunked || r.Framing == formats.FramingH2) && r.Encoding == ""
}

// copyRecords reads the input in file order and writes what the slice
// keeps.
func (s *slicer) copyRecords(ctx context.Context) error {
	// Nothing before From is copied (what a cut watch needs of it is in
	// the prefix, from the index and the world): the blocks that end
	// before it are not read.
	sc := s.f.Records()
	if s.opts.From != 0 {
		sc = s.f.RecordsFrom(s.opts.From)
	}
	n := 0
	for r, err := range sc.Intact(s.damage) {
		if err != nil {
			return fmt.Errorf("edit: %s: %w", s.in, err)
		}
		if n++; n%4096 == 0 {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
		}
		if err := s.record(r); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// damage notes a damaged region of the input, which the slice lacks.
func (s *slicer) damage(d *formats.DamageError) {
	s.res.Damage = append(s.res.Damage, fmt.Errorf("%s: %w", s.in, d))
}

// record writes what the slice keeps of input record r.
func (s *slicer) record(r formats.Record) error {
	switch r := r.(type) {
	case *formats.Conn:
		c := s.conns[r.ID]
		if c == nil || c.early {
			return nil
		}
		r.ID = s.ids.conn(0, r.ID)
		return s.write(r)
	case *formats.TLS:
		c := s.conns[r.Conn]
		if c == nil || (c.early && r.Time < s.opts.From) || s.after(r.Time) {
			return nil
		}
		r.Conn, r.Time = s.ids.conn(0, r.Conn), s.clamp(r.Time)
		return s.write(r)
	case *formats.ConnEnd:
		if s.conns[r.Conn] == nil || s.after(r.Time) {
			return nil
		}
		r.Conn, r.Time = s.ids.conn(0, r.Conn), s.clamp(r.Time)
		return s.write(r)
	case *formats.Anomaly:
		if s.conns[r.Conn] == nil || r.Time < s.opts.From || s.after(r.Time) {
			return nil
		}
		if r.Exchange != formats.NoExchange {
			if p := s.plans[r.Exchange]; p == nil || p.cut {
				return nil
			}
			r.Exchange = s.exID(r.Exchange)
		}
		r.Conn = s.ids.conn(0, r.Conn)
		return s.write(r)
	case *formats.Request:
		p := s.plans[r.Exchange]
		if p == nil || p.cut {
			return nil
		}
		r.Exchange, r.Conn = s.exID(r.Exchange), s.ids.conn(0, p.conn)
		return s.write(r)
	case *formats.Response:
		p := s.plans[r.Exchange]
		if p == nil || p.cut || s.after(r.Time) {
			return nil
		}
		if p.list && strings.EqualFold(r.Encoding, "gzip") {
			r.Encoding = ""
		}
		if p.list {
			r.Header = slices.DeleteFunc(slices.Clone(r.Header), func(h formats.Header) bool {
				return strings.EqualFold(h.Name, "Content-Length") || strings.EqualFold(h.Name, "Content-Encoding")
			})
		}
		r.Exchange = s.exID(r.Exchange)
		p.wroteResp = true
		return s.write(r)
	case *formats.Body:
		p := s.plans[r.Exchange]
		if p == nil || p.cut || s.after(r.Time) {
			return nil
		}
		if r.Dir == formats.ServerToClient {
			if p.list {
				if int64(len(p.body))+int64(len(r.Data)) > maxListBody {
					return fmt.Errorf("edit: exchange %d: a LIST body over %d bytes", r.Exchange, maxListBody)
				}
				p.body = append(p.body, r.Data...)
				return nil
			}
			p.size = r.Offset + int64(len(r.Data))
		}
		r.Exchange = s.exID(r.Exchange)
		return s.write(r)
	case *formats.Frame:
		p := s.plans[r.Exchange]
		if p == nil || s.after(r.Time) || r.Time < s.opts.From {
			return nil
		}
		if !p.rewrite {
			p.size = r.Offset + int64(len(r.Pre)+len(r.Data))
			r.Exchange = s.exID(r.Exchange)
			return s.write(r)
		}
		if p.nsFilter {
			m, err := frame.Peek(p.format, r.Data)
			if err == nil && m.Type != "BOOKMARK" && m.Type != "ERROR" && !s.objectKept(m.Namespace, m.Kind, m.Name) {
				return nil
			}
		}
		pre := r.Pre
		if p.format == frame.JSON && pre == nil {
			pre = []byte{}
		}
		return s.writeFrame(p, s.exID(r.Exchange), r.Time, pre, r.Data, r.Redacted)
	case *formats.Chunk:
		p := s.plans[r.Exchange]
		if p == nil || p.rewrite || p.list || p.cut || s.after(r.Time) {
			return nil
		}
		r.Exchange = s.exID(r.Exchange)
		return s.write(r)
	case *formats.End:
		p := s.plans[r.Exchange]
		if p == nil || s.after(r.Time) {
			return nil
		}
		if r.Dir != formats.ServerToClient {
			if p.cut {
				return nil
			}
			r.Exchange = s.exID(r.Exchange)
			return s.write(r)
		}
		if !p.wroteResp {
			return nil
		}
		id := s.exID(r.Exchange)
		r.Exchange, r.Time = id, s.clamp(r.Time)
		p.wroteEnd = true
		switch {
		case p.rewrite:
			if len(r.Tail) > 0 {
				if p.chunked() {
					if err := s.write(&formats.Chunk{Exchange: id, Time: r.Time, Offset: p.off, Size: int64(len(r.Tail))}); err != nil {
						return err
					}
				}
			}
			r.Size = p.off + int64(len(r.Tail))
		case p.list:
			body, err := s.listBody(p)
			if err != nil {
				s.res.Notes = append(s.res.Notes, fmt.Sprintf("exchange %d (%s): its items could not be filtered by namespace (%v); its body is left out",
					p.info.Request.Exchange, p.info.Request.Target, err))
				body = nil
				r.Status = formats.EndError
				r.Note = "sliced: body left out"
			} else if err := s.write(&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: r.Time, Data: body}); err != nil {
				return err
			}
			r.Size = int64(len(body))
			p.body = nil
		}
		return s.write(r)
	}
	return nil
}

// maxListBody bounds a LIST body held to filter its items (state's bound
// on a body it reads).
const maxListBody = 512 << 20

// listBody is the filtered body of opaque LIST p (decoded if gzip'd).
func (s *slicer) listBody(p *exPlan) ([]byte, error) {
	b := p.body
	if strings.EqualFold(p.info.Response.Encoding, "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if b, err = io.ReadAll(io.LimitReader(zr, maxListBody+1)); err != nil {
			return nil, err
		}
		if len(b) > maxListBody {
			return nil, fmt.Errorf("decodes to more than %d bytes", maxListBody)
		}
	} else if p.info.Response.Encoding != "" {
		return nil, fmt.Errorf("content encoding %q", p.info.Response.Encoding)
	}
	f := frame.Unknown
	for _, h := range p.info.Response.Header {
		if strings.EqualFold(h.Name, "Content-Type") {
			f = frame.FormatOf(h.Value, false)
		}
	}
	if f != frame.JSON && f != frame.Protobuf {
		return nil, errors.New("not a JSON or protobuf body")
	}
	return s.filterList(f, b)
}

// finish ends, truncated at To, the exchanges still open there.
func (s *slicer) finish() error {
	ids := make([]int64, 0, len(s.plans))
	for id, p := range s.plans {
		if p.wroteResp && !p.wroteEnd {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := s.plans[id]
		t := s.opts.To
		if t == 0 {
			continue // the input ended first: as it did
		}
		size := p.size
		if p.rewrite {
			size = p.off
		}
		if err := s.write(&formats.End{Exchange: s.exID(id), Dir: formats.ServerToClient, Time: t, Status: formats.EndTruncated,
			Size: size, Note: "sliced: the slice ends here"}); err != nil {
			return err
		}
	}
	return nil
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
