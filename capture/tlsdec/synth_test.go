package tlsdec

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// synth builds TLS sessions record by record with chosen secrets, for what
// crypto/tls cannot be made to send (KeyUpdate, 0-RTT, odd versions) and
// for benchmarks. Its sealing mirrors the package's opening, so it proves
// little about key derivation on its own: the crypto/tls and corpus tests do
// that; synth tests the state machine.
type synth struct {
	t     testing.TB
	s     *suite
	cr    [32]byte
	sr    [32]byte
	sec   map[label][]byte
	out   [2]*keys // sealing keys; nil: plaintext
	sess  session
	clock int64
}

func newSynth(t testing.TB, suiteID uint16, v13 bool) *synth {
	b := &synth{t: t, s: lookupSuite(suiteID, v13), sec: map[label][]byte{}}
	if b.s == nil {
		t.Fatalf("no suite %#x", suiteID)
	}
	rand.Read(b.cr[:])
	rand.Read(b.sr[:])
	if v13 {
		for _, l := range []label{labelClientEarly, labelClientHS, labelServerHS, labelClientApp, labelServerApp, labelExporter} {
			s := make([]byte, b.s.hashLen)
			rand.Read(s)
			b.sec[l] = s
		}
	} else {
		s := make([]byte, 48)
		rand.Read(s)
		b.sec[labelMaster] = s
	}
	return b
}

func (b *synth) keylog(omit ...label) []byte {
	var out []byte
	for l := label(0); l < numLabels; l++ {
		s, ok := b.sec[l]
		for _, o := range omit {
			ok = ok && o != l
		}
		if ok {
			out = fmt.Appendf(out, "%s %x %x\n", l, b.cr, s)
		}
	}
	return out
}

func (b *synth) write(d Direction, p []byte) {
	b.clock++
	b.sess.chunks = append(b.sess.chunks, chunk{dir: d, data: p, t: b.clock})
}

// plainRecord writes a plaintext record.
func (b *synth) plainRecord(d Direction, typ byte, payload []byte) {
	r := []byte{typ, 3, 3, 0, 0}
	if typ == typeHandshake && payload[0] == hsClientHello {
		r[2] = 1 // legacy record version of a first ClientHello
	}
	binary.BigEndian.PutUint16(r[3:], uint16(len(payload)))
	b.write(d, append(r, payload...))
}

// seal writes a protected record of d under b.out[d].
func (b *synth) seal(d Direction, typ byte, payload []byte, pad int) {
	k := b.out[d]
	if k.s.v13 {
		b.write(d, sealRecord13(k, typ, payload, pad))
		return
	}
	hdr := [5]byte{typ, 3, 3}
	k.setAAD12(&hdr, len(payload))
	var explicit []byte
	if k.s.bulk == bulkAESGCM {
		explicit = binary.BigEndian.AppendUint64(nil, k.seq^0x5a5a)
		copy(k.nonce[:4], k.iv[:4])
		copy(k.nonce[4:], explicit)
	} else {
		k.setNonce()
	}
	n := len(explicit) + len(payload) + k.aead.Overhead()
	binary.BigEndian.PutUint16(hdr[3:], uint16(n))
	r := append(hdr[:], explicit...)
	r = k.aead.Seal(r, k.nonce[:], payload, k.aad[:])
	k.seq++
	b.write(d, r)
}

// sealRecord13 returns a TLS 1.3 record of inner type typ under k.
func sealRecord13(k *keys, typ byte, payload []byte, pad int) []byte {
	inner := append(append(bytes.Clone(payload), typ), make([]byte, pad)...)
	hdr := []byte{typeAppData, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(inner)+k.aead.Overhead()))
	k.setNonce()
	k.seq++
	return k.aead.Seal(hdr, k.nonce[:], inner, hdr)
}

func hsMsg(typ byte, body []byte) []byte {
	m := []byte{typ, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(m, body...)
}

func (b *synth) setKeys13(d Direction, l label) {
	k, err := newKeys13(b.s, b.sec[l])
	if err != nil {
		b.t.Fatal(err)
	}
	b.out[d] = k
}

type hello struct {
	version uint16 // supported_versions; 0: none
	legacy  uint16
	random  [32]byte
	suite   uint16
	alpn    []string
	sni     string
	early   bool // ClientHello: early_data
	psk     bool // ServerHello: pre_shared_key
	etm     bool // ServerHello: encrypt_then_mac
}

func clientHelloMsg(h hello) []byte {
	var bb cryptobyte.Builder
	bb.AddUint16(0x0303)
	bb.AddBytes(h.random[:])
	bb.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
	bb.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(h.suite) })
	bb.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
	bb.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		if h.sni != "" {
			b.AddUint16(extServerName)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8(0)
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(h.sni)) })
				})
			})
		}
		if len(h.alpn) > 0 {
			b.AddUint16(extALPN)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					for _, p := range h.alpn {
						b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
					}
				})
			})
		}
		if h.version != 0 {
			b.AddUint16(extSupportedVersions)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(h.version) })
			})
		}
		if h.early {
			b.AddUint16(extEarlyData)
			b.AddUint16(0)
		}
	})
	return hsMsg(hsClientHello, bb.BytesOrPanic())
}

func serverHelloMsg(h hello) []byte {
	var bb cryptobyte.Builder
	legacy := h.legacy
	if legacy == 0 {
		legacy = 0x0303
	}
	bb.AddUint16(legacy)
	bb.AddBytes(h.random[:])
	bb.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(pattern(32, 99)) }) // not the client's: no resumption
	bb.AddUint16(h.suite)
	bb.AddUint8(0)
	bb.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		if h.version != 0 {
			b.AddUint16(extSupportedVersions)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(h.version) })
		}
		if h.psk {
			b.AddUint16(extPreSharedKey)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0) })
		}
		if h.etm {
			b.AddUint16(extEncryptThenMAC)
			b.AddUint16(0)
		}
		if len(h.alpn) > 0 {
			b.AddUint16(extALPN)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(h.alpn[0])) })
				})
			})
		}
	})
	return hsMsg(hsServerHello, bb.BytesOrPanic())
}

func encryptedExtensionsMsg(alpn string) []byte {
	var bb cryptobyte.Builder
	bb.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(extALPN)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(alpn)) })
			})
		})
	})
	return hsMsg(hsEncryptedExtensions, bb.BytesOrPanic())
}

type synthOpts struct {
	early         int // 0-RTT records the client sends
	earlyRejected bool
	keyUpdates    int // KeyUpdate rounds (client requests, server answers)
	records       int // application records per direction
	recordSize    int
	sizes         []int // if set, the size of each application record (records and recordSize are ignored)
	pad           int   // TLS 1.3 padding per record
}

// recordSizes returns the size of each application record.
func (o synthOpts) recordSizes() []int {
	if o.sizes != nil {
		return o.sizes
	}
	sizes := make([]int, o.records)
	for i := range sizes {
		sizes[i] = o.recordSize
	}
	return sizes
}

// appData writes n bytes of application data from d in one record.
func (b *synth) appData(d Direction, n int, pad int) {
	p := pattern(n, byte(b.clock))
	b.sess.plain[d] = append(b.sess.plain[d], p...)
	if b.out[d].s.v13 {
		b.seal(d, typeAppData, p, pad)
	} else {
		b.seal(d, typeAppData, p, 0)
	}
}

// tls13 writes a whole TLS 1.3 session.
func (b *synth) tls13(o synthOpts) *session {
	c2s, s2c := ClientToServer, ServerToClient
	b.plainRecord(c2s, typeHandshake, clientHelloMsg(hello{version: versionTLS13, random: b.cr, suite: b.s.id, alpn: []string{"h2", "http/1.1"}, sni: "kube.test", early: o.early > 0}))
	if o.early > 0 {
		b.plainRecord(c2s, typeCCS, []byte{1})
		b.setKeys13(c2s, labelClientEarly)
		if o.earlyRejected {
			// Under keys the observer does not have.
			k, _ := newKeys13(b.s, make([]byte, b.s.hashLen))
			b.out[c2s] = k
		}
		for range o.early {
			if o.earlyRejected {
				b.seal(c2s, typeAppData, []byte("GET / HTTP/1.1\r\n\r\n"), 0)
			} else {
				b.appData(c2s, 100, 0)
			}
		}
	}
	b.plainRecord(s2c, typeHandshake, serverHelloMsg(hello{version: versionTLS13, random: b.sr, suite: b.s.id, psk: o.early > 0}))
	b.plainRecord(s2c, typeCCS, []byte{1})
	b.setKeys13(s2c, labelServerHS)
	// EncryptedExtensions and half a Certificate in one record, the rest
	// of it, CertificateVerify and Finished in the next: messages span
	// and share records.
	cert := hsMsg(11, pattern(3000, 7))
	flight := append(append(encryptedExtensionsMsg("h2"), cert...), hsMsg(15, pattern(72, 8))...)
	flight = append(flight, hsMsg(hsFinished, pattern(b.s.hashLen, 9))...)
	b.seal(s2c, typeHandshake, flight[:1500], 0)
	b.seal(s2c, typeHandshake, flight[1500:], 0)
	b.setKeys13(s2c, labelServerApp)
	if o.early > 0 && !o.earlyRejected {
		b.seal(c2s, typeHandshake, hsMsg(hsEndOfEarlyData, nil), 0)
	}
	if o.early == 0 {
		b.plainRecord(c2s, typeCCS, []byte{1})
	}
	b.setKeys13(c2s, labelClientHS)
	b.seal(c2s, typeHandshake, hsMsg(hsFinished, pattern(b.s.hashLen, 10)), 0)
	b.setKeys13(c2s, labelClientApp)
	b.seal(s2c, typeHandshake, hsMsg(hsNewSessionTicket, pattern(200, 11)), 0)
	sizes := o.recordSizes()
	every := len(sizes)/(o.keyUpdates+1) + 1
	for i, n := range sizes {
		b.appData(c2s, n, o.pad)
		b.appData(s2c, n, o.pad)
		if o.keyUpdates > 0 && i%every == every-1 {
			b.seal(c2s, typeHandshake, hsMsg(hsKeyUpdate, []byte{1}), 0) // update_requested
			b.out[c2s] = mustNext(b.t, b.out[c2s])
			b.seal(s2c, typeHandshake, hsMsg(hsKeyUpdate, []byte{0}), 0)
			b.out[s2c] = mustNext(b.t, b.out[s2c])
		}
	}
	b.seal(c2s, typeAlert, []byte{1, 0}, 0)
	b.seal(s2c, typeAlert, []byte{1, 0}, 0)
	b.sess.keylog = b.keylog()
	return &b.sess
}

func mustNext(t testing.TB, k *keys) *keys {
	n, err := k.next()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tls12 writes a whole TLS 1.2 session with an AEAD suite.
func (b *synth) tls12(o synthOpts) *session {
	c2s, s2c := ClientToServer, ServerToClient
	b.plainRecord(c2s, typeHandshake, clientHelloMsg(hello{random: b.cr, suite: b.s.id, alpn: []string{"h2"}, sni: "kube.test"}))
	sh := serverHelloMsg(hello{random: b.sr, suite: b.s.id, alpn: []string{"h2"}})
	b.plainRecord(s2c, typeHandshake, append(append(sh, hsMsg(11, pattern(900, 1))...), hsMsg(14, nil)...))
	b.plainRecord(c2s, typeHandshake, hsMsg(16, pattern(33, 2)))
	ck, sk, err := newKeys12(b.s, b.sec[labelMaster], &b.cr, &b.sr)
	if err != nil {
		b.t.Fatal(err)
	}
	b.plainRecord(c2s, typeCCS, []byte{1})
	b.out[c2s] = ck
	b.seal(c2s, typeHandshake, hsMsg(hsFinished, pattern(12, 3)), 0)
	b.plainRecord(s2c, typeCCS, []byte{1})
	b.out[s2c] = sk
	b.seal(s2c, typeHandshake, hsMsg(hsFinished, pattern(12, 4)), 0)
	for _, n := range o.recordSizes() {
		b.appData(c2s, n, 0)
		b.appData(s2c, n, 0)
	}
	b.seal(c2s, typeAlert, []byte{1, 0}, 0)
	b.sess.keylog = b.keylog()
	return &b.sess
}

func decryptSession(t *testing.T, s *session, keylog []byte, mode int) (*Conn, *capSink) {
	t.Helper()
	sink := &capSink{}
	c := NewConn(mustKeyLog(t, keylog), sink, Options{MaxPending: 4 << 20})
	feedAll(t, c, feedModes[mode].cut(s, newRand(mode)))
	return c, sink
}

func TestSynthKeyUpdate(t *testing.T) {
	for _, id := range []uint16{0x1301, 0x1302, 0x1303} {
		t.Run(suiteName(id), func(t *testing.T) {
			s := newSynth(t, id, true).tls13(synthOpts{keyUpdates: 3, records: 40, recordSize: 5000, pad: 17})
			for m := range feedModes {
				c, sink := decryptSession(t, s, s.keylog, m)
				in := c.Info()
				if !in.Decrypted || in.ALPN != "h2" || in.SNI != "kube.test" {
					t.Fatalf("%s: Info: Decrypted %v ALPN %q SNI %q Note %q", feedModes[m].name, in.Decrypted, in.ALPN, in.SNI, in.Note)
				}
				for d := range sink.data {
					if !bytes.Equal(sink.data[d], s.plain[d]) {
						t.Fatalf("%s %s: plaintext differs", feedModes[m].name, Direction(d))
					}
					if in.Dir[d].KeyUpdates != 3 || !in.Dir[d].CloseNotify {
						t.Fatalf("%s %s: %+v; want 3 key updates, close_notify", feedModes[m].name, Direction(d), in.Dir[d])
					}
				}
			}
		})
	}
}

func TestSynthEarlyData(t *testing.T) {
	tests := []struct {
		name     string
		rejected bool
		omit     []label
		complete bool   // client plaintext complete
		note     string // substring of Note when not decrypted
	}{
		{"accepted", false, nil, true, ""},
		{"accepted-no-early-secret", false, []label{labelClientEarly}, false, "0-RTT early data not decrypted"},
		{"rejected", true, nil, false, "0-RTT early data not decrypted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(t, 0x1301, true).tls13(synthOpts{early: 3, earlyRejected: tc.rejected, records: 5, recordSize: 700})
			for m := range feedModes {
				checkEarly(t, s, tc.omit, m, tc.rejected, tc.complete, tc.note)
			}
		})
	}
}

func checkEarly(t *testing.T, s *session, omit []label, mode int, rejected, complete bool, note string) {
	t.Helper()
	c, sink := decryptSession(t, s, (&synth{}).keylogOf(s, omit), mode)
	in := c.Info()
	if !in.EarlyData || !in.Resumed || in.Decrypted != (note == "") {
		t.Fatalf("%s: Info: %+v", feedModes[mode].name, in)
	}
	if note != "" && !bytes.Contains([]byte(in.Note), []byte(note)) {
		t.Fatalf("%s: Note %q; want %q", feedModes[mode].name, in.Note, note)
	}
	want := s.plain[ClientToServer]
	if !complete && !rejected {
		want = want[300:] // the three 100-byte early records
	}
	if !bytes.Equal(sink.data[ClientToServer], want) || !bytes.Equal(sink.data[ServerToClient], s.plain[ServerToClient]) {
		t.Fatalf("%s: plaintext: got %d/%d bytes; want %d/%d", feedModes[mode].name, len(sink.data[0]), len(sink.data[1]), len(want), len(s.plain[1]))
	}
}

// keylogOf returns the session's key log without the omitted labels.
func (*synth) keylogOf(s *session, omit []label) []byte {
	out := s.keylog
	for _, l := range omit {
		out = dropLines(out, l.String())
	}
	return out
}

func TestSynthTLS12(t *testing.T) {
	for _, id := range []uint16{0xc02f, 0xc030, 0xcca8, 0x009c, 0x009f} {
		t.Run(suiteName(id), func(t *testing.T) {
			s := newSynth(t, id, false).tls12(synthOpts{records: 8, recordSize: 16384})
			for m := range feedModes {
				c, sink := decryptSession(t, s, s.keylog, m)
				if in := c.Info(); !in.Decrypted || in.ALPN != "h2" || in.Version != versionTLS12 {
					t.Fatalf("Info: %+v", in)
				}
				for d := range sink.data {
					if !bytes.Equal(sink.data[d], s.plain[d]) {
						t.Fatalf("%s %s: plaintext differs", feedModes[m].name, Direction(d))
					}
				}
			}
		})
	}
}

// TestSynthUnsupported: sessions this package cannot decrypt say why and
// deliver nothing, without errors.
func TestSynthUnsupported(t *testing.T) {
	tests := []struct {
		name string
		sh   func(b *synth) hello
		note string
	}{
		{"tls11", func(b *synth) hello { return hello{legacy: 0x0302, random: b.sr, suite: 0xc013} }, "TLS 1.1 is not supported"},
		{"3des", func(b *synth) hello { return hello{random: b.sr, suite: 0x000a} }, "cipher suite TLS_RSA_WITH_3DES_EDE_CBC_SHA (0x000a) is not supported"},
		{"ccm-tls13", func(b *synth) hello { return hello{version: versionTLS13, random: b.sr, suite: 0x1304} }, "(0x1304) is not supported"},
		{"encrypt-then-mac", func(b *synth) hello { return hello{random: b.sr, suite: 0xc013, etm: true} }, "encrypt_then_mac (RFC 7366) is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newSynth(t, 0xc02f, false)
			b.plainRecord(ClientToServer, typeHandshake, clientHelloMsg(hello{random: b.cr, suite: 0xc02f}))
			b.plainRecord(ServerToClient, typeHandshake, serverHelloMsg(tc.sh(b)))
			b.plainRecord(ServerToClient, typeCCS, []byte{1})
			b.write(ServerToClient, append([]byte{typeAppData, 3, 3, 0, 40}, pattern(40, 1)...))
			b.write(ServerToClient, append([]byte{typeAppData, 3, 3, 0, 40}, pattern(40, 1)...))
			b.plainRecord(ClientToServer, typeCCS, []byte{1})
			b.write(ClientToServer, append([]byte{typeAppData, 3, 3, 0, 40}, pattern(40, 1)...))
			c, sink := decryptSession(t, &b.sess, b.keylog(), 0)
			in := c.Info()
			if in.Decrypted || !bytes.Contains([]byte(in.Note), []byte(tc.note)) || len(sink.data[0])+len(sink.data[1]) > 0 {
				t.Fatalf("Info: Decrypted %v Note %q, %d bytes delivered; want a note %q", in.Decrypted, in.Note, len(sink.data[0])+len(sink.data[1]), tc.note)
			}
			if in.Dir[0].Undecryptable == 0 || in.Dir[0].Err != nil || in.Dir[1].Err != nil {
				t.Fatalf("Info.Dir = %+v", in.Dir)
			}
		})
	}
}

// TestSynthRenegotiation: a TLS 1.2 ClientHello inside the encrypted
// channel stops decryption of that direction with a note.
func TestSynthRenegotiation(t *testing.T) {
	b := newSynth(t, 0xc02f, false)
	s := b.tls12(synthOpts{records: 2, recordSize: 100})
	b.seal(ClientToServer, typeHandshake, clientHelloMsg(hello{random: b.cr, suite: 0xc02f}), 0)
	b.appData(ClientToServer, 100, 0)
	c, _ := decryptSession(t, s, s.keylog, 0)
	in := c.Info()
	if in.Decrypted || !bytes.Contains([]byte(in.Note), []byte("renegotiation is not supported")) || in.Dir[0].Undecryptable != 1 {
		t.Fatalf("Info: %+v", in)
	}
}
