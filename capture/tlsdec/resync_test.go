package tlsdec

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
)

// runWritesSession makes one TLS connection over loopback TCP: the client
// sends a short request, the server answers with one Write per size, then
// close_notify both ways. Go's records are small for the first 128 KiB,
// then up to 16 KiB; a Write above 16 KiB takes two.
func runWritesSession(t testing.TB, cfg sessionConfig, sizes []int) *session {
	t.Helper()
	testCerts(t)
	if cfg.suite13 != 0 {
		old, oldNoAES := defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES
		defaultCipherSuitesTLS13 = []uint16{cfg.suite13}
		defaultCipherSuitesTLS13NoAES = []uint16{cfg.suite13}
		defer func() { defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = old, oldNoAES }()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := &recorder{}
	var keylog syncBuffer
	request := []byte("GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: kube.test\r\n\r\n")
	var writes [][]byte
	for i, n := range sizes {
		writes = append(writes, pattern(n, byte(i)))
	}
	s := &session{plain: [2][]byte{request, bytes.Join(writes, nil)}}
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- func() error {
			raw, err := ln.Accept()
			if err != nil {
				return err
			}
			sc := tls.Server(&recConn{Conn: raw, dir: ServerToClient, rec: rec}, &tls.Config{
				Certificates: []tls.Certificate{ecdsaCert}, MaxVersion: cfg.maxVersion, CipherSuites: cfg.suites12})
			defer sc.Close()
			if _, err := io.ReadFull(sc, make([]byte, len(request))); err != nil {
				return fmt.Errorf("server read: %v", err)
			}
			for _, w := range writes {
				if _, err := sc.Write(w); err != nil {
					return err
				}
			}
			if _, err := sc.Read(make([]byte, 1)); err != io.EOF {
				return fmt.Errorf("server: want EOF, got %v", err)
			}
			return sc.Close()
		}()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := tls.Client(&recConn{Conn: raw, dir: ClientToServer, rec: rec}, &tls.Config{
		ServerName: "kube.test", RootCAs: certPool, MaxVersion: cfg.maxVersion, CipherSuites: cfg.suites12, KeyLogWriter: &keylog})
	if _, err := cc.Write(request); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cc, make([]byte, len(s.plain[ServerToClient]))); err != nil {
		t.Fatalf("client read: %v", err)
	}
	closeSession(t, s, cc, srvErr, &keylog, rec)
	return s
}

// writeSizes returns n sizes from 50 B to 20 KB.
func writeSizes(n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 50 + rng.IntN(20000-50+1)
	}
	return sizes
}

// recInfo is one record of a direction's wire stream, decrypted alone.
type recInfo struct {
	start, end int
	plain      []byte // the application data it carried
	keyUpdate  bool   // a TLS 1.3 KeyUpdate
	appKeys    bool   // after it, the direction uses its application keys
}

// recTable decrypts direction d of s record by record (the other direction
// fed first), to know what each record carries.
func recTable(t testing.TB, s *session, d Direction) []recInfo {
	t.Helper()
	sink := &capSink{}
	c := NewConn(mustKeyLog(t, s.keylog), sink, Options{MaxPending: 64 << 20})
	if err := c.Feed(1-d, s.wire(1-d), 0); err != nil {
		t.Fatal(err)
	}
	w := s.wire(d)
	h := &c.half[d]
	var tab []recInfo
	start := 0
	for _, end := range recordEnds(w) {
		n, ku := len(sink.data[d]), h.stats.KeyUpdates
		if err := c.Feed(d, w[start:end], 0); err != nil {
			t.Fatal(err)
		}
		app := c.version == versionTLS13 && h.phase == phaseApp || c.version == versionTLS12 && h.ccs
		tab = append(tab, recInfo{start: start, end: end, plain: bytes.Clone(sink.data[d][n:]), keyUpdate: h.stats.KeyUpdates > ku, appKeys: app})
		start = end
	}
	if in := c.Info(); !in.Decrypted {
		t.Fatalf("the session does not decrypt: %s", in.Note)
	}
	return tab
}

// gap is a range of a direction's wire stream left out.
type gap struct{ at, n int }

// resyncWant is what decrypting a stream with gaps must give.
type resyncWant struct {
	plain    []byte // all the application data delivered
	resyncs  int
	skipped  int64 // ResyncSkipped, when !lost && !pending
	lostRecs int64
	lost     bool // a gap before the application keys, or a resync that cannot succeed
	pending  bool // the stream ended while resynchronising
}

func (w resyncWant) String() string {
	return fmt.Sprintf("{%d bytes, %d resyncs, %d skipped, %d records lost, lost %v, pending %v}",
		len(w.plain), w.resyncs, w.skipped, w.lostRecs, w.lost, w.pending)
}

// expectGaps models resynchronisation: the records that end before a gap
// are delivered; after it, if the application keys were in use, the first
// record that starts after the gap and is complete before the next one
// resynchronises, unless more than one KeyUpdate was lost; the records
// before it are lost, the bytes fed before it skipped.
func expectGaps(tab []recInfo, gaps []gap) resyncWant {
	var w resyncWant
	i := 0
	app := false
	deliver := func(end int) {
		for ; i < len(tab) && tab[i].end <= end; i++ {
			w.plain = append(w.plain, tab[i].plain...)
			app = tab[i].appKeys
		}
	}
	for g := 0; g < len(gaps); g++ {
		deliver(gaps[g].at)
		if !app {
			w.lost = true
			return w
		}
		first := i
		j := i
		for {
			b := gaps[g].at + gaps[g].n
			for j < len(tab) && tab[j].start < b {
				j++
			}
			if g+1 < len(gaps) && (j == len(tab) || gaps[g+1].at < tab[j].end) {
				w.skipped += int64(gaps[g+1].at - b) // fed between the gaps, all skipped
				g++
				continue
			}
			if j == len(tab) {
				w.pending = true
				return w
			}
			w.skipped += int64(tab[j].start - b)
			break
		}
		kus, ku := 0, 0
		for k := first; k < j; k++ {
			if tab[k].keyUpdate {
				kus, ku = kus+1, k
			}
		}
		switch {
		case kus > 1:
			w.lost = true
			return w
		case kus == 1:
			w.lostRecs += int64(j - ku)
		default:
			w.lostRecs += int64(j - first)
		}
		w.resyncs++
		i = j
	}
	deliver(tab[len(tab)-1].end)
	return w
}

// op is a Feed (gap false) or a Gap call.
type op struct {
	gap  bool
	dir  Direction
	data []byte
	n    int
}

// withGaps turns pieces into Feed calls, leaving the gaps out of direction
// d's bytes and calling Gap (with n, or -1 if unknown) where each begins.
func withGaps(ps []piece, d Direction, gaps []gap, unknown bool) []op {
	var ops []op
	off, g := 0, 0
	gapOp := func() {
		n := gaps[g].n
		if unknown {
			n = -1
		}
		ops = append(ops, op{gap: true, dir: d, n: n})
	}
	for _, p := range ps {
		if p.dir != d {
			ops = append(ops, op{dir: p.dir, data: p.data})
			continue
		}
		for pos, end := off, off+len(p.data); pos < end; {
			if g < len(gaps) && pos >= gaps[g].at {
				if pos == gaps[g].at {
					gapOp()
				}
				pos = min(gaps[g].at+gaps[g].n, end)
				if pos == gaps[g].at+gaps[g].n {
					g++
				}
				continue
			}
			next := end
			if g < len(gaps) {
				next = min(end, gaps[g].at)
			}
			ops = append(ops, op{dir: d, data: p.data[pos-off : next-off]})
			pos = next
		}
		off += len(p.data)
	}
	for ; g < len(gaps); g++ {
		if gaps[g].at == off { // at the very end
			gapOp()
		}
	}
	return ops
}

func runOps(c *Conn, ops []op) []error {
	var errs []error
	for i, o := range ops {
		if o.gap {
			c.Gap(o.dir, o.n)
			continue
		}
		if err := c.Feed(o.dir, o.data, int64(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkResync decrypts s with gaps in d and checks the result against the
// model; it returns the Info.
func checkResync(t testing.TB, s *session, tab []recInfo, d Direction, gaps []gap, unknown bool, ps []piece) (Info, resyncWant) {
	t.Helper()
	want := expectGaps(tab, gaps)
	sink := &capSink{}
	c := NewConn(mustKeyLog(t, s.keylog), sink, Options{MaxPending: 64 << 20})
	if errs := runOps(c, withGaps(ps, d, gaps, unknown)); len(errs) > 0 {
		t.Fatalf("Feed errors: %v", errs)
	}
	checkBounded(t, c)
	in := c.Info()
	di := in.Dir[d]
	if got := sink.data[d]; !bytes.Equal(got, want.plain) {
		t.Fatalf("%s: got %d bytes of plaintext, want %d (first difference at %d); Note %q", d, len(got), len(want.plain), firstDiff(got, want.plain), in.Note)
	}
	// Once the hello of d is in, the other direction decrypts whatever
	// happens to d.
	if o := 1 - d; gaps[0].at >= tab[0].end && (!bytes.Equal(sink.data[o], s.plain[o]) || in.Dir[o].Resyncs != 0 || in.Dir[o].Lost != 0 || in.Dir[o].Err != nil) {
		t.Fatalf("%s is affected by the other direction's gaps: %d/%d bytes, %+v", o, len(sink.data[o]), len(s.plain[o]), in.Dir[o])
	}
	if in.Decrypted || in.Note == "" {
		t.Fatalf("Info: Decrypted %v Note %q; want false and a note", in.Decrypted, in.Note)
	}
	if di.Resyncs != want.resyncs || di.LostRecords != want.lostRecs || di.AppData != int64(len(want.plain)) || di.Err != nil {
		t.Fatalf("Info.Dir[%s] = %+v; want %d resyncs, %d records lost; Note %q", d, di, want.resyncs, want.lostRecs, in.Note)
	}
	if !want.lost && !want.pending && di.ResyncSkipped != want.skipped {
		t.Fatalf("Info.Dir[%s].ResyncSkipped = %d; want %d", d, di.ResyncSkipped, want.skipped)
	}
	switch {
	case want.pending && (!di.Resyncing || di.Stopped),
		want.lost && di.Resyncing == di.Stopped,
		!want.lost && !want.pending && (di.Resyncing || di.Stopped):
		t.Fatalf("Info.Dir[%s]: Resyncing %v, Stopped %v; model %v", d, di.Resyncing, di.Stopped, want)
	}
	var gapBytes int64
	for _, g := range gaps {
		gapBytes += int64(g.n)
	}
	wire := int64(len(s.wire(d)))
	if unknown {
		gapBytes, wire = 0, wire-gapBytes
	}
	if di.Lost != gapBytes+di.ResyncSkipped || di.Bytes != wire {
		t.Fatalf("Info.Dir[%s]: Lost %d, Bytes %d; want %d+%d, %d", d, di.Lost, di.Bytes, gapBytes, di.ResyncSkipped, wire)
	}
	if want.resyncs > 0 && !strings.Contains(in.Note, "resynchronized at offset") {
		t.Fatalf("Note %q; want it to tell the resync", in.Note)
	}
	return in, want
}

var resyncSessions = []struct {
	name string
	cfg  sessionConfig
}{
	{"tls13/aes128gcm", sessionConfig{suite13: tls.TLS_AES_128_GCM_SHA256}},
	{"tls13/chacha20", sessionConfig{suite13: tls.TLS_CHACHA20_POLY1305_SHA256}},
	{"tls12/ecdhe-ecdsa-aes128gcm", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
	{"tls12/ecdhe-ecdsa-chacha20", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}},
	{"tls12/ecdhe-ecdsa-aes128cbc-sha", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}},
}

// TestResync drops ranges of the server's bytes of real crypto/tls
// connections (200 writes of 50 B to 20 KB) and checks that decryption
// resumes with exactly the records that start after each gap.
func TestResync(t *testing.T) {
	// Cases place gaps by record index from the middle, m.
	tests := []struct {
		name    string
		gaps    func(tab []recInfo, m int) []gap
		unknown bool
		resyncs int // 0: the gap is in the handshake, the direction is lost
	}{
		{"inside-one-record", func(tab []recInfo, m int) []gap {
			r := bigRecord(tab, m)
			return []gap{{r.start + 50, 100}}
		}, false, 1},
		{"several-records", func(tab []recInfo, m int) []gap {
			return []gap{{tab[m].start + 10, tab[m+4].start + 20 - (tab[m].start + 10)}}
		}, false, 1},
		{"at-record-boundary", func(tab []recInfo, m int) []gap {
			return []gap{{tab[m].start, 300}}
		}, false, 1},
		{"whole-records", func(tab []recInfo, m int) []gap {
			return []gap{{tab[m].start, tab[m+3].start - tab[m].start}}
		}, false, 1},
		{"zero-bytes", func(tab []recInfo, m int) []gap {
			return []gap{{tab[m].start + 7, 0}}
		}, false, 1},
		{"unknown-size", func(tab []recInfo, m int) []gap {
			return []gap{{tab[m].start + 10, tab[m+4].start + 20 - (tab[m].start + 10)}}
		}, true, 1},
		{"two-gaps", func(tab []recInfo, m int) []gap {
			a, b := tab[m/2+2], bigRecord(tab, m+m/2)
			return []gap{{a.start + 3, 2000}, {b.start + 40, 1448}}
		}, false, 2},
		{"two-gaps-unknown", func(tab []recInfo, m int) []gap {
			a, b := tab[m/2+2], bigRecord(tab, m+m/2)
			return []gap{{a.start + 3, 2000}, {b.start + 40, 1448}}
		}, true, 2},
		{"second-gap-while-resynchronizing", func(tab []recInfo, m int) []gap {
			r := bigRecord(tab, m)
			return []gap{{r.start + 20, 100}, {r.start + 300, 50}}
		}, false, 1},
		{"handshake", func(tab []recInfo, m int) []gap {
			return []gap{{tab[1].start + 3, 20}}
		}, false, 0},
	}
	for _, ss := range resyncSessions {
		t.Run(ss.name, func(t *testing.T) {
			s := runWritesSession(t, ss.cfg, writeSizes(200, 1))
			d := ServerToClient
			tab := recTable(t, s, d)
			m := len(tab) / 2
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					gaps := tc.gaps(tab, m)
					for mode := range 2 { // writes, random pieces
						ps := feedModes[mode].cut(s, newRand(mode))
						in, want := checkResync(t, s, tab, d, gaps, tc.unknown, ps)
						if want.resyncs != tc.resyncs || want.lost != (tc.resyncs == 0) {
							t.Fatalf("the model expects %+v; the case wants %d resyncs", want, tc.resyncs)
						}
						// Against the plaintext written: what came before the
						// first gap is intact, and after a single gap the
						// rest is a suffix of it.
						pre := prefixBefore(tab, gaps[0].at)
						if tc.resyncs > 0 && len(pre) == 0 || !bytes.HasPrefix(want.plain, pre) || !bytes.HasPrefix(s.plain[d], pre) {
							t.Fatal("the plaintext before the gap is not delivered")
						}
						if tail := want.plain[len(pre):]; len(gaps) == 1 && tc.resyncs == 1 && (len(tail) == 0 || !bytes.HasSuffix(s.plain[d], tail)) {
							t.Fatalf("the %d bytes after the gap are not the end of the plaintext written", len(tail))
						}
						if tc.resyncs == 0 && (!strings.Contains(in.Note, "later records not decrypted") || strings.Contains(in.Note, "resynchroniz")) {
							t.Fatalf("handshake gap: Note %q; want the direction given up", in.Note)
						}
					}
				})
			}
		})
	}
}

// bigRecord returns the first record from index i with at least 500 bytes.
func bigRecord(tab []recInfo, i int) recInfo {
	for ; tab[i].end-tab[i].start < 500; i++ {
	}
	return tab[i]
}

// prefixBefore is the plaintext of the records that end by off.
func prefixBefore(tab []recInfo, off int) []byte {
	var p []byte
	for _, r := range tab {
		if r.end <= off {
			p = append(p, r.plain...)
		}
	}
	return p
}

// TestResyncNote pins the note texts.
func TestResyncNote(t *testing.T) {
	b := newSynth(t, 0x1301, true)
	s := b.tls13(synthOpts{records: 10, recordSize: 1000})
	tab := recTable(t, s, ServerToClient)
	r := tab[len(tab)-5]
	lost := tab[len(tab)-3].start - (r.start + 10)
	tests := []struct {
		gaps    []gap
		unknown bool
		note    string
	}{
		{[]gap{{r.start + 10, lost}}, false, fmt.Sprintf("server->client: %d bytes lost at offset %d; resynchronized at offset %d: skipped 0 bytes, 2 records lost", lost, r.start+10, tab[len(tab)-3].start)},
		// Offsets count only the bytes fed after a gap of unknown size.
		{[]gap{{r.start + 10, lost - 5}}, true, fmt.Sprintf("server->client: bytes lost at offset %d; resynchronized at offset %d: skipped 5 bytes, 2 records lost", r.start+10, r.start+15)},
		{[]gap{{r.start + 10, 5}, {r.start + 20, lost - 10}}, false, fmt.Sprintf("server->client: %d bytes lost in 2 gaps from offset %d; resynchronized at offset %d: skipped 5 bytes, 2 records lost", lost-5, r.start+10, tab[len(tab)-3].start)},
		{[]gap{{tab[len(tab)-4].start, tab[len(tab)-3].start - tab[len(tab)-4].start}}, false, fmt.Sprintf("server->client: %d bytes lost at offset %d; resynchronized at offset %d: skipped 0 bytes, 1 record lost", tab[len(tab)-3].start-tab[len(tab)-4].start, tab[len(tab)-4].start, tab[len(tab)-3].start)},
		{[]gap{{tab[3].start, 10}}, false, fmt.Sprintf("server->client: 10 bytes lost at offset %d; later records not decrypted", tab[3].start)},
	}
	for _, tc := range tests {
		ps := []piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: s.wire(ServerToClient)}}
		in, _ := checkResync(t, s, tab, ServerToClient, tc.gaps, tc.unknown, ps)
		if in.Note != tc.note {
			t.Errorf("Note\n%q; want\n%q", in.Note, tc.note)
		}
	}
}

// TestResyncGarbage: after a gap, bytes that hold no record of the
// connection make the direction give up after the scan bound, with a note,
// and nothing is delivered from them, even when they look like records.
func TestResyncGarbage(t *testing.T) {
	// Records that look real (each followed by another header) cost trial
	// decryptions: the work bound ends the resync.
	junkRecords := bytes.Repeat(record(typeAppData, pattern(1000, 9)), 200)
	tests := []struct {
		name string
		junk []byte
		n    int // the gap's size, -1 unknown
		why  string
	}{
		{"random", pattern(300000, 7), 500, "no record authenticated in the"},
		{"random-unknown-size", pattern(300000, 7), -1, "no record authenticated in the"},
		{"fake-records", junkRecords, 60000, "trial decryption limit"},
		{"fake-records-unknown-size", junkRecords, -1, "trial decryption limit"},
		{"short", pattern(1000, 7), 500, ""}, // still looking when the stream ends
	}
	for _, suite := range []uint16{0x1301, 0xc02f} {
		b := newSynth(t, suite, suite>>8 == 0x13)
		var s *session
		if suite>>8 == 0x13 {
			s = b.tls13(synthOpts{records: 10, recordSize: 1000})
		} else {
			s = b.tls12(synthOpts{records: 10, recordSize: 1000})
		}
		w := s.wire(ServerToClient)
		tab := recTable(t, s, ServerToClient)
		cut := tab[len(tab)-4].start + 100
		for _, tc := range tests {
			t.Run(suiteName(suite)+"/"+tc.name, func(t *testing.T) {
				for _, step := range []int{1448, 7, 1 << 20} {
					sink := &capSink{}
					c := NewConn(mustKeyLog(t, s.keylog), sink, Options{})
					feedAll(t, c, []piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: w[:cut]}})
					c.Gap(ServerToClient, tc.n)
					// The junk, then the rest of the stream: too late.
					rest := bytes.Clone(tc.junk)
					if tc.why != "" {
						rest = append(rest, w[cut+500:]...)
					}
					for i := 0; i < len(rest); i += step {
						if err := c.Feed(ServerToClient, rest[i:min(i+step, len(rest))], 0); err != nil {
							t.Fatal(err)
						}
						checkBounded(t, c)
					}
					in := c.Info()
					di := in.Dir[ServerToClient]
					if got, want := sink.data[ServerToClient], prefixBefore(tab, cut); !bytes.Equal(got, want) {
						t.Fatalf("step %d: got %d bytes, want the %d before the gap", step, len(got), len(want))
					}
					if di.Resyncs != 0 || in.Decrypted {
						t.Fatalf("step %d: Info %+v", step, in)
					}
					if tc.why == "" {
						if !strings.Contains(in.Note, "; resynchronizing") || !di.Resyncing || di.Stopped || di.ResyncSkipped+int64(di.Partial) != int64(len(tc.junk)) {
							t.Fatalf("step %d: Note %q, %+v; want still resynchronizing", step, in.Note, di)
						}
						continue
					}
					if !strings.Contains(in.Note, "resync failed at offset") || !strings.Contains(in.Note, tc.why) ||
						!strings.Contains(in.Note, "later records not decrypted") {
						t.Fatalf("step %d: Note %q; want a failed resync: %s", step, in.Note, tc.why)
					}
					if di.ResyncSkipped > maxResyncScan+int64(len(recBuf{})) || di.Partial != 0 || !di.Stopped || di.Resyncing {
						t.Fatalf("step %d: skipped %d bytes (bound %d), Partial %d", step, di.ResyncSkipped, maxResyncScan, di.Partial)
					}
				}
			})
		}
	}
}

// TestResyncKeyUpdate: a KeyUpdate lost in a gap (crypto/tls answers the
// one the test injects) is inferred: the records after it open under the
// next keys. Two KeyUpdates lost are not: the direction is given up.
func TestResyncKeyUpdate(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_CHACHA20_POLY1305_SHA256} {
		t.Run(suiteName(suite), func(t *testing.T) {
			s := runKeyUpdateSession(t, suite)
			tab := recTable(t, s, ServerToClient)
			ku := -1
			for i, r := range tab {
				if r.keyUpdate {
					ku = i
				}
			}
			if ku < 2 || ku+3 > len(tab) {
				t.Fatalf("server KeyUpdate is record %d of %d", ku, len(tab))
			}
			for _, tc := range []struct {
				name string
				gaps []gap
			}{
				{"only-the-keyupdate", []gap{{tab[ku].start, tab[ku].end - tab[ku].start}}},
				{"around-the-keyupdate", []gap{{tab[ku-1].start + 10, tab[ku+1].start + 10 - (tab[ku-1].start + 10)}}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					for _, unknown := range []bool{false, true} {
						in, want := checkResync(t, s, tab, ServerToClient, tc.gaps, unknown, feedModes[1].cut(s, newRand(5)))
						if want.resyncs != 1 || in.Dir[ServerToClient].KeyUpdates != 1 || !strings.Contains(in.Note, "a KeyUpdate among them") {
							t.Fatalf("Info: %+v", in)
						}
					}
				})
			}
		})
	}
	t.Run("two-lost", func(t *testing.T) {
		s := newSynth(t, 0x1303, true).tls13(synthOpts{keyUpdates: 3, records: 100, recordSize: 1000})
		tab := recTable(t, s, ServerToClient)
		var kus []int
		for i, r := range tab {
			if r.keyUpdate {
				kus = append(kus, i)
			}
		}
		g := gap{tab[kus[0]].start - 5, tab[kus[1]].end + 5 - (tab[kus[0]].start - 5)}
		in, want := checkResync(t, s, tab, ServerToClient, []gap{g}, false, feedModes[0].cut(s, nil))
		if !want.lost || in.Dir[ServerToClient].Resyncs != 0 || !strings.Contains(in.Note, "resync failed") {
			t.Fatalf("Note %q; model %+v", in.Note, want)
		}
	})
}

// TestResyncSynth runs the model on synthetic sessions with KeyUpdates and
// records of every size, gaps swept across the whole stream.
func TestResyncSynth(t *testing.T) {
	for _, rs := range resyncSynths(t) {
		t.Run(rs.name, func(t *testing.T) {
			w := len(rs.s.wire(ServerToClient))
			for at := 0; at < w; at += 4999 {
				for _, n := range []int{0, 1, 33, 5000, 40000} {
					if at+n > w {
						continue
					}
					checkResync(t, rs.s, rs.tab, ServerToClient, []gap{{at, n}}, at%2 == 0, feedModes[0].cut(rs.s, nil))
				}
			}
		})
	}
}

type resyncSynth struct {
	name string
	s    *session
	tab  []recInfo
}

var (
	resyncSynthOnce sync.Once
	resyncSynthSet  []resyncSynth
)

// resyncSynths builds, once, synthetic sessions with records of many sizes
// (empty and largest included), in TLS 1.3 with KeyUpdates and TLS 1.2.
func resyncSynths(t testing.TB) []resyncSynth {
	resyncSynthOnce.Do(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		sizes := make([]int, 60)
		for i := range sizes {
			switch i % 10 {
			case 3:
				sizes[i] = 0
			case 7:
				sizes[i] = MaxPlaintext - 5 // the padding makes it the largest
			default:
				sizes[i] = rng.IntN(6000)
			}
		}
		for _, v := range []struct {
			name string
			id   uint16
			v13  bool
		}{{"tls13-aes128gcm", 0x1301, true}, {"tls13-chacha20", 0x1303, true}, {"tls12-aes256gcm", 0xc030, false}, {"tls12-chacha20", 0xcca8, false}} {
			b := newSynth(t, v.id, v.v13)
			var s *session
			if v.v13 {
				s = b.tls13(synthOpts{sizes: sizes, keyUpdates: 4, pad: 5})
			} else {
				s = b.tls12(synthOpts{sizes: sizes})
			}
			resyncSynthSet = append(resyncSynthSet, resyncSynth{v.name, s, recTable(t, s, ServerToClient)})
		}
	})
	return resyncSynthSet
}

// FuzzResync checks the resynchronisation model on synthetic sessions:
// one or two gaps anywhere, of known or unknown size, any piece sizes.
func FuzzResync(f *testing.F) {
	f.Add(uint8(0), uint32(40000), uint16(3000), uint32(0), uint16(0), false, uint8(1))
	f.Add(uint8(1), uint32(70000), uint16(20000), uint32(5000), uint16(100), true, uint8(2))
	f.Add(uint8(2), uint32(30000), uint16(0), uint32(1), uint16(1), false, uint8(3))
	f.Add(uint8(3), uint32(100000), uint16(65535), uint32(100), uint16(65535), false, uint8(4))
	f.Fuzz(func(t *testing.T, variant uint8, at uint32, n uint16, after uint32, n2 uint16, unknown bool, seed uint8) {
		set := resyncSynths(t)
		if len(set) == 0 {
			t.Fatal("no sessions")
		}
		rs := set[int(variant)%len(set)]
		w := len(rs.s.wire(ServerToClient))
		g1 := gap{int(at) % (w + 1), 0}
		g1.n = min(int(n), w-g1.at)
		gaps := []gap{g1}
		if after > 0 {
			a2 := g1.at + g1.n + int(after)%(w-g1.at-g1.n+1)
			gaps = append(gaps, gap{a2, min(int(n2), w-a2)})
		}
		checkResync(t, rs.s, rs.tab, ServerToClient, gaps, unknown, feedModes[1].cut(rs.s, newRand(int(seed))))
	})
}

// BenchmarkResync measures the resync of a gap in a stream of 16 KiB
// records. The gap starts inside a record and ends inside the third after
// it; the timed part feeds, in Ethernet-sized pieces, the bytes from the
// gap's end through the first record after it: the scan of the skipped
// bytes, one trial decryption per record lost (four) and the record
// itself, for a gap of known or unknown size. MB/s counts those bytes; the
// handshake and the bytes before the gap are fed with the timer stopped.
func BenchmarkResync(b *testing.B) {
	for _, bs := range benchSuites {
		s := benchSession(b, bs.id, bs.v13, 16)
		tab := recTable(b, s, ServerToClient)
		m := len(tab) / 2
		g := gap{tab[m].start + 1000, tab[m+3].start + 100 - (tab[m].start + 1000)}
		w := s.wire(ServerToClient)
		after := segments(&session{chunks: []chunk{{dir: ServerToClient, data: w[g.at+g.n : tab[m+4].end]}}}, 1448)
		keys := mustKeyLog(b, s.keylog)
		for _, unknown := range []bool{false, true} {
			name, n := bs.name, g.n
			if unknown {
				name, n = name+"/unknown-size", -1
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(tab[m+4].end - g.at - g.n))
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					c := NewConn(keys, &nopSink{}, Options{})
					c.Feed(ClientToServer, s.wire(ClientToServer), 0)
					c.Feed(ServerToClient, w[:g.at], 0)
					c.Gap(ServerToClient, n)
					b.StartTimer()
					for _, p := range after {
						if err := c.Feed(ServerToClient, p.data, 0); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if in := c.Info(); in.Dir[ServerToClient].Resyncs != 1 || in.Dir[ServerToClient].LostRecords != 4 {
						b.Fatal(in.Note)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// TestResyncCredit: resyncs spend a credit that bytes fed earn, so that
// many gaps cannot make a Conn spend unbounded CPU on trial decryptions.
func TestResyncCredit(t *testing.T) {
	s := newSynth(t, 0x1301, true).tls13(synthOpts{records: 10, recordSize: 1000})
	tab := recTable(t, s, ServerToClient)
	w := s.wire(ServerToClient)
	g := gap{tab[len(tab)-5].start + 10, 1000}
	for _, credit := range []int64{maxResyncWork, 100} {
		c := NewConn(mustKeyLog(t, s.keylog), nil, Options{})
		feedAll(t, c, []piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: w[:g.at]}})
		if h := &c.half[ServerToClient]; h.credit != maxResyncCredit && h.credit != min(maxResyncWork+resyncCreditPerByte*int64(g.at), maxResyncCredit) {
			t.Fatalf("credit %d after %d bytes", h.credit, g.at)
		}
		rest := w[g.at+g.n:]
		c.half[ServerToClient].credit = credit - resyncCreditPerByte*int64(len(rest)) // what rest earns
		c.Gap(ServerToClient, g.n)
		feedAll(t, c, []piece{{dir: ServerToClient, data: rest}})
		in := c.Info()
		if ok := in.Dir[ServerToClient].Resyncs == 1; ok != (credit > 100) || !ok && !strings.Contains(in.Note, "trial decryption limit reached") {
			t.Fatalf("credit %d: Note %q", credit, in.Note)
		}
	}
}
