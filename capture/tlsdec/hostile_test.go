package tlsdec

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// checkBounded asserts the memory a Conn holds stays within its limits.
func checkBounded(t testing.TB, c *Conn) {
	t.Helper()
	for d := range c.half {
		h := &c.half[d]
		if len(h.pend) > c.opts.MaxPending {
			t.Fatalf("%s: %d bytes pending; limit %d", h.dir, len(h.pend), c.opts.MaxPending)
		}
		if cap(h.hs.buf) > maxHelloLen {
			t.Fatalf("%s: handshake buffer of %d bytes; limit %d", h.dir, cap(h.hs.buf), maxHelloLen)
		}
		if h.need > MaxCiphertext12 {
			t.Fatalf("%s: record of %d bytes accepted", h.dir, h.need)
		}
		if rs := h.rs; rs != nil {
			if rs.start > rs.end || rs.end > len(recBuf{}) || rs.scanned > maxResyncScan+int64(len(recBuf{})) || rs.work > maxResyncWork {
				t.Fatalf("%s: resync window [%d:%d], %d bytes scanned, %d trial-decrypted", h.dir, rs.start, rs.end, rs.scanned, rs.work)
			}
		}
		if h.credit > maxResyncCredit {
			t.Fatalf("%s: resync credit %d; limit %d", h.dir, h.credit, maxResyncCredit)
		}
	}
	if len(c.alerts) > maxAlerts || len(c.notes) > maxNotes || len(c.offeredALPN) > maxOfferedALPN {
		t.Fatalf("unbounded lists: %d alerts, %d notes, %d ALPN", len(c.alerts), len(c.notes), len(c.offeredALPN))
	}
}

func record(typ byte, payload []byte) []byte {
	r := []byte{typ, 3, 3, byte(len(payload) >> 8), byte(len(payload))}
	return append(r, payload...)
}

func TestHostile(t *testing.T) {
	b := newSynth(t, 0x1301, true)
	ch := record(typeHandshake, clientHelloMsg(hello{version: versionTLS13, random: b.cr, suite: 0x1301}))
	sh := record(typeHandshake, serverHelloMsg(hello{version: versionTLS13, random: b.sr, suite: 0x1301}))
	sh12 := record(typeHandshake, serverHelloMsg(hello{random: b.sr, suite: 0xc02f}))
	var certFlood []byte // a 16 MiB Certificate message, declared up front
	certFlood = append(certFlood, record(typeHandshake, []byte{11, 0xff, 0xff, 0xff})...)
	for range 300 {
		certFlood = append(certFlood, record(typeHandshake, pattern(16000, 3))...)
	}
	tests := []struct {
		name    string
		c2s     []byte
		s2c     []byte
		wantErr error  // from either direction
		note    string // substring of Info.Note
	}{
		{"random-bytes", pattern(100000, 1), pattern(100000, 2), ErrNotTLS, "does not start with a TLS record"},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\n\r\n"), ErrNotTLS, "does not start with a TLS record"},
		{"huge-record-length", []byte{typeHandshake, 3, 1, 0xff, 0xff}, nil, ErrMalformed, "record length 65535 exceeds 18432"},
		{"huge-record-later", append(bytes.Clone(ch), typeAppData, 3, 3, 0x48, 0x01), sh, ErrMalformed, "record length 18433 exceeds"},
		{"huge-client-hello", record(typeHandshake, []byte{1, 0xff, 0xff, 0xff}), nil, ErrMalformed, "handshake message type 1 of 16777215 bytes exceeds"},
		{"truncated-client-hello", ch[:len(ch)/2], nil, nil, "no ClientHello seen"},
		{"truncated-server-hello", ch, sh[:len(sh)-3], nil, "no ServerHello seen"},
		{"garbage-client-hello", record(typeHandshake, append([]byte{1, 0, 0, 50}, pattern(50, 4)...)), nil, ErrMalformed, "bad ClientHello"},
		{"bad-content-type", append(bytes.Clone(ch), 99, 3, 3, 0, 1, 0), nil, ErrMalformed, "content type 99"},
		{"bad-record-version", append(bytes.Clone(ch), typeAlert, 7, 3, 0, 2, 1, 0), nil, ErrMalformed, "record version 0x0703"},
		{"server-hello-from-client", append(bytes.Clone(ch), sh...), nil, nil, "no ServerHello seen"},
		{"certificate-flood", ch, append(bytes.Clone(sh12), certFlood...), nil, "no encrypted records seen"},
		{"zero-length-records", ch, append(bytes.Clone(sh12), bytes.Repeat(record(typeHandshake, nil), 10000)...), nil, "no encrypted records seen"},
		{"server-flood-before-hello", nil, append(bytes.Clone(sh), bytes.Repeat(record(typeAppData, pattern(16000, 5)), 40)...), nil, "server->client: more than 262144 bytes held waiting for the client's hello"},
		{"encrypted-garbage", ch, append(bytes.Clone(sh), record(typeAppData, pattern(3000, 6))...), nil, "no secrets for client random"},
		{"alert-flood", ch, bytes.Repeat(record(typeAlert, bytes.Repeat([]byte{2, 40}, 1000)), 10), nil, ""},
	}
	keys := mustKeyLog(t, []byte("CLIENT_RANDOM "+strings.Repeat("00", 32)+" "+strings.Repeat("11", 48)+"\n"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{1, 7, 1 << 20} {
				if step == 1 && len(tc.c2s)+len(tc.s2c) > 300<<10 {
					continue // byte by byte would be slow; 7 exercises the same paths
				}
				sink := &capSink{}
				c := NewConn(keys, sink, Options{})
				var errs []error
				for i := 0; i < max(len(tc.c2s), len(tc.s2c)); i += step {
					for d, w := range [][]byte{tc.c2s, tc.s2c} {
						if i < len(w) {
							if err := c.Feed(Direction(d), w[i:min(i+step, len(w))], int64(i)); err != nil {
								errs = append(errs, err)
							}
						}
					}
					checkBounded(t, c)
				}
				if tc.wantErr == nil && len(errs) > 0 || tc.wantErr != nil && (len(errs) == 0 || !errors.Is(errs[0], tc.wantErr)) {
					t.Fatalf("step %d: errors %v; want %v", step, errs, tc.wantErr)
				}
				for _, err := range errs {
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("error %v is not an *Error", err)
					}
				}
				if len(errs) > 2 {
					t.Fatalf("step %d: %d errors; want at most one per direction: %v", step, len(errs), errs)
				}
				in := c.Info()
				if in.Decrypted || !strings.Contains(in.Note, tc.note) {
					t.Fatalf("step %d: Info: Decrypted %v Note %q; want a note with %q", step, in.Decrypted, in.Note, tc.note)
				}
				if len(sink.data[0])+len(sink.data[1]) > 0 {
					t.Fatalf("data delivered from garbage")
				}
				if tc.name == "truncated-client-hello" && in.Dir[ClientToServer].Partial != len(tc.c2s) {
					t.Fatalf("Info.Dir[client->server].Partial = %d; want %d", in.Dir[ClientToServer].Partial, len(tc.c2s))
				}
			}
		})
	}
}

func TestInvalidDirection(t *testing.T) {
	c := NewConn(nil, nil, Options{})
	if err := c.Feed(2, []byte{1}, 0); err == nil {
		t.Fatal("Feed(2) = nil; want an error")
	}
	c.Gap(5, 10) // ignored
	if in := c.Info(); in.Dir[0].Bytes+in.Dir[1].Bytes != 0 {
		t.Fatalf("Info = %+v", in)
	}
}

func TestIsClientHello(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"\x16\x03\x01\x02\x00\x01", true},
		{"\x16\x03\x01", true},
		{"\x16\x03\x01\x02\x00\x02", false},
		{"\x17\x03\x03\x00\x10\x01", false},
		{"GET / HTTP/1.1", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := IsClientHello([]byte(tc.in)); got != tc.want {
			t.Errorf("IsClientHello(%q) = %v; want %v", tc.in, got, tc.want)
		}
	}
}
