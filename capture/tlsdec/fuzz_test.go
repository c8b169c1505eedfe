package tlsdec

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A feed script drives a Conn from fuzz input: a sequence of operations,
// each an op byte and a 2-byte big-endian length n. Bit 0 of op is the
// direction; with bit 1 set the operation is Gap(dir, n), or Gap(dir, -1)
// (size unknown) if bit 2 is set too, otherwise Feed(dir, next n bytes)
// (fewer if the script ends).
func encodeScript(ps []piece) []byte {
	var out []byte
	for _, p := range ps {
		for d := p.data; len(d) > 0; {
			n := min(len(d), 0xffff)
			out = append(out, byte(p.dir))
			out = binary.BigEndian.AppendUint16(out, uint16(n))
			out = append(out, d[:n]...)
			d = d[n:]
		}
	}
	return out
}

func runScript(keys *KeyLog, script []byte) (*Conn, *capSink, []error) {
	sink := &capSink{}
	c := NewConn(keys, sink, Options{MaxPending: 64 << 10})
	var errs []error
	for t := int64(0); len(script) >= 3; t++ {
		op, n := script[0], int(binary.BigEndian.Uint16(script[1:3]))
		script = script[3:]
		d := Direction(op & 1)
		if op&2 != 0 {
			if op&4 != 0 {
				n = -1
			}
			c.Gap(d, n)
			continue
		}
		n = min(n, len(script))
		if err := c.Feed(d, script[:n], t); err != nil {
			errs = append(errs, err)
		}
		script = script[n:]
	}
	return c, sink, errs
}

func FuzzFeed(f *testing.F) {
	f.Add([]byte{}, []byte{0, 0, 5, 0x16, 3, 1, 0xff, 0xff})
	f.Add([]byte("CLIENT_RANDOM "+cr1+" "+s48+"\n"), []byte{1, 0, 6, 0x16, 3, 3, 0, 1, 2, 2, 0, 9})
	// Sessions with gaps in the server's application data: the resync
	// path, gaps of known and unknown size, two in a row.
	o := synthOpts{records: 6, recordSize: 700, keyUpdates: 1}
	for _, s := range []*session{newSynth(f, 0x1303, true).tls13(o), newSynth(f, 0xc02f, false).tls12(o)} {
		w := s.wire(ServerToClient)
		ends := recordEnds(w)
		at := ends[len(ends)/2] - 300
		for _, gaps := range [][]byte{{3, 0, 200}, {7, 0, 200}, {3, 0, 100, 7, 0, 100}} {
			script := encodeScript([]piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: w[:at]}})
			script = append(script, gaps...)
			f.Add(s.keylog, append(script, encodeScript([]piece{{dir: ServerToClient, data: w[at+200:]}})...))
		}
		// Bytes damaged in place: in a record's body, in a header.
		for _, x := range []int{at, ends[len(ends)/2]} {
			g := bytes.Clone(w)
			g[x] ^= 0x21
			f.Add(s.keylog, encodeScript([]piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: g}}))
		}
	}
	f.Fuzz(func(t *testing.T, keylog, script []byte) {
		keys, err := ParseKeyLog(bytes.NewReader(keylog))
		if err != nil {
			t.Fatal(err)
		}
		c, sink, errs := runScript(keys, script)
		checkBounded(t, c)
		in := c.Info()
		if len(errs) > 2 {
			t.Fatalf("%d errors; at most one per direction: %v", len(errs), errs)
		}
		for d := range sink.data {
			if keys.Stats().Secrets == 0 && len(sink.data[d]) > 0 {
				t.Fatalf("%s: %d bytes delivered without keys", Direction(d), len(sink.data[d]))
			}
			if in.Dir[d].AppData != int64(len(sink.data[d])) {
				t.Fatalf("%s: Info.AppData %d; delivered %d", Direction(d), in.Dir[d].AppData, len(sink.data[d]))
			}
			if in.Dir[d].Decrypted+in.Dir[d].Undecryptable+in.Dir[d].Pending > in.Dir[d].Records {
				t.Fatalf("%s: counters exceed records: %+v", Direction(d), in.Dir[d])
			}
			if di := in.Dir[d]; di.ResyncSkipped > di.Lost || di.Lost > di.Bytes || di.Resyncs > 0 && keys.Stats().Secrets == 0 {
				t.Fatalf("%s: resync counters inconsistent: %+v", Direction(d), di)
			}
		}
		if in.Decrypted == (in.Note != "") && in.Decrypted {
			t.Fatalf("Decrypted with a note: %q", in.Note)
		}
		if !in.Decrypted && in.Note == "" {
			t.Fatalf("not decrypted, no note")
		}
	})
}

func FuzzParseKeyLog(f *testing.F) {
	f.Add([]byte("CLIENT_RANDOM " + cr1 + " " + s48 + "\n# comment\n\nCLIENT_TRAFFIC_SECRET_0 " + cr2 + " " + s32 + "\r\n"))
	f.Add([]byte("RSA 00 11\nCLIENT_RANDOM x y\n\xff\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeyLog(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		st := k.Stats()
		if st.Bad > st.Lines || len(st.BadLines) > maxBadLines || st.ClientRandoms > st.Secrets || st.Secrets > st.Lines {
			t.Fatalf("Stats inconsistent: %+v", st)
		}
		for _, e := range k.m {
			for l, s := range e {
				if s != nil && !secretLenOK(label(l), len(s)) {
					t.Fatalf("%s stored with %d bytes", label(l), len(s))
				}
			}
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzFeed from real and
// synthetic sessions (with -update).
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate the fuzz seeds")
	}
	small := synthOpts{records: 3, recordSize: 300, keyUpdates: 1, pad: 3}
	seeds := map[string]*session{
		"synth-tls13-aes128gcm": newSynth(t, 0x1301, true).tls13(small),
		"synth-tls13-chacha20":  newSynth(t, 0x1303, true).tls13(synthOpts{records: 2, recordSize: 100, early: 2}),
		"synth-tls12-aes256gcm": newSynth(t, 0xc030, false).tls12(synthOpts{records: 2, recordSize: 200}),
		"go-tls13-hrr":          runSession(t, sessionConfig{curves: []tls.CurveID{tls.CurveP256}, clientALPN: []string{"h2"}, serverALPN: []string{"h2"}, uploadSize: 100, downloadSize: 300}),
		"go-tls12-cbc":          runSession(t, sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}, uploadSize: 100, downloadSize: 300}),
		"go-tls12-chacha":       runSession(t, sessionConfig{maxVersion: tls.VersionTLS12, suites12: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, uploadSize: 100, downloadSize: 300}),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzFeed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, args ...[]byte) {
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			fmt.Fprintf(&b, "[]byte(%q)\n", a)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range seeds {
		ps := feedModes[1].cut(s, newRand(len(name)))
		write(name, s.keylog, encodeScript(ps))
		write(name+"-nokeys", nil, encodeScript(ps))
		// With a gap in the middle of the server's bytes.
		w := s.wire(ServerToClient)
		gap := append(encodeScript([]piece{{dir: ClientToServer, data: s.wire(ClientToServer)}, {dir: ServerToClient, data: w[:len(w)/2]}}), 3, 0, 10)
		write(name+"-gap", s.keylog, append(gap, encodeScript([]piece{{dir: ServerToClient, data: w[len(w)/2+10:]}})...))
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzParseKeyLog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range seeds {
		write(name, s.keylog)
	}
}

// TestFuzzSeedsDecrypt checks that the seeds with keys reach deep: they
// decrypt completely, so mutations start from valid sessions.
func TestFuzzSeedsDecrypt(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzFeed")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		generated := strings.HasPrefix(name, "go-") || strings.HasPrefix(name, "synth-") // not found by fuzzing
		if !generated || strings.HasSuffix(name, "-nokeys") || strings.HasSuffix(name, "-gap") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var args [][]byte
		for _, l := range lines[1:] {
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(l, "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			args = append(args, []byte(s))
		}
		if len(args) != 2 {
			t.Fatalf("%s: %d arguments", name, len(args))
		}
		keys, _ := ParseKeyLog(bytes.NewReader(args[0]))
		c, _, errs := runScript(keys, args[1])
		if in := c.Info(); !in.Decrypted || len(errs) > 0 {
			t.Errorf("seed %s: Decrypted %v, Note %q, errors %v", name, in.Decrypted, in.Note, errs)
		}
	}
}
