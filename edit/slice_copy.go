package edit

// The slice's copy of the window: the input's records in file order, one
// method per record type, each kept, rewritten or left out; what is
// still open at To ended there.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

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

// record writes what the slice keeps of input record r: one method per
// record type.
func (s *slicer) record(r formats.Record) error {
	switch r := r.(type) {
	case *formats.Conn:
		return s.recordConn(r)
	case *formats.TLS:
		return s.recordTLS(r)
	case *formats.ConnEnd:
		return s.recordConnEnd(r)
	case *formats.Anomaly:
		return s.recordAnomaly(r)
	case *formats.Request:
		return s.recordRequest(r)
	case *formats.Response:
		return s.recordResponse(r)
	case *formats.Body:
		return s.recordBody(r)
	case *formats.Frame:
		return s.recordFrame(r)
	case *formats.Chunk:
		return s.recordChunk(r)
	case *formats.End:
		return s.recordEnd(r)
	}
	return nil
}

// recordConn writes a connection opened in the window (one open before
// From is in the prefix).
func (s *slicer) recordConn(r *formats.Conn) error {
	c := s.conns[r.ID]
	if c == nil || c.early {
		return nil
	}
	r.ID = s.ids.conn(0, r.ID)
	return s.write(r)
}

// recordTLS writes a connection's TLS record.
func (s *slicer) recordTLS(r *formats.TLS) error {
	c := s.conns[r.Conn]
	if c == nil || (c.early && r.Time < s.opts.From) || s.after(r.Time) {
		return nil
	}
	r.Conn, r.Time = s.ids.conn(0, r.Conn), s.clamp(r.Time)
	return s.write(r)
}

// recordConnEnd writes a connection's end.
func (s *slicer) recordConnEnd(r *formats.ConnEnd) error {
	if s.conns[r.Conn] == nil || s.after(r.Time) {
		return nil
	}
	r.Conn, r.Time = s.ids.conn(0, r.Conn), s.clamp(r.Time)
	return s.write(r)
}

// recordAnomaly writes an anomaly of a kept connection in the window.
func (s *slicer) recordAnomaly(r *formats.Anomaly) error {
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
}

// recordRequest writes the request of a kept exchange.
func (s *slicer) recordRequest(r *formats.Request) error {
	p := s.plans[r.Exchange]
	if p == nil || p.cut {
		return nil
	}
	r.Exchange, r.Conn = s.exID(r.Exchange), s.ids.conn(0, p.conn)
	return s.write(r)
}

// recordResponse writes the response head of a kept exchange; a LIST whose
// items are filtered loses its length and encoding.
func (s *slicer) recordResponse(r *formats.Response) error {
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
}

// recordBody writes a body record; a filtered LIST's server body is held
// until its end.
func (s *slicer) recordBody(r *formats.Body) error {
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
}

// recordFrame writes a watch event; a rewritten watch's, filtered by
// namespace, is written anew.
func (s *slicer) recordFrame(r *formats.Frame) error {
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
}

// recordChunk writes a chunk record of an exchange copied as it is.
func (s *slicer) recordChunk(r *formats.Chunk) error {
	p := s.plans[r.Exchange]
	if p == nil || p.rewrite || p.list || p.cut || s.after(r.Time) {
		return nil
	}
	r.Exchange = s.exID(r.Exchange)
	return s.write(r)
}

// recordEnd writes the end of one direction of an exchange; a rewritten
// watch's or a filtered LIST's written anew.
func (s *slicer) recordEnd(r *formats.End) error {
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
