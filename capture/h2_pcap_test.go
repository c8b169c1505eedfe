package capture

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// writeTCPPcap writes pieces as the packets of one TCP connection from
// 127.0.0.1:40001 to 127.0.0.1:8080 (see piecesPcap).
func writeTCPPcap(t testing.TB, path string, pieces []wirePiece, mss int) {
	t.Helper()
	if err := os.WriteFile(path, piecesPcap(pieces, mss, "127.0.0.1:40001", "127.0.0.1:8080"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestH2Recorder records the test session as a pcap: the Recorder detects
// HTTP/2 with prior knowledge by the client preface and records every
// exchange as the handler does on its own.
func TestH2Recorder(t *testing.T) {
	pieces, want := h2Session(t)
	serverFirst := append([]wirePiece(nil), pieces...)
	for i, p := range serverFirst {
		if p.dir == formats.ServerToClient {
			// The server's SETTINGS before the client's preface.
			first := serverFirst[i]
			copy(serverFirst[1:i+1], serverFirst[:i])
			serverFirst[0] = first
			break
		}
	}
	for _, tc := range []struct {
		name   string
		pieces []wirePiece
		mss    int
	}{
		{"loopback", pieces, 65000},
		{"ethernet", pieces, 1448},
		{"server first", serverFirst, 65000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h2c.pcap")
			writeTCPPcap(t, path, tc.pieces, tc.mss)
			sink, st := recordFile(t, path, Options{})
			var conns []*formats.Conn
			var recs []formats.Record
			for _, r := range sink.recs {
				switch r := r.(type) {
				case *formats.Conn:
					conns = append(conns, r)
				case *formats.ConnEnd:
					if r.Reason != formats.ConnFIN || r.LostBytes != 0 {
						t.Errorf("ConnEnd %+v; want FIN, nothing lost", r)
					}
				default:
					recs = append(recs, r)
				}
			}
			if len(conns) != 1 || conns[0].Proto != "h2c" || conns[0].Client != "127.0.0.1:40001" || conns[0].Midstream {
				t.Fatalf("connections %+v; want one h2c connection from 127.0.0.1:40001", conns)
			}
			checkH2Session(t, recs, pieces, want)
			evs := events(t, sink.recs)
			if st.Events != int64(len(evs)) || len(evs) == 0 {
				t.Errorf("Stats.Events = %d; %d events", st.Events, len(evs))
			}
			for _, e := range evs {
				if e.Conn != "127.0.0.1:40001->127.0.0.1:8080" || e.Type == "" || e.Name == "" {
					t.Errorf("event %+v", e)
					break
				}
			}
		})
	}
}
