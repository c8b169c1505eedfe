package capture

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// longSoak is a real 8-minute soak: 23 watches of configmaps and secrets
// (client-go informers and raw watches, JSON and protobuf, label
// selectors, bookmarks, keep-alive connections carrying a LIST then
// watches one after the other) through kubectl proxy, against a real
// kube-apiserver v1.33.13 under a seeded workload of about 9,500 writes
// (testdata/soak/README.md).
const longSoak = "../testdata/soak/long-soak"

// soakTruth is truth-streams.json: what the soak's clients received,
// stream by stream, as digests of the sha256 of each event's exact bytes
// (the corpus's truth.jsonl is 11 MB; this is what the test needs of it).
type soakTruth struct {
	Events  int              `json:"events"`
	Types   map[string]int64 `json:"types"`
	Streams []struct {
		Conn    string `json:"conn"`
		Request string `json:"request"`
		Events  int    `json:"events"`
		Digest  string `json:"digest"`
	} `json:"streams"`
}

// TestLongSoak records the real long soak (zstd'd capture) and checks
// every event of every watch, byte for byte, against what the clients
// received.
func TestLongSoak(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(longSoak, "truth-streams.json"))
	if err != nil {
		t.Fatal(err)
	}
	var truth soakTruth
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatal(err)
	}
	sink, st := recordFile(t, filepath.Join(longSoak, "capture.pcap.zst"), Options{KeepSecrets: true})
	if st.Events != int64(truth.Events) {
		t.Errorf("recorded %d events; the clients received %d", st.Events, truth.Events)
	}
	type stream struct {
		conn, target string
		shas         []string
	}
	conns := map[uint64]string{}
	byEx := map[int64]*stream{}
	for _, r := range sink.recs {
		switch r := r.(type) {
		case *formats.Conn:
			conns[r.ID] = r.Client
		case *formats.Request:
			byEx[r.Exchange] = &stream{conn: conns[r.Conn], target: r.Target}
		case *formats.Frame:
			s := byEx[r.Exchange]
			if s == nil {
				t.Fatalf("event of exchange %d before its request", r.Exchange)
			}
			if int64(len(s.shas)) != r.Seq {
				t.Fatalf("exchange %d: event %d after %d events", r.Exchange, r.Seq, len(s.shas))
			}
			sum := sha256.Sum256(r.Data)
			s.shas = append(s.shas, hex.EncodeToString(sum[:]))
		}
	}
	got := map[[2]string]*stream{}
	for _, s := range byEx {
		if len(s.shas) > 0 {
			got[[2]string{s.conn, s.target}] = s
		}
	}
	for _, w := range truth.Streams {
		s := got[[2]string{w.Conn, w.Request}]
		if s == nil {
			t.Errorf("%s %s: not recorded (%d events)", w.Conn, w.Request, w.Events)
			continue
		}
		delete(got, [2]string{w.Conn, w.Request})
		h := sha256.New()
		for _, x := range s.shas {
			h.Write([]byte(x + "\n"))
		}
		if d := hex.EncodeToString(h.Sum(nil)); len(s.shas) != w.Events || d != w.Digest {
			t.Errorf("%s %s: %d events, digest %.12s; the client received %d, %.12s", w.Conn, w.Request, len(s.shas), d, w.Events, w.Digest)
		}
	}
	for k, s := range got {
		t.Errorf("%s %s: %d events no client received", k[0], k[1], len(s.shas))
	}
}
