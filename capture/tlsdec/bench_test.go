package tlsdec

import (
	"runtime/debug"
	"testing"
)

type nopSink struct{ n int64 }

func (s *nopSink) Data(_ Direction, p []byte, _ int64) { s.n += int64(len(p)) }

// segments cuts a session's writes into TCP-sized pieces.
func segments(s *session, mss int) []piece {
	var ps []piece
	for _, c := range s.chunks {
		for p := c.data; len(p) > 0; {
			n := min(len(p), mss)
			ps = append(ps, piece{dir: c.dir, data: p[:n]})
			p = p[n:]
		}
	}
	return ps
}

var benchSuites = []struct {
	name string
	id   uint16
	v13  bool
}{
	{"tls13-aes128gcm", 0x1301, true},
	{"tls13-aes256gcm", 0x1302, true},
	{"tls13-chacha20", 0x1303, true},
	{"tls12-aes128gcm", 0xc02f, false},
	{"tls12-chacha20", 0xcca8, false},
}

func benchSession(b testing.TB, id uint16, v13 bool, records int) *session {
	o := synthOpts{records: records, recordSize: 16384}
	if v13 {
		return newSynth(b, id, true).tls13(o)
	}
	return newSynth(b, id, false).tls12(o)
}

// BenchmarkDecrypt decrypts a whole session (handshake, then 4 MiB each way
// in 16 KiB records) per iteration; MB/s counts ciphertext fed. The
// segment sizes are an Ethernet MSS (records are copied together across
// Feed calls) and a loopback one (/seg64k: most records are decrypted
// straight from the caller's bytes); /open-only is the AEAD alone on the
// same record size, the ceiling.
func BenchmarkDecrypt(b *testing.B) {
	for _, bs := range benchSuites {
		s := benchSession(b, bs.id, bs.v13, 256) // 4 MiB each way
		keys := mustKeyLog(b, s.keylog)
		for _, seg := range []struct {
			name string
			mss  int
		}{{"", 1448}, {"/seg64k", 65483}} {
			ps := segments(s, seg.mss)
			var total int64
			for _, p := range ps {
				total += int64(len(p.data))
			}
			b.Run(bs.name+seg.name, func(b *testing.B) {
				b.SetBytes(total)
				b.ReportAllocs()
				for b.Loop() {
					sink := &nopSink{}
					c := NewConn(keys, sink, Options{})
					for _, p := range ps {
						if err := c.Feed(p.dir, p.data, 0); err != nil {
							b.Fatal(err)
						}
					}
					if sink.n != int64(len(s.plain[0])+len(s.plain[1])) {
						b.Fatalf("decrypted %d bytes", sink.n)
					}
				}
			})
		}
		benchOpenOnly(b, bs)
	}
}

// benchOpenOnly is the baseline for BenchmarkDecrypt: the AEAD alone
// opening 16 KiB records, with no record layer.
func benchOpenOnly(b *testing.B, bs struct {
	name string
	id   uint16
	v13  bool
}) {
	{
		su := lookupSuite(bs.id, bs.v13)
		var seal, open *keys
		var err error
		if bs.v13 {
			secret := make([]byte, max(su.hashLen, 32))
			seal, _ = newKeys13(su, secret)
			open, err = newKeys13(su, secret)
		} else {
			var cr, sr [32]byte
			seal, _, _ = newKeys12(su, make([]byte, 48), &cr, &sr)
			open, _, err = newKeys12(su, make([]byte, 48), &cr, &sr)
		}
		if err != nil {
			b.Fatal(err)
		}
		var recs [][]byte
		var total int64
		payload := pattern(16384, 1)
		for range 64 {
			var r []byte
			if bs.v13 {
				r = sealRecord13(seal, typeAppData, payload, 0)
			} else {
				sy := &synth{t: b, out: [2]*keys{seal}}
				sy.seal(ClientToServer, typeAppData, payload, 0)
				r = sy.sess.chunks[0].data
			}
			recs = append(recs, r)
			total += int64(len(r))
		}
		dst := make([]byte, MaxCiphertext12)
		b.Run(bs.name+"/open-only", func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				open.seq = 0
				for _, r := range recs {
					hdr := [5]byte(r[:5])
					var err error
					if bs.v13 {
						_, err = open.open13(dst, &hdr, r[5:])
					} else {
						_, err = open.open12(dst, &hdr, r[5:])
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestSteadyStateAllocs pins the per-record cost: once the keys are set
// up, decrypting records allocates nothing, whether a record arrives whole
// or in pieces.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	sessions := map[string]*session{}
	for _, bs := range benchSuites {
		sessions[bs.name] = benchSession(t, bs.id, bs.v13, 64)
	}
	// A crypto/tls CBC session: the synthetic builder seals AEAD only.
	cfg := goSessions[6].cfg // tls12/ecdhe-ecdsa-aes128cbc-sha
	cfg.uploadSize, cfg.downloadSize = 1<<20, 1<<20
	sessions["tls12-aes128cbc-sha"] = runSession(t, cfg)
	for name, s := range sessions {
		for _, mss := range []int{1448, 65483} {
			t.Run(name, func(t *testing.T) {
				ps := segments(s, mss)
				// AllocsPerRun counts every allocation of the process, so a
				// goroutine left by another test can add one: the least of
				// three attempts is what Feed itself allocates.
				var c *Conn
				best := -1.0
				for range 3 {
					c = NewConn(mustKeyLog(t, s.keylog), &nopSink{}, Options{})
					// The handshake, the first records (key setup), and one
					// record split across calls (pool warm-up).
					i := 0
					for ; i < len(ps)/4; i++ {
						if err := c.Feed(ps[i].dir, ps[i].data, 0); err != nil {
							t.Fatal(err)
						}
					}
					// AllocsPerRun runs the function twice (a warm-up, then
					// the measured run), each feeding a quarter of the
					// session: the count is the exact total over many records.
					// GC is off while counting: a sync.Pool may drop its
					// buffers at a collection, and refilling costs one
					// allocation, whoever triggered the collection.
					q := len(ps) / 4
					old := debug.SetGCPercent(-1)
					allocs := testing.AllocsPerRun(1, func() {
						for end := i + q; i < end; i++ {
							if err := c.Feed(ps[i].dir, ps[i].data, int64(i)); err != nil {
								t.Fatal(err)
							}
						}
					})
					debug.SetGCPercent(old)
					if best < 0 || allocs < best {
						best = allocs
					}
					if best == 0 {
						break
					}
				}
				if best != 0 {
					t.Fatalf("mss %d: %v allocations feeding a quarter of the session; want 0", mss, best)
				}
				if in := c.Info(); in.Dir[0].Err != nil || in.Dir[1].Err != nil {
					t.Fatal(in.Note)
				}
			})
		}
	}
}
