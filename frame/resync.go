package frame

import (
	"bytes"
	"encoding/binary"
)

// Results of judging a resync candidate.
const (
	probeNo   = iota // not an event start
	probeYes         // an event starts here
	probeMore        // the bytes end before a decision
)

// eventTypes are the five WatchEvent types (k8s.io/apimachinery
// pkg/watch: Added, Modified, Deleted, Bookmark, Error).
var eventTypes = [...]string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"}

// jsonAnchor begins every JSON watch event the apiserver writes.
const jsonAnchor = `{"type":"`

// probeJSON judges w as the start of a JSON event: `{"type":"` + one of the
// five event types + `"`. The caller checks that w follows a line start.
func probeJSON(w []byte) int {
	if len(w) < len(jsonAnchor) {
		if bytes.HasPrefix([]byte(jsonAnchor), w) {
			return probeMore
		}
		return probeNo
	}
	if string(w[:len(jsonAnchor)]) != jsonAnchor {
		return probeNo
	}
	rest := w[len(jsonAnchor):]
	res := probeNo
	for _, t := range eventTypes {
		n := len(t) + 1
		if len(rest) >= n {
			if string(rest[:len(t)]) == t && rest[len(t)] == '"' {
				return probeYes
			}
		} else if string(rest) == (t + `"`)[:len(rest)] {
			res = probeMore
		}
	}
	return res
}

// probeProto judges w as the start of a protobuf frame holding a
// metav1.WatchEvent as the apiserver writes it: length L (1..limit), then
// field 1 (type, tag 0x0a) with one of the five types, field 2 (object,
// tag 0x12) whose length ends the frame exactly, inside it RawExtension
// field 1 (raw, tag 0x0a) filling the object, and raw beginning with the
// "k8s\x00" envelope magic (k8s.io/apimachinery
// pkg/runtime/serializer/protobuf).
func probeProto(w []byte, limit int) int {
	if len(w) < 4 {
		return probeMore
	}
	l := binary.BigEndian.Uint32(w)
	if l == 0 || uint64(l) > uint64(limit) {
		return probeNo
	}
	p := w[4:]
	if len(p) < 1 {
		return probeMore
	}
	if p[0] != 0x0a {
		return probeNo
	}
	if len(p) < 2 {
		return probeMore
	}
	tl := int(p[1])
	if tl != 5 && tl != 7 && tl != 8 {
		return probeNo
	}
	if len(p) < 2+tl {
		return probeMore // the type's letters are judged once all are here
	}
	typ := p[2 : 2+tl]
	known := false
	for _, t := range eventTypes {
		if string(typ) == t {
			known = true
			break
		}
	}
	if !known {
		return probeNo
	}
	p = p[2+tl:]
	used := uint64(2 + tl)
	// Field 2: object (RawExtension), length-delimited.
	if len(p) < 1 {
		return probeMore
	}
	if p[0] != 0x12 {
		return probeNo
	}
	olen, vn, res := probeVarint(p[1:])
	if res != probeYes {
		return res
	}
	used += uint64(1 + vn)
	if used+olen != uint64(l) {
		return probeNo
	}
	p = p[1+vn:]
	// RawExtension field 1: raw, filling the object.
	if len(p) < 1 {
		return probeMore
	}
	if p[0] != 0x0a {
		return probeNo
	}
	rlen, vn, res := probeVarint(p[1:])
	if res != probeYes {
		return res
	}
	if uint64(1+vn)+rlen != olen || rlen < 4 {
		return probeNo
	}
	p = p[1+vn:]
	const magic = ProtobufMagic
	if len(p) < len(magic) {
		if string(p) == magic[:len(p)] {
			return probeMore
		}
		return probeNo
	}
	if string(p[:len(magic)]) != magic {
		return probeNo
	}
	return probeYes
}

// probeVarint reads a varint of at most 5 bytes (a length below 2^35;
// frames are far smaller).
func probeVarint(p []byte) (v uint64, n int, res int) {
	for n < 5 {
		if n >= len(p) {
			return 0, 0, probeMore
		}
		b := p[n]
		v |= uint64(b&0x7f) << (7 * n)
		n++
		if b < 0x80 {
			return v, n, probeYes
		}
	}
	return 0, 0, probeNo
}

// probe judges the candidate at w[0] in the splitter's format.
func (s *Splitter) probe(w []byte) int {
	switch s.format {
	case Protobuf:
		return probeProto(w, int(s.limit))
	case CBOR:
		return probeCBOR(w)
	}
	return probeJSON(w)
}

// scanResync consumes p in resync mode. It returns the bytes consumed and
// whether an event start was found; then the splitter is back in normal
// mode, the event begins at p[n] (or in the replay bytes), and
// s.skipped counts everything before it.
func (s *Splitter) scanResync(p []byte) (n int, found bool) {
	if s.format != JSON && s.format != Protobuf && s.format != CBOR {
		// Nothing can be found: skip everything.
		s.skipped += int64(len(p))
		s.off += int64(len(p))
		return len(p), false
	}
	// Candidates that start in pend, judged with the head of p.
	if pend := s.pending(); len(pend) > 0 {
		rb := s.rb
		w := append(rb.win[:0], pend...)
		w = append(w, p[:min(len(p), window)]...)
		for k := 0; k < len(pend); k++ {
			if s.format == JSON && k > 0 && w[k-1] != '\n' {
				continue
			}
			switch s.probe(w[k:]) {
			case probeNo:
				continue
			case probeYes:
				s.skipped += int64(k)
				rb.replay = append(rb.replA[:0], pend[k:]...)
				s.off -= int64(len(rb.replay))
				rb.pend = rb.pendA[:0]
				s.leaveResync()
				return 0, true
			case probeMore:
				// p is shorter than a window: keep all from k on.
				s.skipped += int64(k)
				rb.pend = append(rb.pendA[:0], w[k:]...)
				s.off += int64(len(p))
				s.rsNL = true
				return len(p), false
			}
		}
		s.skipped += int64(len(pend))
		s.rsNL = pend[len(pend)-1] == '\n'
		rb.pend = rb.pendA[:0]
	}
	if len(p) == 0 {
		return 0, false
	}
	c, res := s.findCandidate(p)
	switch res {
	case probeYes:
		s.skipped += int64(c)
		s.off += int64(c)
		s.leaveResync()
		return c, true
	case probeMore:
		s.skipped += int64(c)
		rb := s.bufs()
		rb.pend = append(rb.pendA[:0], p[c:]...)
		s.rsNL = true
	default:
		s.skipped += int64(len(p))
		if s.format == JSON {
			s.rsNL = p[len(p)-1] == '\n'
		}
	}
	s.off += int64(len(p))
	return len(p), false
}

// findCandidate returns the first position in p where an event starts
// (probeYes), or the first undecided one (probeMore), or probeNo.
func (s *Splitter) findCandidate(p []byte) (int, int) {
	if s.format == JSON {
		c := 0
		if !s.rsNL {
			j := bytes.IndexByte(p, '\n')
			if j < 0 {
				return 0, probeNo
			}
			c = j + 1
		}
		for {
			if c == len(p) {
				return 0, probeNo // rsNL is set by the caller
			}
			if r := probeJSON(p[c:]); r != probeNo {
				return c, r
			}
			j := bytes.IndexByte(p[c:], '\n')
			if j < 0 {
				return 0, probeNo
			}
			c += j + 1
		}
	}
	if s.format == CBOR {
		// Every event begins with the self-described tag's first byte.
		for c := 0; c < len(p); c++ {
			j := bytes.IndexByte(p[c:], cborAnchor[0])
			if j < 0 {
				return 0, probeNo
			}
			c += j
			if r := probeCBOR(p[c:]); r != probeNo {
				return c, r
			}
		}
		return 0, probeNo
	}
	// Protobuf: every position is a candidate; the payload's first byte
	// (p[c+4]) must be 0x0a, which bytes.IndexByte finds quickly. The last
	// four positions, whose payload byte is not here yet, are probed one by
	// one so that the decision does not depend on where p ends.
	for c := 0; c < len(p); {
		if c+4 < len(p) && p[c+4] != 0x0a {
			j := bytes.IndexByte(p[c+4:], 0x0a)
			if j < 0 {
				c = max(c+1, len(p)-4)
			} else {
				c += j
			}
			continue
		}
		if r := probeProto(p[c:], int(s.limit)); r != probeNo {
			return c, r
		}
		c++
	}
	return 0, probeNo
}

// leaveResync switches to normal mode at an event start.
func (s *Splitter) leaveResync() {
	s.resync = false
	s.reset2()
}

// reset2 clears the partial event state but keeps replayed bytes.
func (s *Splitter) reset2() {
	r := s.replayed()
	s.reset()
	if r != nil {
		s.rb.replay = r
	}
}

// Sniff guesses the format of a body captured from its middle (no headers):
// it looks for event starts in p. It returns Protobuf if p holds a
// protobuf resync point (see Splitter.Resync), else CBOR if it holds a
// CBOR one, else JSON if it holds a JSON one (p[0] counts as a line
// start), else Unknown.
func Sniff(p []byte) Format {
	s := Splitter{format: Protobuf, limit: MaxEventSize}
	if _, r := s.findCandidate(p); r == probeYes {
		return Protobuf
	}
	s = Splitter{format: CBOR, limit: MaxEventSize, cb: new(cborState)}
	if _, r := s.findCandidate(p); r == probeYes {
		return CBOR
	}
	s = Splitter{format: JSON, limit: MaxEventSize, rsNL: true}
	if _, r := s.findCandidate(p); r == probeYes {
		return JSON
	}
	return Unknown
}
