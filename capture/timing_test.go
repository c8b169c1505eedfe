package capture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/tlsdec"
)

// recordDamaged records a capture held in memory; a capture cut part way is
// recorded up to the cut.
func recordDamaged(t testing.TB, pcap []byte, opts Options) *memSink {
	t.Helper()
	pc, err := NewPcap(bytes.NewReader(pcap), opts.KeyLog)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sink := &memSink{}
	if _, err := pc.Record(context.Background(), sink, opts, nil); err != nil {
		t.Fatal(err)
	}
	return sink
}

// eventTimes maps each event, named by its connection and its bytes, to
// its times (identical events — a repeated BOOKMARK — share a name).
func eventTimes(t testing.TB, s *memSink) map[string][]int64 {
	out := map[string][]int64{}
	for _, e := range events(t, s.recs) {
		k := e.Conn + " " + e.SHA256
		out[k] = append(out[k], e.Time)
	}
	return out
}

// timeErrors compares the event times of a damaged capture's recording with
// the pristine one's: want maps a pristine time to the time the damaged
// capture can show (nil: the same). Of identical events the nearest in
// time is the same event. It returns the absolute errors, in order of
// size, and the events the damaged recording invented.
func timeErrors(pristine, damaged map[string][]int64, want func(key string, t int64) int64) (errs []time.Duration, invented []string) {
	for k, ts := range damaged {
		avail := slices.Clone(pristine[k])
		for i := range avail {
			if want != nil {
				avail[i] = want(k, avail[i])
			}
		}
		for _, got := range ts {
			if len(avail) == 0 {
				invented = append(invented, k)
				continue
			}
			best := 0
			for j := range avail {
				if abs(avail[j]-got) < abs(avail[best]-got) {
					best = j
				}
			}
			errs = append(errs, time.Duration(abs(avail[best]-got)))
			avail = slices.Delete(avail, best, best+1)
		}
	}
	slices.Sort(errs)
	return errs, invented
}

func abs(d int64) int64 { return max(d, -d) }

// errStats summarises time errors the way issue 14 reports them.
func errStats(errs []time.Duration) string {
	if len(errs) == 0 {
		return "no events"
	}
	over := 0
	for _, e := range errs {
		if e > time.Second {
			over++
		}
	}
	return fmt.Sprintf("%d events, %d more than 1 s off, median %v, max %v", len(errs), over, errs[len(errs)/2], errs[len(errs)-1])
}

// TestLossTiming derives damaged copies of the corpus captures, as
// pcapmangle does (1% of the server's data segments dropped; adjacent
// segments swapped and retransmitted; the file cut part way), and checks
// that every event recorded from them carries the capture time of the
// packet that completed it: within 1 ms of the same event's time in the
// pristine capture. Where a swap moved the segment that completed an event
// into a later packet's slot, that later packet completes it. Nothing is
// invented, and what the damage did not touch is recorded: after a lost
// response head, the rest of the body still answers its request.
func TestLossTiming(t *testing.T) {
	const tolerance = time.Millisecond
	for _, name := range []string{"basic-json", "multi-watch", "protobuf", "gone-410", "tls-h2"} {
		dir := filepath.Join("..", "testdata", "corpus", name)
		raw, err := os.ReadFile(filepath.Join(dir, "capture.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{KeepSecrets: true}
		if kl, err := os.ReadFile(filepath.Join(dir, "keylog.txt")); err == nil {
			keys, err := tlsdec.ParseKeyLog(bytes.NewReader(kl))
			if err != nil {
				t.Fatal(err)
			}
			opts.KeyLog = keys
		}
		server := corpusServer(t, dir)
		c := parseMangle(t, raw)
		pristine := eventTimes(t, recordDamaged(t, raw, opts))
		reordered, moved := c.mangleReorder(server, 2, 0.03, 0.02)
		for _, tc := range []struct {
			mode string
			pcap []byte
			want func(key string, t int64) int64
			kept float64 // the share of the events that must be recorded
		}{
			{"drop", c.mangleDrop(server, 1, 0.01), nil, 0.97},
			{"drop5", c.mangleDrop(server, 5, 0.05), nil, 0.9},
			{"reorder", reordered, func(key string, t int64) int64 {
				client, _, _ := bytes.Cut([]byte(key), []byte("->"))
				if to, ok := moved[string(client)][t]; ok {
					return to
				}
				return t
			}, 1},
			{"truncate", c.mangleTruncate(server, 0.6), nil, 0},
		} {
			t.Run(name+"/"+tc.mode, func(t *testing.T) {
				got := eventTimes(t, recordDamaged(t, tc.pcap, opts))
				errs, invented := timeErrors(pristine, got, tc.want)
				t.Logf("%s", errStats(errs))
				if len(invented) > 0 {
					t.Errorf("%d events not in the pristine recording, e.g. %s", len(invented), invented[0])
				}
				if len(errs) == 0 {
					t.Fatalf("no event recorded (pristine: %d)", len(pristine))
				}
				total := 0
				for _, ts := range pristine {
					total += len(ts)
				}
				if float64(len(errs)) < tc.kept*float64(total) {
					t.Errorf("%d of %d events recorded; want at least %.0f%%", len(errs), total, tc.kept*100)
				}
				if e := errs[len(errs)-1]; e > tolerance {
					t.Errorf("time error up to %v (%s); want ≤ %v", e, errStats(errs), tolerance)
				}
			})
		}
	}
}
