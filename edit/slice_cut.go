package edit

// The slice's prefix: where each watch cut at From resumes, the world at
// From, the session's meta, and the LISTs synthesized from that world for
// the cut watches.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

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
