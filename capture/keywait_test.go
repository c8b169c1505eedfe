package capture

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// growingKeyLog is a KeyLogSource over the lines of a real key log, as a
// file that clients write while the capture runs, late: the first `after`
// refreshes find nothing new, then each finds the next n lines.
type growingKeyLog struct {
	keys    *tlsdec.KeyLog
	lines   []string
	after   int // refreshes that find nothing (-1: every one)
	n       int // lines each later refresh finds
	next    int
	refresh int
}

func (g *growingKeyLog) Refresh() error {
	g.refresh++
	if g.after >= 0 && g.refresh > g.after {
		g.reveal(g.n)
	}
	return nil
}

func (g *growingKeyLog) reveal(n int) {
	for ; n > 0 && g.next < len(g.lines); n-- {
		g.keys.Load(strings.NewReader(g.lines[g.next] + "\n"))
		g.next++
	}
}

func keyLogLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestKeyLogLate records the cbor-informer capture (client-go informers
// over TLS 1.3 and HTTP/2, from a real apiserver) with a key log that
// starts empty and grows while the capture is read: line by line at each
// refresh, or all at once when the capture ends. Every connection the
// complete key log decrypts is decrypted, every event the clients
// received is there, byte for byte, with the capture time it has when
// the key log is complete from the start.
func TestKeyLogLate(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus", "cbor-informer")
	pcap := filepath.Join(dir, "capture.pcap")
	lines := keyLogLines(t, filepath.Join(dir, "keylog.txt"))
	want, _ := recordFile(t, pcap, Options{KeepSecrets: true, KeyLog: keyLogIn(t, dir)})
	wantEv := events(t, want.recs)
	truth := readTruth(t, filepath.Join(dir, "truth.jsonl"))
	for _, tc := range []struct {
		name     string
		after, n int
		wait     time.Duration
	}{
		{"late, then a connection's lines per refresh", 5, 4, 0},
		{"late, then everything", 10, len(lines), 0},
		{"at the end of the capture", -1, 0, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, _ := tlsdec.ParseKeyLog(strings.NewReader(""))
			src := &growingKeyLog{keys: keys, lines: lines, after: tc.after, n: tc.n}
			opts := Options{KeepSecrets: true, KeyLog: keys, KeyLogSource: src, KeyLogWait: tc.wait}
			var sink *memSink
			var st Stats
			if tc.after < 0 {
				// Nothing until the capture's end: the lines come then.
				sink, st = recordEnd(t, pcap, opts, func() { src.after = 0; src.n = len(lines) })
			} else {
				sink, st = recordFile(t, pcap, opts)
			}
			got := events(t, sink.recs)
			compareTruth(t, truth, got)
			if len(got) != len(wantEv) {
				t.Fatalf("%d events; %d with the whole key log", len(got), len(wantEv))
			}
			for i := range got {
				// Exchanges are numbered as they are learned: those of
				// a connection whose secrets came late come later.
				got[i].Exchange, wantEv[i].Exchange = 0, 0
				if got[i] != wantEv[i] {
					t.Fatalf("event %d:\n got  %+v\n want %+v", i, got[i], wantEv[i])
				}
			}
			// The apiserver's own loopback connection began before the
			// capture: never decryptable, whatever the key log.
			if st.TLSUndecrypted != 1 {
				t.Errorf("%d TLS connections not decrypted; want 1", st.TLSUndecrypted)
			}
			t.Logf("%d refreshes, %d of %d lines read", src.refresh, src.next, len(lines))
		})
	}
}

// recordEnd records a capture like recordFile, calling atEnd after the
// last packet, before the Recorder is closed.
func recordEnd(t *testing.T, path string, opts Options, atEnd func()) (*memSink, Stats) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapfile.NewReader(f, pcapfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	sink := &memSink{}
	rec := NewRecorder(sink, opts)
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Packet(Packet{Time: p.Time, LinkType: uint16(p.LinkType), Data: p.Data, Length: p.Length}); err != nil {
			t.Fatal(err)
		}
	}
	atEnd()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return sink, rec.Stats()
}

// TestKeyLogNeverComes: a key log that never gets a connection's secrets
// holds its records only for KeyLogWait (capture time), then records the
// connection as not decrypted, as without waiting; nothing is invented.
func TestKeyLogNeverComes(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus", "cbor-informer")
	keys, _ := tlsdec.ParseKeyLog(strings.NewReader(""))
	src := &growingKeyLog{keys: keys, after: -1}
	sink, st := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeepSecrets: true, KeyLog: keys, KeyLogSource: src, KeyLogWait: time.Second})
	if n := len(events(t, sink.recs)); n != 0 {
		t.Errorf("%d events without keys", n)
	}
	if st.TLSConns == 0 || st.TLSUndecrypted != st.TLSConns {
		t.Errorf("TLS: %d connections, %d not decrypted", st.TLSConns, st.TLSUndecrypted)
	}
	var noKeys int
	for _, r := range sink.recs {
		if a, ok := r.(*formats.Anomaly); ok && a.Kind == formats.AnomalyNoKeys {
			noKeys++
			if !strings.Contains(a.Message, "key log") && !strings.Contains(a.Message, "began before the capture") {
				t.Errorf("anomaly: %s", a.Message)
			}
		}
	}
	if noKeys != int(st.TLSConns) {
		t.Errorf("%d no-keys anomalies for %d connections", noKeys, st.TLSConns)
	}
	if src.refresh == 0 {
		t.Error("the source was never read")
	}
}
