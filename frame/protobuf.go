package frame

import (
	"encoding/binary"
	"fmt"
)

// stepProto consumes p (non-empty) in normal mode: a 4-byte big-endian
// length, then that many payload bytes (k8s.io/apimachinery
// pkg/util/framer's length-delimited framing).
func (s *Splitter) stepProto(p []byte) (n int, ev Event, ok bool, err error) {
	i := 0
	if s.hn < 4 {
		if s.hn == 0 {
			s.start = s.off
			if len(p) >= 4 {
				// Fast path: the whole frame may lie in p.
				l, err := s.frameLen(binary.BigEndian.Uint32(p))
				if err != nil {
					s.off += 4
					s.dropped += 4
					return 4, Event{}, false, err
				}
				if 4+l <= len(p) {
					s.off += int64(4 + l)
					return 4 + l, Event{Offset: s.start, Pre: p[:4:4], Data: p[4 : 4+l : 4+l]}, true, nil
				}
			}
		}
		i = copy(s.hdr[s.hn:], p)
		s.hn += int8(i)
		if s.hn < 4 {
			s.off += int64(i)
			return i, Event{}, false, nil
		}
		l, err := s.frameLen(binary.BigEndian.Uint32(s.hdr[:]))
		if err != nil {
			s.off += int64(i)
			return i, Event{}, false, err
		}
		s.need = int32(l)
	}
	rest := p[i:]
	if len(s.buf) == 0 && len(rest) >= int(s.need) {
		// The payload lies in p: only the prefix came from earlier input.
		n = i + int(s.need)
		ev = Event{Offset: s.start, Pre: s.hdr[:], Data: rest[:s.need:s.need]}
		s.off += int64(n)
		s.hn = 0
		return n, ev, true, nil
	}
	take := int(s.need) - len(s.buf)
	if take > len(rest) {
		take = len(rest)
	}
	s.buf = append(s.buf, rest[:take]...)
	n = i + take
	s.off += int64(n)
	if len(s.buf) < int(s.need) {
		return n, Event{}, false, nil
	}
	ev = Event{Offset: s.start, Pre: s.hdr[:], Data: s.buf}
	s.hn = 0
	s.buf = s.buf[:0]
	return n, ev, true, nil
}

// frameLen checks a frame length against the limit before anything is
// buffered. The error's offset is the length prefix's.
func (s *Splitter) frameLen(l uint32) (int, error) {
	switch {
	case l == 0:
		return 0, s.fail(s.start, fmt.Errorf("%w: zero-length protobuf frame (a WatchEvent always has a type)", ErrSyntax))
	case uint64(l) > uint64(s.limit):
		return 0, s.fail(s.start, fmt.Errorf("%w: protobuf frame of %d bytes exceeds the %d-byte limit", ErrTooLarge, l, s.limit))
	}
	return int(l), nil
}
