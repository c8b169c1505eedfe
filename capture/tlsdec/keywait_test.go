package tlsdec

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyWait feeds real Go TLS sessions (1.3 and 1.2) to a Conn whose
// key log is empty, with KeyWait: nothing is delivered and nothing counts
// as not decrypted; then the key log gets its lines one by one, as the
// client writes them, each followed by Retry: in the end everything is
// delivered, complete, in order, with the times of the pieces that
// completed each record, exactly as with the whole key log from the start.
func TestKeyWait(t *testing.T) {
	for _, cfg := range []struct {
		name string
		sc   sessionConfig
	}{
		{"TLS 1.3", sessionConfig{clientALPN: []string{"h2", "http/1.1"}, serverALPN: []string{"h2"}, downloadSize: 100 << 10}},
		{"TLS 1.2", sessionConfig{maxVersion: 0x0303, downloadSize: 100 << 10}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			s := runSession(t, cfg.sc)
			ps := feedModes[0].cut(s, rand.New(rand.NewPCG(1, 2)))
			want := &capSink{}
			feedAll(t, NewConn(mustKeyLog(t, s.keylog), want, Options{}), ps)

			keys := mustKeyLog(t, nil)
			got := &capSink{}
			c := NewConn(keys, got, Options{KeyWait: true})
			feedAll(t, c, ps)
			if !c.WaitingKeys() || len(got.data[0])+len(got.data[1]) != 0 {
				t.Fatalf("with no secrets: waiting %v, %d+%d bytes delivered", c.WaitingKeys(), len(got.data[0]), len(got.data[1]))
			}
			if info := c.Info(); info.Dir[0].Undecryptable+info.Dir[1].Undecryptable != 0 {
				t.Fatalf("records counted as undecryptable while waiting: %+v", info.Dir)
			}
			lines := bytes.SplitAfter(s.keylog, []byte("\n"))
			for _, l := range lines {
				keys.Load(bytes.NewReader(l))
				if err := c.Retry(); err != nil {
					t.Fatal(err)
				}
			}
			if c.WaitingKeys() {
				t.Fatal("still waiting with the whole key log")
			}
			info := c.Info()
			if !info.Decrypted {
				t.Fatalf("not decrypted: %s", info.Note)
			}
			for d := range 2 {
				if !bytes.Equal(got.data[d], want.data[d]) || !equalTimes(got.times[d], want.times[d]) {
					t.Errorf("%s: %d bytes at %v; want %d bytes at %v", Direction(d), len(got.data[d]), got.times[d], len(want.data[d]), want.times[d])
				}
			}
		})
	}
}

func equalTimes(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestKeyWaitEnds: StopWaiting, and more than MaxKeyWait bytes held, end
// the wait with a note; what was held is then handled as without KeyWait
// (not decrypted, counted), and later secrets change nothing.
func TestKeyWaitEnds(t *testing.T) {
	s := runSession(t, sessionConfig{downloadSize: 200 << 10})
	ps := feedModes[0].cut(s, rand.New(rand.NewPCG(1, 2)))
	for _, tc := range []struct {
		name string
		max  int
		stop bool
		note string
	}{
		{"StopWaiting", 0, true, "when the wait for them ended"},
		{"MaxKeyWait", 16 << 10, false, "bytes held waiting for the key log's secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := mustKeyLog(t, nil)
			sink := &capSink{}
			c := NewConn(keys, sink, Options{KeyWait: true, MaxKeyWait: tc.max})
			feedAll(t, c, ps)
			if tc.stop {
				if err := c.StopWaiting(); err != nil {
					t.Fatal(err)
				}
			}
			if c.WaitingKeys() {
				t.Fatal("still waiting")
			}
			info := c.Info()
			if info.Decrypted || !strings.Contains(info.Note, tc.note) || info.Dir[1].Undecryptable == 0 {
				t.Fatalf("decrypted %v, note %q, undecryptable %d; want a note with %q", info.Decrypted, info.Note, info.Dir[1].Undecryptable, tc.note)
			}
			keys.Load(bytes.NewReader(s.keylog))
			c.Retry()
			if len(sink.data[1]) != 0 {
				t.Errorf("%d bytes delivered after the wait ended", len(sink.data[1]))
			}
		})
	}
}

// TestKeyLogFile: a key log being written is read by whole lines as it
// grows; a line without its newline waits; a file that shrank is read
// again from its start.
func TestKeyLogFile(t *testing.T) {
	s := runSession(t, sessionConfig{})
	lines := bytes.SplitAfter(s.keylog, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last newline
	path := filepath.Join(t.TempDir(), "keys.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenKeyLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	appendFile := func(b []byte) {
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(b)
		fh.Close()
	}
	secrets := func() int { return f.KeyLog().Stats().Secrets }
	gen := f.KeyLog().Generation()
	appendFile(lines[0][:20]) // a line being written
	if err := f.Refresh(); err != nil || secrets() != 0 || f.KeyLog().Stats().Bad != 0 {
		t.Fatalf("half a line: %d secrets, %d bad, %v", secrets(), f.KeyLog().Stats().Bad, err)
	}
	appendFile(lines[0][20:])
	for _, l := range lines[1:] {
		appendFile(l)
	}
	if err := f.Refresh(); err != nil || secrets() != len(lines) || f.KeyLog().Generation() == gen {
		t.Fatalf("whole lines: %d secrets of %d, %v", secrets(), len(lines), err)
	}
	// Replaced by a shorter file: read from its start (its line is known already).
	if err := os.WriteFile(path, lines[0], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(); err != nil || secrets() != len(lines) || f.KeyLog().Stats().Bad != 0 {
		t.Fatalf("after truncation: %d secrets, %d bad, %v", secrets(), f.KeyLog().Stats().Bad, err)
	}
	if _, err := OpenKeyLogFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("OpenKeyLogFile(missing file) = nil error")
	}
}
