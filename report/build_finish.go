package report

// The builder's finish: the requests, the events the client under test
// caused, the columns, the statistics, the anomalies and the details.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
)

// finish sorts the marks, tells the events the client under test caused,
// and fills the columns, anomalies, statistics and details.
func (b *builder) finish() {
	b.requests()
	b.caused()

	slices.SortStableFunc(b.events, func(p, q ev) int { return cmp.Or(cmp.Compare(p.lane, q.lane), cmp.Compare(p.t, q.t)) })
	slices.SortStableFunc(b.reqs, func(p, q rq) int { return cmp.Or(cmp.Compare(p.lane, q.lane), cmp.Compare(p.t, q.t)) })
	types, byGroup := b.eventColumns()
	byVerb := b.requestColumns()
	b.stats(types, byGroup, byVerb)
	b.span()
	b.anomalies()
	b.details()
}

// requests marks every exchange that is not a watch as a request.
func (b *builder) requests() {
	s := b.s
	// Requests: every exchange that is not a watch.
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if isWatch(x) {
			continue
		}
		r := rq{lane: int32(b.exLane[x.Request.Exchange]), ex: x.Request.Exchange, t: cmp.Or(x.Request.Time, x.First), end: x.Last, name: -1}
		if _, ns, name, _ := resourceOf(x.Request.Target); name != "" {
			r.name = b.name(ns, name)
		}
		if x.End != nil {
			r.end = max(r.end, x.End.Time)
		}
		m := x.Request.Method
		if x.Request.Missing {
			m = "?"
		}
		id, ok := b.meth[m]
		if !ok {
			id = int32(len(s.Methods))
			b.meth[m] = id
			s.Methods = append(s.Methods, m)
		}
		r.method = id
		if apipath.IsWrite(m) {
			r.flags |= rqWrite
			s.Stats.Writes++
		}
		if s.Lanes[r.lane].Tested {
			r.flags |= rqTested
			if r.flags&rqWrite != 0 {
				s.Stats.TestedWrite++
			}
		}
		if x.Response != nil {
			r.status = int32(x.Response.Status)
		}
		if r.status == 0 || r.status >= 400 {
			r.flags |= rqFailed
		}
		if x.End == nil || x.End.Status != formats.EndComplete {
			r.flags |= rqCut
		}
		b.reqs = append(b.reqs, r)
	}
}

// eventColumns fills the session's event columns and each lane's event
// count, and counts the events by type, in all and per group.
func (b *builder) eventColumns() (types map[string]int, byGroup map[int]map[string]int) {
	s := b.s
	for i := range s.Lanes {
		s.Lanes[i].FirstEvent, s.Lanes[i].FirstRequest = -1, -1
	}
	n := len(b.events)
	t, typ, flags, name, seq, item, jitem := make([]int64, n), make([]uint8, n), make([]uint8, n), make([]int32, n), make([]int64, n), make([]int32, n), make([]int32, n)
	prevLane, prevT, prevSeq := int32(-1), int64(0), int64(0)
	types = map[string]int{}
	byGroup = map[int]map[string]int{}
	for i, e := range b.events {
		l := s.Lanes[e.lane]
		if e.lane != prevLane {
			prevLane, prevT, prevSeq = e.lane, 0, 0
			l.FirstEvent = i
		}
		l.Events++
		u := b.us(e.t)
		t[i], prevT = u-prevT, u
		seq[i], prevSeq = e.seq-prevSeq, e.seq
		typ[i], flags[i], name[i], item[i], jitem[i] = e.typ, e.flags, e.name, e.item, e.jitem
		tn := typeName(e.typ)
		types[tn]++
		if byGroup[l.Group] == nil {
			byGroup[l.Group] = map[string]int{}
		}
		byGroup[l.Group][tn]++
		if e.flags&evCaused != 0 {
			s.Stats.Caused++
		}
	}
	s.Events = columns{N: n, Cols: map[string]string{"t": varints(t), "type": varints(typ), "flags": varints(flags), "name": varints(name), "seq": varints(seq), "item": varints(item), "json": varints(jitem)}}

	return types, byGroup
}

// requestColumns fills the session's request columns and each lane's
// request count, and counts the requests and watches by method and
// status.
func (b *builder) requestColumns() map[[2]any]int {
	s := b.s
	m := len(b.reqs)
	rt, rdur, rex, rmeth, rstat, rflags, rname := make([]int64, m), make([]int64, m), make([]int64, m), make([]int32, m), make([]int32, m), make([]uint8, m), make([]int32, m)
	prevLane, prevT := int32(-1), int64(0)
	byVerb := map[[2]any]int{}
	for i, r := range b.reqs {
		l := s.Lanes[r.lane]
		if r.lane != prevLane {
			prevLane, prevT = r.lane, 0
			l.FirstRequest = i
		}
		l.Requests++
		u := b.us(r.t)
		rt[i], prevT = u-prevT, u
		if r.end > r.t {
			rdur[i] = (r.end - r.t) / 1e3
		}
		rex[i], rmeth[i], rstat[i], rflags[i], rname[i] = r.ex, r.method, r.status, r.flags, r.name
		byVerb[[2]any{s.Methods[r.method], int(r.status)}]++
	}
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if isWatch(x) {
			st := 0
			if x.Response != nil {
				st = x.Response.Status
			}
			m := x.Request.Method
			if x.Request.Missing {
				m = "?"
			}
			byVerb[[2]any{m + " (watch)", st}]++
		}
	}
	s.Requests = columns{N: m, Cols: map[string]string{"t": varints(rt), "dur": varints(rdur), "ex": varints(rex), "method": varints(rmeth), "status": varints(rstat), "flags": varints(rflags), "name": varints(rname)}}

	return byVerb
}

// stats fills the session's statistics from the counts of eventColumns
// and requestColumns.
func (b *builder) stats(types map[string]int, byGroup map[int]map[string]int, byVerb map[[2]any]int) {
	s := b.s
	s.Stats.Conns = len(b.idx.Conns)
	s.Stats.Exchanges = len(b.idx.Exchanges)
	s.Stats.Events = len(b.events)
	s.Stats.Types = types
	s.Stats.ByVerb = [][3]any{}
	for k, v := range byVerb {
		s.Stats.ByVerb = append(s.Stats.ByVerb, [3]any{k[0], k[1], v})
	}
	sort.Slice(s.Stats.ByVerb, func(i, j int) bool {
		a, c := s.Stats.ByVerb[i], s.Stats.ByVerb[j]
		if a[0].(string) != c[0].(string) {
			return a[0].(string) < c[0].(string)
		}
		return a[1].(int) < c[1].(int)
	})
	s.Stats.ByResource = []resourceCount{}
	for g, ts := range byGroup {
		rc := resourceCount{Group: g, Title: s.Groups[g].Title, Types: ts}
		for _, v := range ts {
			rc.N += v
		}
		s.Stats.ByResource = append(s.Stats.ByResource, rc)
	}
	sort.Slice(s.Stats.ByResource, func(i, j int) bool {
		return cmp.Or(cmp.Compare(s.Stats.ByResource[j].N, s.Stats.ByResource[i].N), cmp.Compare(s.Stats.ByResource[i].Group, s.Stats.ByResource[j].Group)) < 0
	})
	secs := make([][2]int64, 0, len(b.perSec))
	for sec, c := range b.perSec {
		secs = append(secs, [2]int64{sec * 1e6, c})
	}
	sort.Slice(secs, func(i, j int) bool {
		return cmp.Or(cmp.Compare(secs[j][1], secs[i][1]), cmp.Compare(secs[i][0], secs[j][0])) < 0
	})
	s.Stats.Busiest = secs[:min(len(secs), 10)]

}

// span sets the session's start and its span: to the last record seen.
func (b *builder) span() {
	s := b.s
	var last int64
	for _, x := range b.idx.Exchanges {
		last = max(last, x.Last)
		if x.End != nil {
			last = max(last, x.End.Time)
		}
	}
	s.Span = b.us(max(last, b.lastT))
	s.Start = export.Time(b.start)
}

// caused flags the events the writes of the client under test caused: the
// event whose object is at the resourceVersion a write answered with, and
// for a DELETE the first DELETED event of its object after it.
func (b *builder) caused() {
	rvs := map[uint64]bool{}
	dels := map[string][]int64{}
	for _, w := range b.writes {
		if !w.tested {
			continue
		}
		if w.rv != 0 && !w.delete {
			rvs[w.rv] = true
		}
		if w.delete {
			dels[w.key] = append(dels[w.key], w.t)
		}
	}
	if len(rvs) == 0 && len(dels) == 0 {
		return
	}
	for k := range dels {
		slices.Sort(dels[k])
	}
	for i := range b.events {
		e := &b.events[i]
		if e.typ == typeCodes["BOOKMARK"] || e.typ == typeCodes["ERROR"] {
			continue
		}
		if e.rv != 0 && rvs[e.rv] {
			e.flags |= evCaused
			continue
		}
		if e.typ == typeCodes["DELETED"] && e.name >= 0 {
			g := b.s.Groups[b.s.Lanes[e.lane].Group]
			nsName := b.s.Names[e.name]
			ns, name, ok := strings.Cut(nsName, "/")
			if !ok {
				ns, name = "", nsName
			}
			ts := dels[g.Resource+"\x00"+ns+"\x00"+name]
			if j := sort.Search(len(ts), func(j int) bool { return ts[j] > e.t }); j > 0 {
				e.flags |= evCaused
			}
		}
	}
}

func typeName(c uint8) string {
	for k, v := range typeCodes {
		if v == c {
			return k
		}
	}
	return "other"
}

// anomalies places what went wrong where it happened: the index's
// anomalies (lost bytes, resyncs, …), cut streams, 410s, stalls.
func (b *builder) anomalies() {
	s := b.s
	connLane := map[uint64]int{}
	for i := range b.idx.Exchanges {
		x := &b.idx.Exchanges[i]
		if _, ok := connLane[x.Request.Conn]; !ok {
			connLane[x.Request.Conn] = b.exLane[x.Request.Exchange]
		}
	}
	for _, a := range b.idx.Anomalies {
		m := mark{Lane: -1, T: b.us(a.Time), Kind: a.Kind.String(), Text: a.Kind.String() + ": " + a.Message}
		if a.Bytes > 0 {
			m.Text += fmt.Sprintf(" (%d bytes)", a.Bytes)
		}
		if a.Exchange != formats.NoExchange {
			x := a.Exchange
			m.Exchange = &x
			if l, ok := b.exLane[x]; ok {
				m.Lane = l
			}
		} else if l, ok := connLane[a.Conn]; ok {
			m.Lane = l
		}
		s.Anomalies = append(s.Anomalies, m)
	}
	stall := b.opts.stallAfter()
	for i := range b.exs {
		x := &b.exs[i]
		li, ok := b.exLane[x.Exchange]
		if !ok {
			continue
		}
		ex := x.Exchange
		info := b.f.Exchange(ex)
		if info == nil {
			continue
		}
		watch := isWatch(info)
		if x.Response != nil && x.Response.Status == 410 {
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(info.Response.Time), Kind: "410", Text: "410 Gone: " + x.Request.Method + " " + x.Request.Target, Exchange: &ex})
		}
		for _, e := range x.Errors {
			kind := "error"
			if e.Code == 410 {
				kind = "410"
			}
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(parseTime(e.Time)), Kind: kind,
				Text: fmt.Sprintf("ERROR event %d: %d %s %s", e.Seq, e.Code, e.Reason, e.Message), Exchange: &ex})
		}
		if !watch {
			continue
		}
		l := s.Lanes[li]
		if sl := x.LongestSilence; sl != nil {
			from, to := b.us(parseTime(sl.From)), b.us(parseTime(sl.To))
			l.Silence = []int64{from, to}
			if stall > 0 && sl.Seconds >= stall.Seconds() {
				s.Anomalies = append(s.Anomalies, mark{Lane: li, T: from, Kind: "stall",
					Text: fmt.Sprintf("stall: nothing for %.1f s, until %s", sl.Seconds, sl.Until), Exchange: &ex})
			}
		}
		switch {
		case info.End == nil:
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: l.To, Kind: "cut", Text: "the file ended with the stream open", Exchange: &ex})
		case info.End.Status != formats.EndComplete:
			kind, text := "cut", "stream cut: "+info.End.Status.String()
			if b.lastT-info.End.Time < endSlack && info.End.Status != formats.EndGap && info.End.Status != formats.EndError {
				// The recording stopped with the watch open: not what the
				// server did.
				kind, text = "end", "open when the recording ended: "+info.End.Status.String()
			}
			if info.End.Note != "" {
				text += " (" + info.End.Note + ")"
			}
			s.Anomalies = append(s.Anomalies, mark{Lane: li, T: b.us(info.End.Time), Kind: kind, Text: text, Exchange: &ex})
		}
	}
	slices.SortStableFunc(s.Anomalies, func(p, q mark) int { return cmp.Compare(p.T, q.T) })
	if len(s.Anomalies) > maxAnomalies {
		s.AnomaliesLeft = len(s.Anomalies) - maxAnomalies
		s.Anomalies = s.Anomalies[:maxAnomalies:maxAnomalies]
	}
}

func parseTime(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// details stores what a click on each exchange shows.
func (b *builder) details() {
	pairs := make([]int64, 0, 2*len(b.exs))
	var spent int64
	for i := range b.exs {
		x := &b.exs[i]
		d := exchangeDetail{Exchange: x, Conn: b.conns[x.ConnID]}
		d.Request = b.refs[[2]int64{x.Exchange, int64(formats.ClientToServer)}]
		if info := b.f.Exchange(x.Exchange); info != nil && !isWatch(info) {
			d.Response = b.refs[[2]int64{x.Exchange, int64(formats.ServerToClient)}]
		}
		p, err := json.Marshal(d)
		if err != nil {
			continue
		}
		// The details of watches and writes always; of the other
		// exchanges while they fit in a budget of their own (as large as
		// the bodies').
		if info := b.f.Exchange(x.Exchange); info != nil && !isWatch(info) && !apipath.IsWrite(info.Request.Method) {
			if spent+int64(len(p)) > b.opts.maxBodyBytes() {
				b.s.DetailsLeft++
				continue
			}
			spent += int64(len(p))
		}
		pairs = append(pairs, x.Exchange, int64(b.st.add(p)))
	}
	b.s.Exchanges = varints(pairs)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
