package tlsdec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// lossSink captures the data and the losses, with how much data of the
// direction came before each.
type lossSink struct {
	capSink
	losses []Loss
	before []int
}

func (s *lossSink) Lost(l Loss) {
	s.losses = append(s.losses, l)
	s.before = append(s.before, len(s.data[l.Dir]))
}

// garbled returns ps with bytes of direction d changed in place: at each
// wire offset of at (sorted), XOR with x.
func garbled(ps []piece, d Direction, at []int, x byte) []piece {
	out := make([]piece, len(ps))
	off := 0
	for i, p := range ps {
		out[i] = p
		if p.dir != d {
			continue
		}
		out[i].data = bytes.Clone(p.data)
		for _, a := range at { // at is sorted
			if a >= off+len(p.data) {
				break
			}
			if a >= off {
				out[i].data[a-off] ^= x
			}
		}
		off += len(p.data)
	}
	return out
}

// TestResyncInPlace garbles bytes inside records of real crypto/tls
// connections, in place (no byte missing, no Gap call): the records that
// no longer authenticate are skipped — whether their body, their header
// (type, version, length) or their outer type was hit — decryption
// resynchronizes at the next record, every other record is delivered,
// the LossSink hears of each damaged region before the data after it, and
// the note says where.
func TestResyncInPlace(t *testing.T) {
	tests := []struct {
		name string
		// at returns the wire offsets to garble and the records that
		// lose their data, given the record table from its middle m.
		at      func(tab []recInfo, m int) (at []int, bad []int)
		x       byte
		regions int
	}{
		{"body", func(tab []recInfo, m int) ([]int, []int) {
			m = bigIndex(tab, m)
			return []int{tab[m].start + 40}, []int{m}
		}, 0x10, 1},
		{"last-byte", func(tab []recInfo, m int) ([]int, []int) {
			return []int{tab[m].end - 1}, []int{m}
		}, 0x80, 1},
		{"type", func(tab []recInfo, m int) ([]int, []int) {
			return []int{tab[m].start}, []int{m}
		}, 0xa5, 1},
		{"version", func(tab []recInfo, m int) ([]int, []int) {
			return []int{tab[m].start + 2}, []int{m}
		}, 0x40, 1},
		{"length-longer", func(tab []recInfo, m int) ([]int, []int) {
			m = bigIndex(tab, m)
			return []int{tab[m].start + 3}, []int{m} // + up to 0x0800... within the limit or not
		}, 0x08, 1},
		{"length-shorter", func(tab []recInfo, m int) ([]int, []int) {
			m = bigIndex(tab, m)
			return []int{tab[m].start + 4}, []int{m}
		}, 0x01, 1},
		{"two-records-in-a-row", func(tab []recInfo, m int) ([]int, []int) {
			return []int{tab[m].start + 20, tab[m+1].start + 20}, []int{m, m + 1}
		}, 0x04, 1},
		{"two-regions", func(tab []recInfo, m int) ([]int, []int) {
			return []int{tab[m].start + 20, tab[m+5].end - 3}, []int{m, m + 5}
		}, 0x04, 2},
		// A burst: a byte in each of ten records in a row, their headers
		// intact (the chain of lengths gives each one's sequence number).
		{"burst-bodies", func(tab []recInfo, m int) (at, bad []int) {
			for i := m; i < m+10; i++ {
				at, bad = append(at, tab[i].start+20), append(bad, i)
			}
			return at, bad
		}, 0x04, 1},
		// A burst: every byte of records in a row, headers too, over more
		// than maxResyncScan bytes (no chain to follow; nothing is
		// missing, so the scan goes on until the next record).
		{"burst-whole", func(tab []recInfo, m int) (at, bad []int) {
			for i := m; tab[i].start-tab[m].start <= maxResyncScan; i++ {
				for a := tab[i].start; a < tab[i].end; a++ {
					at = append(at, a)
				}
				bad = append(bad, i)
			}
			return at, bad
		}, 0x5a, 1},
	}
	for _, ss := range resyncSessions {
		t.Run(ss.name, func(t *testing.T) {
			s := runWritesSession(t, ss.cfg, writeSizes(60, 2))
			d := ServerToClient
			tab := recTable(t, s, d)
			m := len(tab) / 2
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					at, bad := tc.at(tab, m)
					var want []byte
					isBad := map[int]bool{}
					for _, b := range bad {
						isBad[b] = true
					}
					for i, r := range tab {
						if !isBad[i] {
							want = append(want, r.plain...)
						}
					}
					for mode := range 2 { // writes, random pieces
						checkInPlace(t, ss.name, s, tab, d, mode, at, bad, tc.x, tc.regions, want)
					}
				})
			}
		})
	}
}

// checkInPlace feeds session s cut as feed mode mode, direction d garbled
// at the wire offsets at with x, and checks what TestResyncInPlace wants:
// the plaintext of every record but bad, regions damaged regions
// resynchronized, each reported to the LossSink and noted.
func checkInPlace(t *testing.T, name string, s *session, tab []recInfo, d Direction, mode int, at, bad []int, x byte, regions int, want []byte) {
	t.Helper()
	ps := garbled(feedModes[mode].cut(s, newRand(mode)), d, at, x)
	sink := &lossSink{}
	c := NewConn(mustKeyLog(t, s.keylog), sink, Options{MaxPending: 64 << 20})
	for _, p := range ps {
		if err := c.Feed(p.dir, p.data, p.t); err != nil {
			t.Fatalf("%s: Feed: %v", feedModes[mode].name, err)
		}
	}
	checkBounded(t, c)
	in := c.Info()
	di := in.Dir[d]
	if got := sink.data[d]; !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes of plaintext, want %d (first difference at %d); Note %q", feedModes[mode].name, len(got), len(want), firstDiff(got, want), in.Note)
	}
	if !bytes.Equal(sink.data[1-d], s.plain[1-d]) {
		t.Fatalf("the other direction lost data")
	}
	if di.Damaged != regions || di.Resyncs != regions || di.LostRecords != int64(len(bad)) || di.Stopped || di.Resyncing || di.Err != nil {
		t.Fatalf("Info.Dir = %+v; want %d damaged regions resynchronized, %d records lost", di, regions, len(bad))
	}
	if in.Decrypted {
		t.Fatalf("Info.Decrypted with damaged records")
	}
	if len(sink.losses) != regions {
		t.Fatalf("losses %v; want %d", sink.losses, regions)
	}
	l := sink.losses[0]
	first := tab[bad[0]]
	n := 1
	if regions == 1 {
		n = len(bad)
	}
	resumed := tab[bad[n-1]+1].start
	if l.Dir != d || l.Offset != int64(first.start) || l.Records != int64(n) || l.Resumed != int64(resumed) ||
		l.Skipped != int64(resumed-first.start) || sink.before[0] != len(prefixBefore(tab, first.start)) {
		t.Fatalf("loss %+v after %d bytes; want records from offset %d, %d lost, resumed at %d, after %d bytes", l, sink.before[0], first.start, n, resumed, len(prefixBefore(tab, first.start)))
	}
	var lostPlain int
	for _, b := range bad[:n] {
		lostPlain += len(tab[b].plain)
	}
	if strings.HasPrefix(name, "tls13") || !strings.Contains(name, "cbc") {
		if l.Plaintext < int64(lostPlain)-int64(n)*256 || l.Plaintext > int64(lostPlain)+int64(n)*256 {
			t.Errorf("loss estimates %d bytes of data; the records held %d", l.Plaintext, lostPlain)
		}
	}
	note := fmt.Sprintf("server->client: record %d at offset %d did not authenticate (", l.Record, l.Offset)
	if !strings.Contains(in.Note, note) || !strings.Contains(in.Note, fmt.Sprintf("resynchronized at offset %d", resumed)) {
		t.Fatalf("Note %q; want %q… resynchronized at offset %d", in.Note, note, resumed)
	}
}

// bigIndex returns the index of the first record from i with at least 500
// bytes.
func bigIndex(tab []recInfo, i int) int {
	for ; tab[i].end-tab[i].start < 500; i++ {
	}
	return i
}

// TestResyncInPlaceSmallRecords: a burst of damage in place over
// thousands of small records (a flood of small watch events), after a
// history of large ones (a LIST), followed by a large record: the
// sequence number of the first record that authenticates is about
// 2,500 past the damaged one, far from what the direction's average
// record predicts, and each trial of the large record cost its whole
// length (issue 34: the resync gave up at the trial limit, and the
// direction was lost). The records just before the damage predict it
// (a moving average), and for TLS 1.3 one block of keystream refutes a
// wrong sequence number (keys.plausible13): every record after the burst
// is delivered, for every suite.
func TestResyncInPlaceSmallRecords(t *testing.T) {
	var sizes []int
	for range 300 {
		sizes = append(sizes, 16000)
	}
	for range 3000 {
		sizes = append(sizes, 60)
	}
	for range 20 {
		sizes = append(sizes, 16000)
	}
	for _, ss := range resyncSessions {
		t.Run(ss.name, func(t *testing.T) {
			s := runWritesSession(t, ss.cfg, sizes)
			d := ServerToClient
			tab := recTable(t, s, d)
			// The first large record after the small ones, and the 2,500
			// small records before it, garbled whole (headers too).
			first := -1
			for i := 2600; i < len(tab) && first < 0; i++ {
				if tab[i].end-tab[i].start > 10000 && tab[i-1].end-tab[i-1].start < 200 {
					first = i
				}
			}
			if first < 0 {
				t.Fatal("no large record after the small ones")
			}
			var at []int
			var want []byte
			for i, r := range tab {
				if i >= first-2500 && i < first {
					for a := r.start; a < r.end; a++ {
						at = append(at, a)
					}
					continue
				}
				want = append(want, r.plain...)
			}
			sink := &lossSink{}
			c := NewConn(mustKeyLog(t, s.keylog), sink, Options{MaxPending: 64 << 20})
			for _, p := range garbled(feedModes[0].cut(s, newRand(0)), d, at, 0x5a) {
				if err := c.Feed(p.dir, p.data, p.t); err != nil {
					t.Fatalf("Feed: %v", err)
				}
			}
			in := c.Info()
			di := in.Dir[d]
			if got := sink.data[d]; !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes of plaintext, want %d; Note %q", len(got), len(want), in.Note)
			}
			if di.Stopped || di.Resyncs != 1 || di.LostRecords != 2500 || di.Damaged != 1 {
				t.Fatalf("Info.Dir = %+v; want one damaged region of 2,500 records resynchronized", di)
			}
		})
	}
}
