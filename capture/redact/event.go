package redact

import (
	"github.com/wtrace/wtrace/frame"
)

// Event redacts one watch event's exact bytes (frame.Event.Data) in
// format f, adding what it replaced to rep. It returns data itself when
// nothing is replaced, else a redacted copy of the same length. An event
// that may hold a credential but does not parse is replaced from where it
// stops parsing (JSON), whole (protobuf), or whole by a CBOR byte string
// of its length (CBOR, so the sequence stays self-delimiting); the length
// prefix and the other events of the stream are untouched.
func (s *Secrets) Event(f frame.Format, data []byte, rep *Report) []byte {
	return s.EventTo(nil, f, data, rep)
}

// EventTo is Event with the redacted copy of a protobuf event built in
// dst's storage (grown as needed), so that a caller that is done with
// each result before the next call keeps reusing one buffer: pass the
// last result back, truncated. dst must not overlap data.
func (s *Secrets) EventTo(dst []byte, f frame.Format, data []byte, rep *Report) []byte {
	switch f {
	case frame.JSON:
		if !mayHoldJSON(data) {
			return data
		}
		w := pooledJSONWalker(s, rep)
		out := w.whole(data, true)
		w.recycle()
		return out
	case frame.Protobuf:
		if !mayHoldProto(data) {
			return data
		}
		p := pooledProtoWalker(s)
		p.object(protoKindWatchEvnt, data, 0, 0)
		out, _ := p.applyTo(dst, s, data, rep)
		p.recycle()
		return out
	case frame.CBOR:
		out, _ := s.cborWhole(data, false, rep)
		return out
	}
	return data
}

// Tail redacts the bytes after the last event of a watch body (End.Tail):
// whitespace, or the partial event a cut stream left. A partial JSON
// event goes through the same walker as whole ones, and every value whose
// object's kind it does not reach is replaced (fail closed); a partial
// protobuf or CBOR event is replaced whole.
func (s *Secrets) Tail(f frame.Format, tail []byte, rep *Report) []byte {
	if onlySpace(tail) {
		return tail
	}
	switch f {
	case frame.JSON:
		return newJSONWalker(s, rep, false).whole(tail, false)
	default:
		out := make([]byte, len(tail))
		fill(out, unparsedFill)
		rep.fail(0, int64(len(tail)), "a partial "+f.String()+" event")
		return out
	}
}

func onlySpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}
