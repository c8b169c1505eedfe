package report

// The builder's reading of the records: a watch's events, peeked for
// their metadata, and the bodies of the writes, held to their end to tell
// the object each write changed.

import (
	"bytes"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

func (b *builder) frame(fr *formats.Frame) {
	li, ok := b.exLane[fr.Exchange]
	if !ok {
		return
	}
	x := b.f.Exchange(fr.Exchange)
	format := frame.Unknown
	if x != nil && x.Response != nil {
		format = x.Response.Events
	}
	e := ev{lane: int32(li), t: fr.Time, seq: fr.Seq, typ: typeOther}
	m, err := frame.Peek(format, fr.Data)
	if err == nil {
		if c, ok := typeCodes[m.Type]; ok {
			e.typ = c
		}
		e.rv, _ = strconv.ParseUint(m.ResourceVersion, 10, 64)
		if m.Name != "" || m.Namespace != "" {
			e.name = b.name(m.Namespace, m.Name)
		} else {
			e.name = -1
		}
	} else {
		e.name = -1
	}
	if len(fr.Redacted) > 0 {
		e.flags |= evRedacted
	}
	if b.budget(fr.Exchange, int64(len(fr.Data))) {
		p := fr.Data
		if len(p) > b.opts.maxBodySize() {
			p = p[:b.opts.maxBodySize()]
			e.flags |= evCut
		}
		e.item = int32(b.st.add(p)) + 1
		b.st.in += int64(len(p))
		if format != frame.JSON && e.flags&evCut == 0 {
			if j := eventJSON(b.json, format, m.Type, fr.Data); j != nil {
				e.jitem = int32(b.st.add(j)) + 1
			}
		}
	} else {
		e.flags |= evLeft
		b.st.left += int64(len(fr.Data))
	}
	b.events = append(b.events, e)
	b.perSec[(fr.Time-b.start)/1e9]++
}

// budget says whether n more bytes of exchange ex are embedded: while what
// it embedded stays within its share of what it holds so far.
func (b *builder) budget(ex int64, n int64) bool {
	b.seen[ex] += n
	if b.ratio >= 1 {
		return true
	}
	if float64(b.embedded[ex]+n) <= b.ratio*float64(b.seen[ex])+1024 {
		b.embedded[ex] += n
		return true
	}
	return false
}

func (b *builder) name(ns, name string) int32 {
	k := name
	if ns != "" {
		k = ns + "/" + name
	}
	id, ok := b.names[k]
	if !ok {
		id = int32(len(b.s.Names))
		b.names[k] = id
		b.s.Names = append(b.s.Names, k)
	}
	return id
}

func (b *builder) body(r *formats.Body) {
	k := [2]int64{r.Exchange, int64(r.Dir)}
	bb := b.bodies[k]
	if bb == nil {
		bb = &bodyBuf{keep: b.opts.maxBodySize()}
		b.bodies[k] = bb
	}
	bb.size += int64(len(r.Data))
	b.hold(bb, r.Data)
	if r.Dir == formats.ServerToClient {
		if x := b.f.Exchange(r.Exchange); x != nil && apipath.IsWrite(x.Request.Method) {
			pb := b.peek[r.Exchange]
			if pb == nil {
				pb = &bodyBuf{keep: maxPeek}
				b.peek[r.Exchange] = pb
			}
			b.hold(pb, r.Data)
		}
	}
}

// hold keeps the first bytes of p a body buffer still wants, while the
// bodies held at once stay within maxHeld.
func (b *builder) hold(bb *bodyBuf, p []byte) {
	n := min(bb.keep-bb.buf.Len(), len(p), int(maxHeld-b.held))
	if n > 0 {
		bb.buf.Write(p[:n])
		b.held += int64(n)
	}
}

func (b *builder) end(e *formats.End) {
	b.flushBody(e.Exchange, e.Dir)
	if e.Dir == formats.ServerToClient {
		b.answered(e.Exchange)
	}
}

// flushBody stores what was kept of a body, within the budget.
func (b *builder) flushBody(ex int64, dir formats.Direction) {
	k := [2]int64{ex, int64(dir)}
	bb := b.bodies[k]
	if bb == nil {
		return
	}
	delete(b.bodies, k)
	b.held -= int64(bb.buf.Len())
	ref := &bodyRef{Item: -1, Size: bb.size}
	x := b.f.Exchange(ex)
	if x != nil {
		hs := x.Request.Header
		if dir == formats.ServerToClient && x.Response != nil {
			hs = x.Response.Header
			ref.Encoding = x.Response.Encoding
		}
		for _, h := range hs {
			if strings.EqualFold(h.Name, "Content-Type") {
				ref.Type = h.Value
			}
			if dir == formats.ClientToServer && strings.EqualFold(h.Name, "Content-Encoding") {
				ref.Encoding = h.Value
			}
		}
	}
	p := bb.buf.Bytes()
	if strings.EqualFold(ref.Encoding, "gzip") {
		if d, err := gunzip(p, b.opts.maxBodySize()); err == nil {
			p, ref.Decoded = d, "gzip"
		}
	}
	if b.budget(ex, bb.size) {
		ref.Item = b.st.add(p)
		ref.Shown = len(p)
		b.st.in += int64(len(p))
		if f := bodyFormat(p); f != frame.Unknown && ref.Shown == int(bb.size) && ref.Decoded == "" {
			if j := bodyJSON(b.json, f, p); j != nil {
				ref.JSON = b.st.add(j) + 1
			}
		}
	} else {
		b.st.left += bb.size
	}
	b.refs[k] = ref
}

// bodyFormat tells a whole protobuf body (the "k8s\x00" envelope) or CBOR
// one (the self-described tag) from others (frame.Unknown).
func bodyFormat(p []byte) frame.Format {
	switch {
	case bytes.HasPrefix(p, []byte("k8s\x00")):
		return frame.Protobuf
	case bytes.HasPrefix(p, []byte{0xd9, 0xd9, 0xf7}):
		return frame.CBOR
	}
	return frame.Unknown
}

// gunzip decodes the first max bytes of a gzip'd body (cut bodies decode
// as far as they go).
func gunzip(p []byte, max int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, io.LimitReader(zr, int64(max)))
	if out.Len() > 0 {
		return out.Bytes(), nil
	}
	return nil, err
}

// answered notes a write's answer: the object it changed, and the
// resourceVersion of the object the answer holds.
func (b *builder) answered(ex int64) {
	x := b.f.Exchange(ex)
	pb := b.peek[ex]
	delete(b.peek, ex)
	if pb != nil {
		b.held -= int64(pb.buf.Len())
	}
	if x == nil || x.Request.Missing || !apipath.IsWrite(x.Request.Method) || x.Response == nil || x.Response.Status/100 != 2 {
		return
	}
	res, ns, name, _ := resourceOf(x.Request.Target)
	w := write{t: x.Request.Time, delete: x.Request.Method == "DELETE"}
	if pb != nil {
		body := pb.buf.Bytes()
		if strings.EqualFold(x.Response.Encoding, "gzip") {
			body, _ = gunzip(body, maxPeek)
		}
		format := bodyFormat(body)
		if format == frame.Unknown {
			format = frame.JSON
		}
		if m, err := peekBody(format, body); err == nil {
			w.rv, _ = strconv.ParseUint(m.ResourceVersion, 10, 64)
			if name == "" {
				name = m.Name
			}
			if ns == "" {
				ns = m.Namespace
			}
		}
	}
	w.key = res + "\x00" + ns + "\x00" + name
	client, ua, addr := b.clientOf(x)
	_ = client
	w.tested = b.tested(ua, addr)
	b.writes = append(b.writes, w)
}
