package capture

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

type countSink struct{ n int }

func (s *countSink) Write(formats.Record) error { s.n++; return nil }

// h2BenchStream builds a connection carrying one watch: the apiserver
// flushes after every event, so each event is one DATA frame; the client
// sends a WINDOW_UPDATE every 16 frames. It returns the pieces as they
// would reach the handler from TCP segments of mss bytes.
func h2BenchStream(ctype string, events [][]byte, frameOf func(ev []byte) []byte, mss int) []wirePiece {
	s := newH2Script()
	s.request(1, true, "GET", "/api/v1/namespaces/demo/configmaps?watch=true&allowWatchBookmarks=true",
		"authorization", "Bearer "+h2Token, "accept", ctype, "user-agent", "bench")
	s.response(1, false, "200", ctype, "audit-id", "0f8d6a8e-4a31-4a6b-b0c2-4f3a5a0f9e11", "cache-control", "no-cache, private")
	for i, ev := range events {
		s.fr[s2c].WriteData(1, false, frameOf(ev))
		s.send(s2c)
		if i%16 == 15 {
			s.fr[c2s].WriteWindowUpdate(0, 16*1024)
			s.send(c2s)
		}
	}
	s.data(s2c, 1, true, "")
	// Coalesce each direction's consecutive frames, then cut into
	// segments.
	var out []wirePiece
	var cur wirePiece
	flush := func() {
		for b := cur.data; len(b) > 0; {
			n := min(len(b), mss)
			out = append(out, wirePiece{dir: cur.dir, data: b[:n], t: cur.t})
			b = b[n:]
		}
		cur.data = nil
	}
	for _, p := range s.pieces {
		if p.dir != cur.dir || len(cur.data) >= mss {
			flush()
			cur.dir = p.dir
		}
		cur.data = append(cur.data, p.data...)
		cur.t = p.t
	}
	flush()
	return out
}

// BenchmarkH2Deframe measures HTTP/2 bytes (both directions) de-framed
// into exchanges and watch events per second: a JSON watch of 700-byte
// events (one DATA frame each), a protobuf one, and an opaque body in
// 16 KiB frames, fed in loopback-sized (64 KiB) and Ethernet-sized
// segments.
func BenchmarkH2Deframe(b *testing.B) {
	var jsonEvents, pbEvents [][]byte
	for i := range 4000 {
		jsonEvents = append(jsonEvents, jsonEvent("MODIFIED", i, 500))
		pbEvents = append(pbEvents, pbEvent("MODIFIED", i, 500))
	}
	jsonFrame := func(ev []byte) []byte { return append(bytes.Clone(ev), '\n') }
	pbFrame := func(ev []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(ev))), ev...) }
	opaque := make([][]byte, 400)
	for i := range opaque {
		opaque[i] = pseudoRandom(16384, uint64(i))
	}
	same := func(ev []byte) []byte { return ev }
	cases := []struct {
		name    string
		ctype   string
		events  [][]byte
		frameOf func([]byte) []byte
		want    int
	}{
		{"watch-json", "application/json", jsonEvents, jsonFrame, len(jsonEvents)},
		{"watch-protobuf", "application/vnd.kubernetes.protobuf;stream=watch", pbEvents, pbFrame, len(pbEvents)},
		{"opaque-16k-frames", "application/octet-stream", opaque, same, 0},
	}
	for _, tc := range cases {
		for _, seg := range []struct {
			name string
			mss  int
		}{{"seg64k", 65483}, {"seg1448", 1448}} {
			pieces := h2BenchStream(tc.ctype, tc.events, tc.frameOf, seg.mss)
			var total int64
			for _, p := range pieces {
				total += int64(len(p.data))
			}
			b.Run(tc.name+"/"+seg.name, func(b *testing.B) {
				b.SetBytes(total)
				b.ReportAllocs()
				for b.Loop() {
					s := newSession(&countSink{}, true)
					c := newH2Conn(s, 0)
					for _, p := range pieces {
						c.data(p.dir, p.data, p.t)
					}
					c.finish(formats.EndTruncated, 0)
					if s.stats.Events != int64(tc.want) || s.stats.Exchanges != 1 || s.stats.Anomalies != 0 {
						b.Fatalf("stats %+v; want %d events, 1 exchange", s.stats, tc.want)
					}
				}
			})
		}
	}
}
