package tlsdec

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// capSink collects what a Conn delivers.
type capSink struct {
	data  [2][]byte
	times [2][]int64
}

func (s *capSink) Data(d Direction, p []byte, t int64) {
	s.data[d] = append(s.data[d], p...)
	s.times[d] = append(s.times[d], t)
}

// piece is one Feed call.
type piece struct {
	dir  Direction
	data []byte
	t    int64
}

// Feeding strategies: how a recorded session is cut into Feed calls. Times
// are the piece index, so the test can tell which piece completed a record.
var feedModes = []struct {
	name string
	cut  func(s *session, rng *rand.Rand) []piece
}{
	{"writes", func(s *session, _ *rand.Rand) []piece {
		var ps []piece
		for _, c := range s.chunks {
			ps = append(ps, piece{dir: c.dir, data: c.data})
		}
		return ps
	}},
	{"random", func(s *session, rng *rand.Rand) []piece {
		var ps []piece
		for _, c := range s.chunks {
			for p := c.data; len(p) > 0; {
				n := min(len(p), 1+rng.IntN(3000))
				if rng.IntN(4) == 0 {
					n = min(len(p), 1+rng.IntN(7))
				}
				ps = append(ps, piece{dir: c.dir, data: p[:n]})
				p = p[n:]
			}
		}
		return ps
	}},
	{"bytes", func(s *session, _ *rand.Rand) []piece {
		// One byte at a time through the handshake and the first 64 KiB
		// of each direction (plenty of records), then whole writes to keep
		// the test quick.
		var ps []piece
		var off [2]int
		for _, c := range s.chunks {
			for i := 0; i < len(c.data); i++ {
				if off[c.dir] >= 64<<10 {
					ps = append(ps, piece{dir: c.dir, data: c.data[i:]})
					break
				}
				ps = append(ps, piece{dir: c.dir, data: c.data[i : i+1]})
				off[c.dir]++
			}
		}
		return ps
	}},
	{"sequential", func(s *session, rng *rand.Rand) []piece {
		// All of the client's bytes first: its records after the
		// ClientHello wait for the ServerHello.
		var ps []piece
		for _, d := range []Direction{ClientToServer, ServerToClient} {
			w := s.wire(d)
			for len(w) > 0 {
				n := min(len(w), 1+rng.IntN(40000))
				ps = append(ps, piece{dir: d, data: w[:n]})
				w = w[n:]
			}
		}
		return ps
	}},
}

func newRand(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 7)) }

// feedAll feeds pieces (setting their times) and fails on any error.
func feedAll(t testing.TB, c *Conn, ps []piece) {
	t.Helper()
	for i := range ps {
		ps[i].t = int64(i)
		if err := c.Feed(ps[i].dir, ps[i].data, ps[i].t); err != nil {
			t.Fatalf("Feed(%s, piece %d) = %v", ps[i].dir, i, err)
		}
	}
}

// recordEnds returns the stream offsets just past each record of a wire stream.
func recordEnds(w []byte) []int {
	var ends []int
	for off := 0; off+5 <= len(w); {
		off += 5 + int(binary.BigEndian.Uint16(w[off+3:]))
		ends = append(ends, off)
	}
	return ends
}

// checkTimes checks that every Data time is the time of a piece that
// completed a record of that direction, in order.
func checkTimes(t *testing.T, s *session, ps []piece, sink *capSink) {
	t.Helper()
	for _, d := range []Direction{ClientToServer, ServerToClient} {
		ok := map[int64]bool{}
		ends := recordEnds(s.wire(d))
		off, e := 0, 0
		for _, p := range ps {
			if p.dir != d {
				continue
			}
			off += len(p.data)
			for e < len(ends) && ends[e] <= off {
				ok[p.t] = true
				e++
			}
		}
		last := int64(-1)
		for _, tm := range sink.times[d] {
			if !ok[tm] || tm < last {
				t.Fatalf("%s: Data time %d is not the time of a piece completing a record (or out of order)", d, tm)
			}
			last = tm
		}
	}
}

func mustKeyLog(t testing.TB, b []byte) *KeyLog {
	t.Helper()
	k, err := ParseKeyLog(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if st := k.Stats(); st.Bad != 0 {
		t.Fatalf("key log: %d bad lines: %v", st.Bad, st.BadLines)
	}
	return k
}

type wantInfo struct {
	version uint16
	suite   uint16
	alpn    string
}

var goSessions = []struct {
	name string
	cfg  sessionConfig
	want wantInfo
}{
	{"tls12/ecdhe-ecdsa-aes128gcm", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, clientALPN: []string{"http/1.1"}, serverALPN: []string{"h2", "http/1.1"}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "http/1.1"}},
	{"tls12/ecdhe-ecdsa-aes256gcm", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}, clientALPN: []string{"h2", "http/1.1"}, serverALPN: []string{"h2"}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "h2"}},
	{"tls12/ecdhe-ecdsa-chacha20", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, ""}},
	{"tls12/ecdhe-rsa-aes128gcm", sessionConfig{maxVersion: tls.VersionTLS12, rsa: true, suites12: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, clientALPN: []string{"h2"}, serverALPN: []string{"h2"}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "h2"}},
	{"tls12/ecdhe-rsa-aes256gcm", sessionConfig{maxVersion: tls.VersionTLS12, rsa: true, suites12: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ""}},
	{"tls12/ecdhe-rsa-chacha20", sessionConfig{maxVersion: tls.VersionTLS12, rsa: true, suites12: []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, ""}},
	{"tls12/ecdhe-ecdsa-aes128cbc-sha", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, ""}},
	{"tls12/ecdhe-rsa-aes256cbc-sha", sessionConfig{maxVersion: tls.VersionTLS12, rsa: true, suites12: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, ""}},
	{"tls12/ecdhe-ecdsa-aes128cbc-sha256", sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, ""}},
	{"tls12/client-cert", sessionConfig{maxVersion: tls.VersionTLS12, clientCert: true, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		wantInfo{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ""}},
	{"tls13/aes128gcm", sessionConfig{suite13: tls.TLS_AES_128_GCM_SHA256, clientALPN: []string{"h2", "http/1.1"}, serverALPN: []string{"h2", "http/1.1"}},
		wantInfo{tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, "h2"}},
	{"tls13/aes256gcm", sessionConfig{suite13: tls.TLS_AES_256_GCM_SHA384, clientALPN: []string{"http/1.1"}, serverALPN: []string{"h2", "http/1.1"}},
		wantInfo{tls.VersionTLS13, tls.TLS_AES_256_GCM_SHA384, "http/1.1"}},
	{"tls13/chacha20", sessionConfig{suite13: tls.TLS_CHACHA20_POLY1305_SHA256, clientALPN: []string{"h2"}, serverALPN: []string{"h2"}},
		wantInfo{tls.VersionTLS13, tls.TLS_CHACHA20_POLY1305_SHA256, "h2"}},
	{"tls13/hello-retry", sessionConfig{suite13: tls.TLS_AES_128_GCM_SHA256, curves: []tls.CurveID{tls.CurveP256}, clientALPN: []string{"h2"}, serverALPN: []string{"h2"}},
		wantInfo{tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, "h2"}},
	{"tls13/client-cert", sessionConfig{suite13: tls.TLS_AES_256_GCM_SHA384, clientCert: true},
		wantInfo{tls.VersionTLS13, tls.TLS_AES_256_GCM_SHA384, ""}},
}

func TestDecryptGoSessions(t *testing.T) {
	for _, tc := range goSessions {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.uploadSize, cfg.downloadSize = 1<<20, 1<<20
			s := runSession(t, cfg)
			if s.state.Version != tc.want.version || s.state.CipherSuite != tc.want.suite {
				t.Fatalf("crypto/tls negotiated %#x/%#x; the test wants %#x/%#x", s.state.Version, s.state.CipherSuite, tc.want.version, tc.want.suite)
			}
			keys := mustKeyLog(t, s.keylog)
			for _, m := range feedModes {
				t.Run(m.name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(1, uint64(len(m.name))))
					ps := m.cut(s, rng)
					sink := &capSink{}
					c := NewConn(keys, sink, Options{MaxPending: 4 << 20})
					feedAll(t, c, ps)
					for _, d := range []Direction{ClientToServer, ServerToClient} {
						if !bytes.Equal(sink.data[d], s.plain[d]) {
							t.Fatalf("%s plaintext: got %d bytes, want %d (first difference at %d)", d, len(sink.data[d]), len(s.plain[d]), firstDiff(sink.data[d], s.plain[d]))
						}
					}
					checkTimes(t, s, ps, sink)
					checkInfo(t, c.Info(), tc.want, s)
				})
			}
		})
	}
}

func checkInfo(t *testing.T, in Info, want wantInfo, s *session) {
	t.Helper()
	if !in.Decrypted || in.Note != "" {
		t.Errorf("Info: Decrypted = %v, Note = %q; want true, \"\"", in.Decrypted, in.Note)
	}
	if in.Version != want.version || in.Cipher != want.suite || in.CipherName != tls.CipherSuiteName(want.suite) {
		t.Errorf("Info: version %#x cipher %#x %s; want %#x %#x", in.Version, in.Cipher, in.CipherName, want.version, want.suite)
	}
	if in.ALPN != want.alpn || in.ALPN != s.state.NegotiatedProtocol {
		t.Errorf("Info.ALPN = %q; want %q (crypto/tls: %q)", in.ALPN, want.alpn, s.state.NegotiatedProtocol)
	}
	if in.SNI != "kube.test" {
		t.Errorf("Info.SNI = %q; want kube.test", in.SNI)
	}
	if in.Resumed != s.state.DidResume {
		t.Errorf("Info.Resumed = %v; crypto/tls says %v", in.Resumed, s.state.DidResume)
	}
	for d := range in.Dir {
		di := in.Dir[d]
		if di.Err != nil || di.Undecryptable != 0 || di.Decrypted == 0 || !di.CloseNotify || di.Pending != 0 {
			t.Errorf("Info.Dir[%s] = %+v; want no error, all records decrypted, close_notify", Direction(d), di)
		}
		if di.AppData != int64(len(s.plain[d])) {
			t.Errorf("Info.Dir[%s].AppData = %d; want %d", Direction(d), di.AppData, len(s.plain[d]))
		}
		if di.Bytes != int64(len(s.wire(Direction(d)))) {
			t.Errorf("Info.Dir[%s].Bytes = %d; want %d", Direction(d), di.Bytes, len(s.wire(Direction(d))))
		}
	}
	if len(in.Alerts) != 2 || in.Alerts[0].String() != "close_notify" {
		t.Errorf("Info.Alerts = %v; want two close_notify", in.Alerts)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// smallSession is a quick TLS 1.3 session for the tests that break things.
func smallSession(t *testing.T, cfg sessionConfig) *session {
	if cfg.uploadSize == 0 {
		cfg.uploadSize, cfg.downloadSize = 40000, 100000
	}
	return runSession(t, cfg)
}

// dropLines returns the key log without the lines starting with prefix.
func dropLines(keylog []byte, prefix string) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(keylog, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte(prefix+" ")) {
			out = append(out, l...)
		}
	}
	return out
}

func TestMissingKeys(t *testing.T) {
	s13 := smallSession(t, sessionConfig{clientALPN: []string{"h2"}, serverALPN: []string{"h2"}})
	s12 := smallSession(t, sessionConfig{maxVersion: tls.VersionTLS12})
	other := smallSession(t, sessionConfig{})
	tests := []struct {
		name      string
		s         *session
		keylog    []byte // nil: no KeyLog at all
		note      string // substring of Info.Note
		c2s, s2c  bool   // directions whose plaintext is complete
		alpnKnown bool
	}{
		{"no-keylog", s13, nil, "no key log", false, false, false},
		{"other-connection", s13, other.keylog, "key log has no secrets for client random", false, false, false},
		{"tls12-no-client-random", s12, []byte("# nothing\n"), "key log has no secrets for client random", false, false, false},
		{"no-server-traffic-secret", s13, dropLines(s13.keylog, "SERVER_TRAFFIC_SECRET_0"), "key log has no SERVER_TRAFFIC_SECRET_0 for client random", true, false, true},
		{"no-client-traffic-secret", s13, dropLines(s13.keylog, "CLIENT_TRAFFIC_SECRET_0"), "key log has no CLIENT_TRAFFIC_SECRET_0 for client random", false, true, true},
		// Handshake secrets missing: application data is still decrypted,
		// the handshake records (and so the ALPN) are not.
		{"no-handshake-secrets", s13, dropLines(dropLines(s13.keylog, "SERVER_HANDSHAKE_TRAFFIC_SECRET"), "CLIENT_HANDSHAKE_TRAFFIC_SECRET"), "key log has no SERVER_HANDSHAKE_TRAFFIC_SECRET", true, true, false},
		{"only-client-handshake-secret-missing", s13, dropLines(s13.keylog, "CLIENT_HANDSHAKE_TRAFFIC_SECRET"), "key log has no CLIENT_HANDSHAKE_TRAFFIC_SECRET", true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var keys *KeyLog
			if tc.keylog != nil {
				keys = mustKeyLog(t, tc.keylog)
			}
			sink := &capSink{}
			c := NewConn(keys, sink, Options{})
			feedAll(t, c, feedModes[0].cut(tc.s, nil))
			in := c.Info()
			if in.Decrypted || !strings.Contains(in.Note, tc.note) {
				t.Errorf("Info: Decrypted = %v, Note = %q; want false, a note containing %q", in.Decrypted, in.Note, tc.note)
			}
			if cr := hex.EncodeToString(tc.s.chunks[0].data[11:43]); in.ClientRandom != cr || (tc.keylog != nil && !strings.Contains(in.Note, cr)) {
				t.Errorf("Info.ClientRandom = %q, Note = %q; want %s in both", in.ClientRandom, in.Note, cr)
			}
			for d, complete := range []bool{tc.c2s, tc.s2c} {
				got, want := sink.data[d], tc.s.plain[d]
				if complete && !bytes.Equal(got, want) || !complete && len(got) != 0 {
					t.Errorf("%s: got %d bytes of plaintext; want complete=%v (%d bytes)", Direction(d), len(got), complete, len(want))
				}
			}
			if (in.ALPN == "h2") != tc.alpnKnown {
				t.Errorf("Info.ALPN = %q; want known=%v", in.ALPN, tc.alpnKnown)
			}
			if in.SNI != "kube.test" || in.Version == 0 {
				t.Errorf("Info: SNI %q version %#x; the handshake must still be parsed", in.SNI, in.Version)
			}
		})
	}
}

func TestResumption(t *testing.T) {
	t.Run("tls12", func(t *testing.T) {
		cache := tls.NewLRUClientSessionCache(4)
		cfg := sessionConfig{maxVersion: tls.VersionTLS12, cache: cache, uploadSize: 1000, downloadSize: 50000}
		first := runSession(t, cfg)
		second := runSession(t, cfg)
		if !second.state.DidResume {
			t.Fatal("crypto/tls did not resume")
		}
		// Go's client logs no CLIENT_RANDOM for a resumed session.
		c := NewConn(mustKeyLog(t, append(first.keylog, second.keylog...)), nil, Options{})
		feedAll(t, c, feedModes[0].cut(second, nil))
		in := c.Info()
		if in.Decrypted || !strings.Contains(in.Note, "key log has no secrets for client random "+in.ClientRandom) || !in.Resumed {
			t.Fatalf("Info: Decrypted %v Resumed %v Note %q; want a note naming the client random", in.Decrypted, in.Resumed, in.Note)
		}
		// The resumed session uses the first one's master secret: logged
		// under the new client random, it decrypts.
		master := strings.Fields(string(first.keylog))[2]
		line := fmt.Sprintf("CLIENT_RANDOM %s %s\n", in.ClientRandom, master)
		sink := &capSink{}
		c = NewConn(mustKeyLog(t, []byte(line)), sink, Options{})
		feedAll(t, c, feedModes[1].cut(second, rand.New(rand.NewPCG(2, 2))))
		if in := c.Info(); !in.Decrypted || !in.Resumed {
			t.Fatalf("Info: Decrypted %v Resumed %v Note %q; want decrypted, resumed", in.Decrypted, in.Resumed, in.Note)
		}
		for d := range sink.data {
			if !bytes.Equal(sink.data[d], second.plain[d]) {
				t.Fatalf("%s plaintext differs", Direction(d))
			}
		}
	})
	t.Run("tls13", func(t *testing.T) {
		cache := tls.NewLRUClientSessionCache(4)
		cfg := sessionConfig{cache: cache, uploadSize: 1000, downloadSize: 50000, clientALPN: []string{"h2"}, serverALPN: []string{"h2"}}
		runSession(t, cfg)
		second := runSession(t, cfg)
		if !second.state.DidResume {
			t.Fatal("crypto/tls did not resume")
		}
		sink := &capSink{}
		c := NewConn(mustKeyLog(t, second.keylog), sink, Options{})
		feedAll(t, c, feedModes[0].cut(second, nil))
		checkInfo(t, c.Info(), wantInfo{tls.VersionTLS13, second.state.CipherSuite, "h2"}, second)
		for d := range sink.data {
			if !bytes.Equal(sink.data[d], second.plain[d]) {
				t.Fatalf("%s plaintext differs", Direction(d))
			}
		}
	})
}

// recordAt returns the index and offset of the first record of w whose
// outer type is typ, at or after record index from.
func recordAt(w []byte, typ byte, from int) (int, int) {
	off := 0
	for i := 0; off+5 <= len(w); i++ {
		if i >= from && w[off] == typ {
			return i, off
		}
		off += 5 + int(binary.BigEndian.Uint16(w[off+3:]))
	}
	return -1, -1
}

func TestDecryptFailure(t *testing.T) {
	s := smallSession(t, sessionConfig{})
	w := s.wire(ServerToClient)
	// A protected record well after the handshake (which takes records 0
	// to 5: ServerHello, ChangeCipherSpec, EncryptedExtensions,
	// Certificate, CertificateVerify, Finished).
	if idx, _ := recordAt(w, typeAppData, 8); idx < 0 {
		t.Fatal("no application data record")
	}
	// A byte flipped in the first record under the application secret:
	// no record has authenticated under it yet, so nothing says the
	// secret is right and the record damaged (a flip in a later record
	// is resynchronized: TestResyncInPlace).
	firstIdx, firstOff := firstAppRecord(t, s)
	tests := []struct {
		name   string
		keylog []byte
		tamper int // offset in w to flip, or -1
	}{
		{"wrong-secret", corruptSecret(s.keylog, "SERVER_TRAFFIC_SECRET_0"), -1},
		{"flipped-byte", s.keylog, firstOff + 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &capSink{}
			c := NewConn(mustKeyLog(t, tc.keylog), sink, Options{})
			var gotErr error
			wire := [2][]byte{s.wire(ClientToServer), bytes.Clone(w)}
			if tc.tamper >= 0 {
				wire[1][tc.tamper] ^= 0x40
			}
			if err := c.Feed(ClientToServer, wire[0][:recordEnds(wire[0])[0]], 1); err != nil { // the ClientHello
				t.Fatal(err)
			}
			for i := 0; i < len(wire[1]); i += 1000 {
				if err := c.Feed(ServerToClient, wire[1][i:min(i+1000, len(wire[1]))], int64(i)); err != nil {
					if gotErr != nil {
						t.Fatalf("second error %v after %v", err, gotErr)
					}
					gotErr = err
				}
			}
			// A direction reports one error: garbage after it is counted.
			if err := c.Feed(ServerToClient, []byte{99, 3, 3, 0, 1, 0}, 0); err != nil {
				t.Fatalf("Feed after the failure = %v; want nil", err)
			}
			var e *Error
			if !errors.As(gotErr, &e) || !errors.Is(gotErr, ErrDecrypt) {
				t.Fatalf("Feed error = %v; want *Error wrapping ErrDecrypt", gotErr)
			}
			// The first record under the application secret fails.
			wantIdx, wantOff := firstIdx, firstOff
			if e.Dir != ServerToClient || e.Record != int64(wantIdx) || e.Offset != int64(wantOff) {
				t.Fatalf("error %v; want server->client record %d at offset %d", e, wantIdx, wantOff)
			}
			if !strings.Contains(e.Error(), fmt.Sprintf("tlsdec: server->client record %d at offset %d: decryption failed", wantIdx, wantOff)) {
				t.Errorf("Error() = %q", e.Error())
			}
			in := c.Info()
			if in.Decrypted || !strings.Contains(in.Note, "decryption failed") || in.Dir[ServerToClient].Err != gotErr {
				t.Errorf("Info: Decrypted %v Note %q Err %v", in.Decrypted, in.Note, in.Dir[ServerToClient].Err)
			}
			if in.Dir[ServerToClient].Undecryptable == 0 {
				t.Errorf("records after the failure are not counted as undecryptable")
			}
			if !bytes.HasPrefix(s.plain[ServerToClient], sink.data[ServerToClient]) {
				t.Errorf("delivered data is not a prefix of the plaintext")
			}
		})
	}
}

// firstAppRecord finds the first server record under the application
// secret by decrypting with a fresh Conn and counting handshake records.
func firstAppRecord(t *testing.T, s *session) (int, int) {
	w := s.wire(ServerToClient)
	c := NewConn(mustKeyLog(t, s.keylog), nil, Options{})
	if err := c.Feed(ClientToServer, s.chunks[0].data, 0); err != nil {
		t.Fatal(err)
	}
	off := 0
	for i := 0; off < len(w); i++ {
		if c.half[ServerToClient].phase == phaseApp {
			return i, off
		}
		n := 5 + int(binary.BigEndian.Uint16(w[off+3:]))
		if err := c.Feed(ServerToClient, w[off:off+n], 0); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	t.Fatal("no application record")
	return 0, 0
}

func corruptSecret(keylog []byte, lbl string) []byte {
	out := bytes.Clone(keylog)
	i := bytes.Index(out, []byte(lbl+" "))
	j := i + len(lbl) + 1 + 64 + 1
	if out[j] == '0' {
		out[j] = '1'
	} else {
		out[j] = '0'
	}
	return out
}

// TestGap: a gap in the server's bytes while its records wait for the
// client's hello (only part of the ClientHello is fed) cannot be
// resynchronised: the direction is given up at the gap, and the records
// before it are still decrypted once the ClientHello is in. TestResync
// covers gaps after the handshake.
func TestGap(t *testing.T) {
	s := smallSession(t, sessionConfig{})
	sink := &capSink{}
	c := NewConn(mustKeyLog(t, s.keylog), sink, Options{})
	w := [2][]byte{s.wire(ClientToServer), s.wire(ServerToClient)}
	cut := len(w[1]) / 2
	feedAll(t, c, []piece{{dir: ClientToServer, data: w[0][:400]}, {dir: ServerToClient, data: w[1][:cut]}})
	c.Gap(ServerToClient, 1448)
	feedAll(t, c, []piece{{dir: ServerToClient, data: w[1][cut+1448:]}, {dir: ClientToServer, data: w[0][400:]}})
	in := c.Info()
	want := fmt.Sprintf("server->client: 1448 bytes lost at offset %d", cut)
	if in.Decrypted || !strings.Contains(in.Note, want) {
		t.Fatalf("Info: Decrypted %v Note %q; want a note %q", in.Decrypted, in.Note, want)
	}
	if in.Dir[ServerToClient].Lost != 1448 || in.Dir[ServerToClient].Bytes != int64(len(w[1])) {
		t.Errorf("Info.Dir[server->client] = %+v", in.Dir[ServerToClient])
	}
	if got := sink.data[ServerToClient]; len(got) == 0 || len(got) >= len(s.plain[1]) || !bytes.HasPrefix(s.plain[1], got) {
		t.Errorf("server->client: got %d bytes; want a proper prefix of the %d", len(got), len(s.plain[1]))
	}
	if !bytes.Equal(sink.data[ClientToServer], s.plain[0]) {
		t.Errorf("client->server is not affected by the other direction's gap")
	}
}

func TestPendingLimit(t *testing.T) {
	s := smallSession(t, sessionConfig{uploadSize: 600 << 10, downloadSize: 1000})
	sink := &capSink{}
	c := NewConn(mustKeyLog(t, s.keylog), sink, Options{})
	feedAll(t, c, feedModes[3].cut(s, rand.New(rand.NewPCG(3, 3)))) // client first
	in := c.Info()
	if in.Decrypted || !strings.Contains(in.Note, "client->server: more than 262144 bytes held waiting for the server's hello") {
		t.Fatalf("Info: Decrypted %v Note %q", in.Decrypted, in.Note)
	}
	if len(sink.data[ClientToServer]) != 0 || !bytes.Equal(sink.data[ServerToClient], s.plain[1]) {
		t.Fatalf("got %d/%d bytes; want none from the client, all from the server", len(sink.data[0]), len(sink.data[1]))
	}
	// Server first: the server's records wait for the ClientHello.
	sink = &capSink{}
	c = NewConn(mustKeyLog(t, s.keylog), sink, Options{})
	var ps []piece
	for _, d := range []Direction{ServerToClient, ClientToServer} {
		ps = append(ps, piece{dir: d, data: s.wire(d)})
	}
	feedAll(t, c, ps)
	if in := c.Info(); !in.Decrypted {
		t.Fatalf("server first: Info.Note = %q", in.Note)
	}
}
