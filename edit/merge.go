package edit

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// MergeOptions configure Merge.
type MergeOptions struct {
	// Output is the merged session file (Path, or Out for a stream). Its
	// Meta, if Meta.Tool is empty, is built from the inputs' (see Merge);
	// Totals is set by Merge.
	Output formats.FileSinkOptions
	// Tool names the merging tool ("wtrace v0.3.0") in the merged Meta's
	// "merged-by" label.
	Tool string
}

// MergeResult says what Merge did.
type MergeResult struct {
	// Recordings are the inputs as Merge grouped them: each the parts of
	// one recording, in order (one part for a recording that was not
	// rotated).
	Recordings [][]string
	// Records is the number of records written (Meta and Summary
	// excepted); Announced the records of rotated parts dropped because
	// they announced again what the part before them had announced.
	Records, Announced int64
	// Renumbered is true when the connections and exchanges of several
	// recordings were numbered anew (in the order they appear).
	Renumbered bool
	// Damage lists the damaged regions of the inputs that could not be
	// read (each a *formats.DamageError, wrapped with the input's name).
	Damage []error
	// Notes say what the user should know: a part missing from a chain.
	Notes []string
	// Files are the session files written.
	Files []string
}

// Merge joins session files into one, streaming (memory: the index and one
// block of the part of each recording being read, and the connection and
// exchange numbers of each).
//
// Parts of one rotated recording (formats.FileSink with Rotate: each
// part's Meta labels "part" and "previous" name the part before it) are
// joined in order into one session: the connections and exchanges a part
// announces again at its start (copies of records of the part before it,
// as FileSink writes them) are dropped, so what was one connection is one
// again, and the records are what one unrotated recording of the same
// traffic would hold. Connection and exchange numbers are kept.
//
// Several recordings (of several apiservers, or one apiserver recorded
// twice) are interleaved by capture time, record by record, each
// recording's records kept in their order. Their connections stay apart:
// connections and exchanges are numbered anew, from 0, in the order they
// appear in the merged session.
//
// The merged Meta is the first recording's, with the labels "part" and
// "previous" removed and "merged" (the inputs' base names) and "merged-by"
// added; for several recordings its description joins theirs, its
// redaction is the weakest of theirs (headers-only if any kept Secret
// values) and it names no capture file. The Summary counts the merged
// records and adds up the inputs' packets and bytes.
//
// Damage in an input is skipped and listed in the result; an input that
// is not a session file, or the output, fails the merge.
func Merge(ctx context.Context, inputs []string, opts MergeOptions) (MergeResult, error) {
	var res MergeResult
	if len(inputs) == 0 {
		return res, errors.New("edit: nothing to merge")
	}
	// Each input's Meta and Summary come from its index; its records are
	// then read in one pass, as every reader of a session reads them
	// (damage numbered and skipped alike).
	var files []*part
	for _, in := range inputs {
		f, err := formats.Open(in, formats.ReaderOptions{})
		if err != nil {
			closeParts(files)
			return res, fmt.Errorf("edit: %w", err) // a *formats.OpenError: it names in
		}
		idx := f.Index()
		files = append(files, &part{name: in, file: f, meta: idx.Meta, summary: idx.Summary})
	}
	defer closeParts(files)
	chains, err := chainParts(files, &res)
	if err != nil {
		return res, err
	}
	for _, c := range chains {
		var names []string
		for _, p := range c {
			names = append(names, p.name)
		}
		res.Recordings = append(res.Recordings, names)
	}

	out := opts.Output
	out.Inputs = append(slices.Clip(out.Inputs), inputs...)
	if out.Meta.Tool == "" {
		out.Meta = mergedMeta(chains, opts.Tool)
	}
	var totals formats.Totals
	for _, p := range files {
		if s := p.summary; s != nil {
			totals.Packets += s.Packets
			totals.Bytes += s.Bytes
			totals.Last = max(totals.Last, s.Time)
		}
	}
	out.Totals = func() formats.Totals { return totals }
	sink, err := formats.NewFileSink(out)
	if err != nil {
		return res, err
	}
	res.Renumbered = len(chains) > 1
	werr := interleave(ctx, chains, sink, &res)
	end := formats.Ending{Note: mergedNote(chains)}
	if len(chains) == 1 {
		if s := chains[0][len(chains[0])-1].summary; s != nil {
			end.CaptureSHA256, end.CaptureXXH64 = s.CaptureSHA256, s.CaptureXXH64
		}
	}
	res.Files, err = closeSink(sink, end, werr)
	return res, err
}

// interleave writes the records of the recordings (chains) to sink by
// capture time, each recording's in its order, renumbered when there are
// several; it returns the error that ended it.
func interleave(ctx context.Context, chains [][]*part, sink *formats.FileSink, res *MergeResult) error {
	h := &streamHeap{}
	var streams []*stream
	for i, c := range chains {
		s := &stream{order: i, parts: c, pi: -1, renumber: res.Renumbered, res: res}
		streams = append(streams, s)
		if s.advance() {
			heap.Push(h, s)
		}
	}
	ids := &numbering{conns: map[connKey]uint64{}, exchanges: map[exKey]int64{}}
	var werr error
	for h.Len() > 0 && werr == nil {
		if res.Records%4096 == 0 {
			if ctx.Err() != nil {
				werr = context.Cause(ctx)
				break
			}
		}
		s := (*h)[0]
		r := s.next
		if s.renumber {
			ids.renumber(s.order, r)
		}
		if err := sink.Write(r); err != nil {
			werr = err
			break
		}
		res.Records++
		if s.advance() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	for _, s := range *h {
		s.close()
	}
	for _, s := range streams {
		if s.err != nil && werr == nil {
			werr = s.err
		}
	}
	return werr
}

// closeSink closes sink with end and returns the names of the files it
// wrote and the error of the run: werr, the error that ended the edit, if
// any — the output is then aborted (what its path held stays) and no file
// is named — else the error of the close.
func closeSink(sink *formats.FileSink, end formats.Ending, werr error) ([]string, error) {
	if werr != nil {
		sink.Abort()
		return nil, werr
	}
	cerr := sink.Close(end)
	return sink.Names(), cerr
}

// part is one input file.
type part struct {
	name    string
	file    *formats.File    // open from the first look at its index to the end of its records
	meta    *formats.Meta    // nil if the file lost it
	summary *formats.Summary // nil if the file was not closed cleanly
	number  int              // its "part" label, 0 if none
	prev    *part
	next    *part
}

// chainParts groups the inputs into recordings: a part whose "previous"
// label names another input (of the part number before it, in the same
// directory if several match) follows it. The recordings are in the order
// of their first parts among the inputs. Parts whose labels name each
// other in a circle (no first part: files copied or renamed into a loop)
// are an error naming the circle.
func chainParts(files []*part, res *MergeResult) ([][]*part, error) {
	for _, p := range files {
		if m := p.meta; m != nil {
			p.number, _ = strconv.Atoi(m.Labels["part"])
		}
	}
	for _, p := range files {
		m := p.meta
		if m == nil || m.Labels["previous"] == "" {
			continue
		}
		prev := m.Labels["previous"]
		var best *part
		for _, q := range files {
			if q.next != nil || filepath.Base(q.name) != prev || p.number != 0 && q.number != p.number-1 {
				continue
			}
			if best == nil || filepath.Dir(q.name) == filepath.Dir(p.name) {
				best = q
			}
		}
		if best == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s continues %s, which is not among the inputs: merged as a recording of its own (its first records announce again what %s held open)", p.name, prev, prev))
			continue
		}
		best.next, p.prev = p, best
	}
	var chains [][]*part
	chained := map[*part]bool{}
	for _, p := range files {
		if p.prev != nil {
			continue
		}
		var c []*part
		for q := p; q != nil; q = q.next {
			c = append(c, q)
			chained[q] = true
		}
		chains = append(chains, c)
	}
	// Each part has at most one part before it and one after it: a part no
	// chain reached lies on a circle.
	for _, p := range files {
		if chained[p] {
			continue
		}
		names := []string{p.name}
		for q := p.next; q != p; q = q.next {
			names = append(names, q.name)
		}
		names = append(names, p.name)
		if len(names) == 2 {
			return nil, fmt.Errorf("edit: %s names itself in its \"previous\" label (%s): it is not the first part of a recording; merge it alone, or leave it out", p.name, strings.Join(names, " → "))
		}
		return nil, fmt.Errorf("edit: the parts %s name each other in their \"previous\" labels, in a circle (%s): no part of it is the first of a recording; merge them one by one, or leave them out", strings.Join(names[:len(names)-1], ", "), strings.Join(names, " → "))
	}
	return chains, nil
}

// mergedMeta is the Meta of the merged session.
func mergedMeta(chains [][]*part, tool string) formats.Meta {
	var m formats.Meta
	if first := chains[0][0].meta; first != nil {
		m = *first
	}
	m.Labels = map[string]string{}
	if first := chains[0][0].meta; first != nil {
		for k, v := range first.Labels {
			if k != "part" && k != "previous" {
				m.Labels[k] = v
			}
		}
	}
	var names []string
	for _, c := range chains {
		for _, p := range c {
			names = append(names, filepath.Base(p.name))
		}
	}
	m.Labels["merged"] = strings.Join(names, ",")
	if tool != "" {
		m.Labels["merged-by"] = tool
	}
	if len(chains) == 1 {
		return m
	}
	var descs, sources, hosts []string
	m.CaptureFile, m.CaptureSHA256 = "", ""
	for _, c := range chains {
		cm := c[0].meta
		if cm == nil {
			continue
		}
		descs = append(descs, cm.Description)
		if !slices.Contains(sources, cm.Source) {
			sources = append(sources, cm.Source)
		}
		if !slices.Contains(hosts, cm.Host) {
			hosts = append(hosts, cm.Host)
		}
		if cm.Redaction == formats.RedactionHeadersOnly {
			m.Redaction = formats.RedactionHeadersOnly
		}
		if cm.Recorded != 0 && (m.Recorded == 0 || cm.Recorded < m.Recorded) {
			m.Recorded = cm.Recorded
		}
	}
	m.Description = "merge of " + strings.Join(descs, " + ")
	m.Source = strings.Join(sources, "+")
	m.Host = strings.Join(hosts, ",")
	return m
}

// mergedNote joins the notes of the recordings' last parts.
func mergedNote(chains [][]*part) string {
	var notes []string
	for _, c := range chains {
		if s := c[len(c)-1].summary; s != nil && s.Note != "" && !slices.Contains(notes, s.Note) {
			notes = append(notes, s.Note)
		}
	}
	return strings.Join(notes, "; ")
}

// stream reads the records of one recording, part after part, one open
// at a time.
type stream struct {
	order    int
	parts    []*part
	pi       int // the part being read; -1 before the first
	file     *formats.File
	rd       *formats.Scanner
	renumber bool
	res      *MergeResult

	prefix bool // reading the records a part after the first announces again
	state  formats.OpenSet

	next formats.Record
	t    int64 // time of next (the time of the record before it when it has none)
	err  error
}

// openNext opens the stream's next part; false after the last (or on an
// error, in s.err).
func (s *stream) openNext() bool {
	s.close()
	if s.pi+1 >= len(s.parts) {
		return false
	}
	s.pi++
	s.file = s.parts[s.pi].file
	s.rd = s.file.Records()
	s.prefix = s.pi > 0
	return true
}

// close closes the stream's part once read (its cache with it).
func (s *stream) close() {
	if s.file != nil {
		s.file.Close()
		s.parts[s.pi].file = nil
		s.file, s.rd = nil, nil
	}
}

// closeParts closes the files of parts.
func closeParts(parts []*part) {
	for _, p := range parts {
		if p.file != nil {
			p.file.Close()
			p.file = nil
		}
	}
}

// damage notes a damaged region of the part being read.
func (s *stream) damage(d *formats.DamageError) {
	s.res.Damage = append(s.res.Damage, fmt.Errorf("%s: %w", s.parts[s.pi].name, d))
}

// advance reads the stream's next record to write; false at its end.
func (s *stream) advance() bool {
	if s.rd == nil && (s.err != nil || !s.openNext()) {
		return false
	}
	for {
		r, err := s.rd.NextIntact(s.damage)
		if err != nil {
			if err != io.EOF {
				s.err = fmt.Errorf("edit: %s: %w", s.parts[s.pi].name, err)
				s.close()
				return false
			}
			if !s.openNext() {
				return false
			}
			continue
		}
		switch r.(type) {
		case *formats.Meta, *formats.Summary:
			continue
		}
		if s.prefix {
			if s.state.Announced(r) {
				s.res.Announced++
				continue
			}
			s.prefix = false
		}
		if len(s.parts) > 1 {
			s.state.Track(r)
		}
		s.next = r
		if t := recordTime(r); t != 0 {
			s.t = t
		}
		return true
	}
}

// recordTime is a record's capture time (0 for Meta, Summary).
func recordTime(r formats.Record) int64 {
	switch r := r.(type) {
	case *formats.Conn:
		return r.Time
	case *formats.TLS:
		return r.Time
	case *formats.Request:
		return r.Time
	case *formats.Response:
		return r.Time
	case *formats.Frame:
		return r.Time
	case *formats.Body:
		return r.Time
	case *formats.Chunk:
		return r.Time
	case *formats.End:
		return r.Time
	case *formats.ConnEnd:
		return r.Time
	case *formats.Anomaly:
		return r.Time
	}
	return 0
}

// numbering gives the connections and exchanges of several recordings new
// numbers, in the order they appear.
type numbering struct {
	conns     map[connKey]uint64
	exchanges map[exKey]int64
}

type connKey struct {
	stream int
	id     uint64
}

type exKey struct {
	stream int
	id     int64
}

func (n *numbering) conn(s int, id uint64) uint64 {
	k := connKey{s, id}
	v, ok := n.conns[k]
	if !ok {
		v = uint64(len(n.conns))
		n.conns[k] = v
	}
	return v
}

func (n *numbering) exchange(s int, id int64) int64 {
	if id == formats.NoExchange {
		return id
	}
	k := exKey{s, id}
	v, ok := n.exchanges[k]
	if !ok {
		v = int64(len(n.exchanges))
		n.exchanges[k] = v
	}
	return v
}

// renumber rewrites the connection and exchange numbers of r, a record of
// stream s.
func (n *numbering) renumber(s int, r formats.Record) {
	switch r := r.(type) {
	case *formats.Conn:
		r.ID = n.conn(s, r.ID)
	case *formats.TLS:
		r.Conn = n.conn(s, r.Conn)
	case *formats.ConnEnd:
		r.Conn = n.conn(s, r.Conn)
	case *formats.Request:
		r.Conn = n.conn(s, r.Conn)
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.Response:
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.Frame:
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.Body:
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.Chunk:
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.End:
		r.Exchange = n.exchange(s, r.Exchange)
	case *formats.Anomaly:
		r.Conn = n.conn(s, r.Conn)
		r.Exchange = n.exchange(s, r.Exchange)
	}
}

// streamHeap orders streams by the time of their next record, then by
// their order among the inputs.
type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].order < h[j].order
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
