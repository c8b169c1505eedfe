package frame

import (
	"fmt"

	"github.com/wtrace/wtrace/internal/cborscan"
)

// A CBOR watch body (application/cbor-seq, RFC 8742) is a CBOR sequence:
// data items back to back, nothing between them. Each item is one
// metav1.WatchEvent, a map {"object": …, "type": …} (members in any
// order; the apiserver writes "object" first) enclosed in the
// self-described CBOR tag (d9 d9 f7), its object again a tagged map
// (k8s.io/apimachinery pkg/runtime/serializer/cbor: NewFramer writes items
// as they are; the serializer tags every object it encodes). client-go's
// frame reader hands its decoder each item without that leading tag, so
// an event's Data is the map and Pre the tag.

// selfDescribedTag is tag 55799's number.
const selfDescribedTag = 55799

// cborIndef is an open indefinite-length item while a CBOR event is split.
type cborIndef struct {
	major byte
	saved uint64 // items owed to enclosing definite-length items
	n     uint64 // elements so far (a map's must be even)
}

// stepCBOR consumes p (non-empty) in normal mode: one data item per
// event, found by walking heads (cborscan) with the state kept in s across
// inputs. Nothing is buffered beyond what the event limit allows: every
// declared length and count is checked against the room left first (each
// owed item needs at least one byte).
func (s *Splitter) stepCBOR(p []byte) (n int, ev Event, ok bool, err error) {
	if !s.inEvent {
		s.inEvent = true
		s.start = s.off
		s.cb.owed, s.cb.top, s.cb.pre, s.cb.preEnd = 1, true, 0, false
		s.cb.stack = s.cb.stack[:0]
		s.cb.hn, s.cb.skip = 0, 0
	}
	j, err := s.scanCBOR(p)
	if err != nil {
		s.dropped += int64(j)
		s.off += int64(j)
		return j, Event{}, false, err
	}
	if j < 0 {
		s.buf = append(s.buf, p...)
		s.off += int64(len(p))
		return len(p), Event{}, false, nil
	}
	ev.Offset = s.start
	var b []byte
	if len(s.buf) == 0 {
		b = p[:j:j]
	} else {
		s.buf = append(s.buf, p[:j]...)
		b = s.buf
	}
	if s.cb.pre > 0 {
		ev.Pre = b[:s.cb.pre:s.cb.pre]
	}
	ev.Data = b[s.cb.pre:len(b):len(b)]
	s.off += int64(j)
	s.buf = s.buf[:0]
	s.inEvent = false
	return j, ev, true, nil
}

// scanCBOR advances the CBOR state over p and returns the index just past
// the item that ends the event, or -1 if p ends first. On error it returns
// the bytes consumed (through the offending head) and the *Error.
func (s *Splitter) scanCBOR(p []byte) (int, error) {
	i := 0
	for {
		if s.cb.skip > 0 {
			k := uint64(len(p) - i)
			if k > s.cb.skip {
				k = s.cb.skip
			}
			i += int(k)
			s.cb.skip -= k
			if s.cb.skip > 0 {
				return -1, nil
			}
		}
		if s.cb.owed == 0 && len(s.cb.stack) == 0 {
			return i, nil
		}
		if i == len(p) {
			return -1, nil
		}
		if s.cb.hn == 0 && s.cb.owed > 0 && !s.cb.top {
			// Fast path: definite-length heads lying in p, owed by a
			// definite-length container (what the apiserver writes).
			if j := s.fastCBOR(p, i); j > i {
				i = j
				continue
			}
		}
		// The head, maybe cut by the end of an earlier input.
		var hb []byte
		headAt := s.off + int64(i)
		first := p[i]
		if s.cb.hn > 0 {
			first = s.cb.head[0]
		}
		hl := cborscan.HeadLen(first)
		if hl == 0 {
			return i + 1, s.fail(headAt, fmt.Errorf("%w: cbor: reserved initial byte 0x%02x", ErrSyntax, first))
		}
		if s.cb.hn > 0 || hl > len(p)-i {
			c := copy(s.cb.head[s.cb.hn:hl], p[i:])
			headAt -= int64(s.cb.hn)
			s.cb.hn += c
			i += c
			if s.cb.hn < hl {
				return -1, nil
			}
			hb = s.cb.head[:hl]
			s.cb.hn = 0
		} else {
			hb = p[i : i+hl]
			i += hl
		}
		h, err := cborscan.ParseHead(hb, 0)
		if err != nil {
			return i, s.fail(headAt, fmt.Errorf("%w: cbor: %v", ErrSyntax, err.(*cborscan.SyntaxError).Msg))
		}
		if err := s.cborItem(h, headAt); err != nil {
			return i, err
		}
		// Every owed item takes at least a byte, every open
		// indefinite-length item its break code.
		room := uint64(int(s.limit) - len(s.buf) - i)
		if int(s.limit) < len(s.buf)+i || s.cb.skip+s.cb.owed+uint64(len(s.cb.stack)) > room {
			return i, s.fail(s.start, fmt.Errorf("%w: cbor event longer than %d bytes", ErrTooLarge, s.limit))
		}
	}
}

// fastCBOR reads the heads of definite-length items at p[i:] while they
// lie whole in p and are owed to definite-length containers, crossing the
// strings among them that lie in p, and returns where it stopped (i when
// it read nothing). It stops before anything the general path must judge:
// a head cut by the end of p, an 8-byte argument, an indefinite length, a
// break, a reserved or ill-formed head, a string that goes past p, an
// item that is not owed (an element of an indefinite-length item), an
// item past the event limit, the end of the event. Its accounting and
// limit check are the general path's.
func (s *Splitter) fastCBOR(p []byte, i int) int {
	owed := s.cb.owed
	room := int(s.limit) - len(s.buf) // the event may reach p[room]
	for owed > 0 && i < len(p) {
		c := p[i]
		major, info := c>>5, c&31
		var arg uint64
		hl := 1
		switch {
		case info < 24:
			arg = uint64(info)
		case info == 24 && i+2 <= len(p):
			arg, hl = uint64(p[i+1]), 2
		case info == 25 && i+3 <= len(p):
			arg, hl = uint64(p[i+1])<<8|uint64(p[i+2]), 3
		case info == 26 && i+5 <= len(p):
			arg, hl = uint64(p[i+1])<<24|uint64(p[i+2])<<16|uint64(p[i+3])<<8|uint64(p[i+4]), 5
		default:
			s.cb.owed = owed
			return i
		}
		next, o := i+hl, owed
		switch major {
		case cborscan.Uint, cborscan.NegInt:
			o--
		case cborscan.Simple:
			if info == 24 && arg < 32 {
				s.cb.owed = owed
				return i
			}
			o--
		case cborscan.Bytes, cborscan.Text:
			if arg > uint64(len(p)-next) {
				s.cb.owed = owed
				return i
			}
			o--
			next += int(arg)
		case cborscan.Array:
			if arg > uint64(max(room, 0)) {
				s.cb.owed = owed
				return i
			}
			o += arg - 1
		case cborscan.Map:
			if arg > uint64(max(room, 0))/2 {
				s.cb.owed = owed
				return i
			}
			o += 2*arg - 1
		}
		if next > room || o+uint64(len(s.cb.stack)) > uint64(room-next) {
			s.cb.owed = owed
			return i
		}
		i, owed = next, o
	}
	s.cb.owed = owed
	return i
}

// cborItem applies one head to the CBOR state (the accounting of
// cborscan.Skip, kept across inputs).
func (s *Splitter) cborItem(h cborscan.Head, at int64) error {
	syntax := func(format string, args ...any) error {
		return s.fail(at, fmt.Errorf("%w: cbor: %s", ErrSyntax, fmt.Sprintf(format, args...)))
	}
	if s.cb.top {
		// A WatchEvent is a map, possibly tagged (self-described CBOR).
		switch h.Major {
		case cborscan.Tag:
			if h.Arg == selfDescribedTag && !s.cb.preEnd {
				s.cb.pre += h.Len
			} else {
				// Another tag: it and what follows are the event's
				// bytes, a self-described tag after it too.
				s.cb.preEnd = true
			}
			return nil // owed stays 1: the tag's content is the event
		case cborscan.Map:
			s.cb.top = false
		default:
			return syntax("event of major type %d (want a map)", h.Major)
		}
	}
	if h.IsBreak() {
		if s.cb.owed > 0 || len(s.cb.stack) == 0 {
			return syntax("break code outside an indefinite-length item")
		}
		top := s.cb.stack[len(s.cb.stack)-1]
		if top.major == cborscan.Map && top.n%2 == 1 {
			return syntax("indefinite-length map with a key and no value")
		}
		s.cb.stack = s.cb.stack[:len(s.cb.stack)-1]
		s.cb.owed = top.saved
		return nil
	}
	if s.cb.owed == 0 {
		top := &s.cb.stack[len(s.cb.stack)-1]
		top.n++
		if (top.major == cborscan.Bytes || top.major == cborscan.Text) && (h.Major != top.major || h.Indef()) {
			return syntax("chunk of major type %d in an indefinite-length string of type %d", h.Major, top.major)
		}
	} else {
		s.cb.owed--
	}
	switch h.Major {
	case cborscan.Bytes, cborscan.Text, cborscan.Array, cborscan.Map:
		if h.Indef() {
			if len(s.cb.stack) >= cborscan.MaxDepth {
				return syntax("indefinite-length items nested deeper than %d", cborscan.MaxDepth)
			}
			s.cb.stack = append(s.cb.stack, cborIndef{major: h.Major, saved: s.cb.owed})
			s.cb.owed = 0
			return nil
		}
	}
	// Lengths and counts are compared with the event limit by the caller;
	// here they only must not overflow the counters.
	big := uint64(s.limit) + 1
	switch h.Major {
	case cborscan.Bytes, cborscan.Text:
		s.cb.skip = min(h.Arg, big)
	case cborscan.Array:
		s.cb.owed += min(h.Arg, big)
	case cborscan.Map:
		s.cb.owed += 2 * min(h.Arg, big)
	case cborscan.Tag:
		s.cb.owed++
	}
	return nil
}

// cborAnchor begins every CBOR watch event the apiserver writes: the
// self-described CBOR tag and a map of two pairs.
const cborAnchor = cborscan.SelfDescribed + "\xa2"

// probeCBOR judges w as the start of a CBOR event: the anchor, then
// either the key "type", one of the five event types and the key
// "object", or (the apiserver's order) the key "object" and the start of
// a map, self-described or not. Strings may be byte strings (as
// Kubernetes writes them) or text strings. The longest check,
// d9d9f7 a2 44 type 48 BOOKMARK 46 object, reads 25 bytes, within the
// resync window.
func probeCBOR(w []byte) int {
	if len(w) < len(cborAnchor) {
		if string(w) == cborAnchor[:len(w)] {
			return probeMore
		}
		return probeNo
	}
	if string(w[:len(cborAnchor)]) != cborAnchor {
		return probeNo
	}
	p := w[len(cborAnchor):]
	// str reads a short string head and content from p: its content and
	// probeYes, what there is and probeMore when p ends first.
	str := func(maxLen int) ([]byte, int) {
		if len(p) < 1 {
			return nil, probeMore
		}
		m, l := p[0]>>5, int(p[0]&31)
		if m != cborscan.Bytes && m != cborscan.Text || l > maxLen {
			return nil, probeNo
		}
		if len(p) < 1+l {
			return p[1:], probeMore
		}
		v := p[1 : 1+l]
		p = p[1+l:]
		return v, probeYes
	}
	// prefixOf: v (probeMore: a part of it) is one of names.
	prefixOf := func(v []byte, r int, names ...string) (string, int) {
		for _, n := range names {
			if r == probeYes && string(v) == n {
				return n, probeYes
			}
			if r == probeMore && len(v) < len(n) && string(v) == n[:len(v)] {
				return "", probeMore
			}
		}
		return "", probeNo
	}
	k, r := str(6)
	if r == probeNo {
		return probeNo
	}
	key, r := prefixOf(k, r, "type", "object")
	if r != probeYes {
		return r
	}
	if key == "object" {
		// The object: a map, maybe after the self-described tag.
		if len(p) >= len(cborscan.SelfDescribed) && string(p[:len(cborscan.SelfDescribed)]) == cborscan.SelfDescribed {
			p = p[len(cborscan.SelfDescribed):]
		} else if len(p) < len(cborscan.SelfDescribed) && string(p) == cborscan.SelfDescribed[:len(p)] {
			return probeMore
		}
		switch {
		case len(p) == 0:
			return probeMore
		case p[0]>>5 == cborscan.Map && cborscan.HeadLen(p[0]) != 0:
			return probeYes
		}
		return probeNo
	}
	t, r := str(8)
	if r == probeNo {
		return probeNo
	}
	if _, r = prefixOf(t, r, eventTypes[:]...); r != probeYes {
		return r
	}
	k, r = str(6)
	if r == probeNo {
		return probeNo
	}
	_, r = prefixOf(k, r, "object")
	return r
}

// peekCBOR reads Meta from a CBOR watch event.
func peekCBOR(data []byte) (Meta, error) {
	var m Meta
	var st statusFields
	var ierr error
	err := cborscan.EachMember(data, func(key, val []byte, at int) bool {
		switch {
		case cborscan.KeyIs(key, "type"):
			m.Type = cborString(val)
		case cborscan.KeyIs(key, "object"):
			ierr = peekCBORObject(val, at, &m, &st)
		}
		return ierr == nil
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return Meta{}, cborInvalid(err)
	}
	st.apply(&m)
	return m, nil
}

// statusFields are a Status object's code, reason and message, kept for
// ERROR events.
type statusFields struct {
	code            int32
	reason, message string
}

func (st statusFields) apply(m *Meta) {
	if m.Type == "ERROR" {
		m.Code, m.Reason, m.Message = st.code, st.reason, st.message
	}
}

// rowMeta is what a Table's rows tell: how many, and the metadata of the
// first row's object.
type rowMeta struct {
	n                                int
	namespace, name, resourceVersion string
}

// apply sets m's namespace, name and resourceVersion from the one row of
// a Table (a watch event of kubectl get -w carries one): the row's object
// is the object the event is about (a PartialObjectMetadata by default).
// The Table's own resourceVersion stays when the row's object has none.
func (r rowMeta) apply(m *Meta) {
	if m.Kind != "Table" || r.n != 1 {
		return
	}
	m.Namespace, m.Name = r.namespace, r.name
	if r.resourceVersion != "" {
		m.ResourceVersion = r.resourceVersion
	}
}

func peekCBORObject(obj []byte, base int, m *Meta, st *statusFields) error {
	var rows rowMeta
	var ierr error
	err := cborscan.EachMember(obj, func(key, val []byte, at int) bool {
		switch {
		case cborscan.KeyIs(key, "kind"):
			m.Kind = cborString(val)
		case cborscan.KeyIs(key, "apiVersion"):
			m.APIVersion = cborString(val)
		case cborscan.KeyIs(key, "metadata"):
			ierr = offsetErr(peekCBORMetadata(val, m), at)
		case cborscan.KeyIs(key, "code"):
			if v, ok := cborscan.Int(val); ok && v >= -1<<31 && v < 1<<31 {
				st.code = int32(v)
			}
		case cborscan.KeyIs(key, "reason"):
			st.reason = cborString(val)
		case cborscan.KeyIs(key, "message"):
			st.message = cborString(val)
		case cborscan.KeyIs(key, "rows"):
			ierr = offsetErr(peekCBORRows(val, &rows), at)
		}
		return ierr == nil
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return offsetErr(err, base)
	}
	rows.apply(m)
	return nil
}

// peekCBORRows reads a Table's rows: their number, and the metadata of
// the first one's object.
func peekCBORRows(val []byte, rows *rowMeta) error {
	return cborscan.EachElement(val, func(row []byte, rowAt int) error {
		rows.n++
		if rows.n > 1 {
			return nil
		}
		var rerr error
		err := cborscan.EachMember(row, func(key, val []byte, at int) bool {
			if !cborscan.KeyIs(key, "object") || isNull(val) {
				return true
			}
			var om Meta
			var merr error
			oerr := cborscan.EachMember(val, func(key, mval []byte, mat int) bool {
				if cborscan.KeyIs(key, "metadata") {
					merr = offsetErr(peekCBORMetadata(mval, &om), mat)
				}
				return merr == nil
			})
			if oerr == nil {
				oerr = merr
			}
			rerr = offsetErr(oerr, at)
			rows.namespace, rows.name, rows.resourceVersion = om.Namespace, om.Name, om.ResourceVersion
			return rerr == nil
		})
		if err == nil {
			err = rerr
		}
		return offsetErr(err, rowAt)
	})
}

func peekCBORMetadata(md []byte, m *Meta) error {
	if isNull(md) {
		return nil
	}
	var ierr error
	err := cborscan.EachMember(md, func(key, val []byte, _ int) bool {
		switch {
		case cborscan.KeyIs(key, "name"):
			m.Name = cborString(val)
		case cborscan.KeyIs(key, "namespace"):
			m.Namespace = cborString(val)
		case cborscan.KeyIs(key, "resourceVersion"):
			m.ResourceVersion = cborString(val)
		case cborscan.KeyIs(key, "annotations"):
			if isNull(val) {
				break
			}
			ierr = cborscan.EachMember(val, func(key, val []byte, _ int) bool {
				if cborscan.KeyIs(key, annInitialEventsEnd) {
					m.InitialEventsEnd = cborString(val) == "true"
				}
				return true
			})
		}
		return ierr == nil
	})
	if err == nil {
		err = ierr
	}
	return err
}

// isNull reports the CBOR null (0xf6), which nil maps and slices encode to.
func isNull(item []byte) bool { return len(item) == 1 && item[0] == 0xf6 }

// cborString returns a string item's content, "" for anything else.
func cborString(item []byte) string {
	s, _ := cborscan.String(item)
	return string(s)
}

// offsetErr makes a nested walk's offset an offset of the outer item.
func offsetErr(err error, base int) error {
	if err == nil {
		return nil
	}
	if se, ok := err.(*cborscan.SyntaxError); ok {
		return &cborscan.SyntaxError{Offset: se.Offset + base, Msg: se.Msg}
	}
	return err
}

// cborInvalid wraps a walk's error in ErrInvalid.
func cborInvalid(err error) error {
	if se, ok := err.(*cborscan.SyntaxError); ok {
		return fmt.Errorf("%w: %v", ErrInvalid, se)
	}
	return err
}

// peekCBORType reads the top-level "type" of a CBOR event, stopping there.
func peekCBORType(data []byte) (typ []byte, ok bool) {
	err := cborscan.EachMember(data, func(key, val []byte, _ int) bool {
		if !cborscan.KeyIs(key, "type") {
			return true
		}
		typ, ok = cborscan.String(val)
		return false
	})
	return typ, ok && err == nil
}
