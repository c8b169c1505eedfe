package capture

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"
	"github.com/klauspost/compress/zstd"
	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// workerCase is a capture recorded with and without workers.
type workerCase struct {
	name string
	pcap []byte
	// opts returns the options of one recording (a fresh key log each
	// time: a pcapng's secrets are loaded into it).
	opts func() Options
}

// workerVariants are the ways TestWorkersSame records with workers:
// batches as recordings make them, and tiny ones, so that every order of
// connections in a batch and every cut between ops is exercised.
var workerVariants = []struct {
	workers, ops, bytes int
}{
	{2, 0, 0},
	{3, 1, 1 << 20},
	{2, 7, 3000},
	{4, 64, 1 << 20},
}

// TestWorkersSame records every capture the tests use — the corpus (TLS
// and HTTP/2 included), the real long soak, damaged copies (lost,
// reordered, duplicated, cut segments), overlapping copies, and synthetic
// workloads that fill the table of connections — on one goroutine and
// with workers, and checks that the records are the same, one by one,
// IDs, times and bytes, and so are the Stats. Redaction is on, with one
// key for every recording, so that placeholders compare too.
func TestWorkersSame(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	secrets := redact.NewSecrets()
	old := newSecrets
	newSecrets = func() *redact.Secrets { return secrets }
	t.Cleanup(func() { newSecrets = old })
	for _, c := range workerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			want, wantSt := recordWorkers(t, c, 1, 0, 0)
			if len(want) < 2 {
				t.Fatalf("%d records: the case records nothing", len(want))
			}
			for _, v := range workerVariants {
				got, st := recordWorkers(t, c, v.workers, v.ops, v.bytes)
				what := fmt.Sprintf("workers %d, batches of %d ops / %d bytes", v.workers, v.ops, v.bytes)
				sameRecords(t, what, want, got)
				if st != wantSt {
					t.Errorf("%s: Stats = %+v; want %+v", what, st, wantSt)
				}
			}
		})
	}
}

// recordWorkers records c with n workers and batches of at most ops ops
// and bytes bytes (0: the defaults).
func recordWorkers(t *testing.T, c workerCase, n, ops, bytes_ int) ([]formats.Record, Stats) {
	t.Helper()
	if ops > 0 {
		oo, ob := batchOps, batchBytes
		batchOps, batchBytes = ops, bytes_
		defer func() { batchOps, batchBytes = oo, ob }()
	}
	opts := c.opts()
	opts.Workers = n
	pc, err := NewPcap(bytes.NewReader(c.pcap), opts.KeyLog)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sink := &memSink{}
	res, err := pc.Record(context.Background(), sink, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sink.recs, res.Stats
}

// sameRecords fails t at the first record that differs.
func sameRecords(t *testing.T, what string, want, got []formats.Record) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Fatalf("%s: record %d = %s; want %s", what, i, short(got[i]), short(want[i]))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d records; want %d", what, len(got), len(want))
	}
}

// short describes a record for a failure message, its bytes by length
// and digest.
func short(r formats.Record) string {
	b := func(p []byte) string { return fmt.Sprintf("%d bytes %x", len(p), sha256.Sum256(p)) }
	switch r := r.(type) {
	case *formats.Frame:
		c := *r
		c.Pre, c.Data = nil, nil
		return fmt.Sprintf("%T %+v pre %s data %s", r, c, b(r.Pre), b(r.Data))
	case *formats.Body:
		c := *r
		c.Data = nil
		return fmt.Sprintf("%T %+v data %s", r, c, b(r.Data))
	}
	return fmt.Sprintf("%T %+v", r, r)
}

func workerCases(t *testing.T) []workerCase {
	var cases []workerCase
	plain := func(o Options) func() Options { return func() Options { return o } }
	withKeys := func(dir string, o Options) func() Options {
		return func() Options {
			o.KeyLog = keyLogIn(t, dir)
			if o.KeyLog == nil {
				o.KeyLog, _ = tlsdec.ParseKeyLog(bytes.NewReader(nil))
			}
			return o
		}
	}
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	corpus := filepath.Join("..", "testdata", "corpus")
	for _, name := range []string{"basic-json", "multi-watch", "protobuf", "gone-410", "table-watch", "metadata-informer", "cbor-informer", "tls-h2"} {
		dir := filepath.Join(corpus, name)
		cases = append(cases, workerCase{name, read(filepath.Join(dir, "capture.pcap")), withKeys(dir, Options{})})
	}
	// TLS keys embedded in a pcapng (a Decryption Secrets Block): first,
	// and after 3% of the packets, where the connections that began
	// before it are recorded without them on one goroutine; with workers
	// too, since parsing waits for the block's place in the file.
	tlsDir := filepath.Join(corpus, "tls-h2")
	keys := read(filepath.Join(tlsDir, "keylog.txt"))
	tlsPcap := read(filepath.Join(tlsDir, "capture.pcap"))
	embedded := func() Options { // a key log for the pcapng's secrets, as RecordPcap makes
		keys, _ := tlsdec.ParseKeyLog(bytes.NewReader(nil))
		return Options{KeyLog: keys}
	}
	cases = append(cases,
		workerCase{"tls-h2/pcapng-secrets-first", pcapngWithSecrets(t, tlsPcap, keys, 0), embedded},
		workerCase{"tls-h2/pcapng-secrets-later", pcapngWithSecrets(t, tlsPcap, keys, 0.03), embedded})
	// Secret values kept, a fixed server port, a tight connection table.
	mw := filepath.Join(corpus, "multi-watch")
	cases = append(cases,
		workerCase{"multi-watch/keep-secrets", read(filepath.Join(mw, "capture.pcap")), plain(Options{KeepSecrets: true})},
		workerCase{"multi-watch/max-conns-2", read(filepath.Join(mw, "capture.pcap")), plain(Options{MaxConns: 2, Port: 8001})})
	shared := filepath.Join("..", "..", "shared", "corpus")
	for _, name := range []string{"large-objects", "midstream", "tls-h2"} {
		dir := filepath.Join(shared, name)
		b, err := os.ReadFile(filepath.Join(dir, "capture.pcap"))
		if err != nil || testing.Short() && name == "large-objects" {
			continue
		}
		cases = append(cases, workerCase{"shared/" + name, b, withKeys(dir, Options{})})
	}

	// Damaged copies, as pcapmangle makes them.
	for _, name := range []string{"multi-watch", "tls-h2", "protobuf"} {
		dir := filepath.Join(corpus, name)
		raw := read(filepath.Join(dir, "capture.pcap"))
		mc := parseMangle(t, raw)
		server := corpusServer(t, dir)
		reordered, _ := mc.mangleReorder(server, 2, 0.05, 0.02)
		cases = append(cases,
			workerCase{name + "/drop", mc.mangleDrop(server, 1, 0.02), withKeys(dir, Options{})},
			workerCase{name + "/reorder", reordered, withKeys(dir, Options{})},
			workerCase{name + "/truncate", mc.mangleTruncate(server, 0.6), withKeys(dir, Options{})},
			workerCase{name + "/reorder-window-0", reordered, withKeys(dir, Options{ReorderWindow: time.Nanosecond, MaxBufferedPerConn: 4096})},
		)
	}

	// Overlapping copies of the corpus: many connections at once.
	var pcaps [][]byte
	for _, name := range []string{"multi-watch", "basic-json", "protobuf", "gone-410"} {
		pcaps = append(pcaps, pcaptest.Nanosecond(read(filepath.Join(corpus, name, "capture.pcap"))))
	}
	var ov bytes.Buffer
	if _, err := pcaptest.Overlap(&ov, pcaps, 8<<20, 8, 8001); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, workerCase{"overlap", ov.Bytes(), plain(Options{})})

	if !testing.Short() {
		zf, err := os.Open(filepath.Join(longSoak, "capture.pcap.zst"))
		if err != nil {
			t.Fatal(err)
		}
		defer zf.Close()
		zr, err := zstd.NewReader(zf)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		soak, err := io.ReadAll(bufio.NewReader(zr))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, workerCase{"long-soak", soak, plain(Options{})})
	}

	// Synthetic workloads: short connections ended every way, keep-alive
	// and pipelined exchanges, a table of connections too small for them
	// (every kind of eviction, reported by the TCP side at the end).
	b := pcaptest.New()
	pcaptest.Connections(b, 300, time.Millisecond, "fin")
	pcaptest.Connections(b, 100, time.Millisecond, "rst")
	pcaptest.Connections(b, 100, time.Millisecond, "half")
	pcaptest.Exchanges(b, 7, 300)
	pcaptest.Pipelined(b, 400)
	for i := range 20 {
		client := fmt.Sprintf("10.0.0.%d:5%04d", i, i)
		if i%4 == 3 { // still open at the end of the capture
			head, chunks, _ := watchBody(30 + i)
			c := b.Conn(client, "127.0.0.1:8001", true)
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.Send(pcaptest.ToClient, []byte(head+strings.Join(chunks[:20], "")))
			continue
		}
		addWatchEnd(b, client, 30+i, []string{"fin", "rst", "half"}[i%4])
	}
	work := b.Pcap()
	cases = append(cases,
		workerCase{"synthetic", work, plain(Options{})},
		workerCase{"synthetic/max-conns-16", work, plain(Options{MaxConns: 16})},
		workerCase{"synthetic/max-buffered", scramble(b, 3), plain(Options{MaxBuffered: 20000, MaxBufferedPerConn: 5000})})
	return cases
}

// scramble returns b's packets as a capture with about 2% dropped and 5%
// moved a few places later, the same way for a seed.
func scramble(b *pcaptest.Builder, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	ps := append([]pcaptest.Packet(nil), b.Packets...)
	var out []pcaptest.Packet
	for i := 0; i < len(ps); i++ {
		switch x := rng.IntN(100); {
		case x < 2:
			continue
		case x < 7 && i+3 < len(ps):
			ps[i], ps[i+3] = ps[i+3], ps[i]
		}
		out = append(out, ps[i])
	}
	nb := pcaptest.New()
	nb.Packets = out
	return nb.Pcap()
}

// pcapngWithSecrets rewrites a classic pcap as pcapng (nanosecond
// timestamps) with an NSS key log in a Decryption Secrets Block (pcapng
// specification §4.8) before the packet at fraction at of the packets.
func pcapngWithSecrets(t *testing.T, pcap, keyLog []byte, at float64) []byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	var pkts [][]byte
	var cis []gopacket.CaptureInfo
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pkts, cis = append(pkts, data), append(cis, ci)
	}
	le := binary.LittleEndian
	var out []byte
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := uint32(12 + len(body))
		out = le.AppendUint32(out, typ)
		out = le.AppendUint32(out, n)
		out = append(out, body...)
		out = le.AppendUint32(out, n)
	}
	shb := le.AppendUint32(nil, 0x1A2B3C4D)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0)) // section length unknown
	block(0x0A0D0D0A, shb)
	idb := le.AppendUint16(nil, uint16(r.LinkType()))
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, 262144)
	idb = append(idb, 9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0) // if_tsresol = 9 (ns), padded; opt_endofopt
	block(1, idb)
	dsb := func() {
		b := le.AppendUint32(nil, tlsKeyLogSecrets)
		b = le.AppendUint32(b, uint32(len(keyLog)))
		block(0x0A, append(b, keyLog...))
	}
	k := int(float64(len(pkts)) * at)
	for i, data := range pkts {
		if i == k {
			dsb()
		}
		ns := uint64(cis[i].Timestamp.UnixNano())
		epb := le.AppendUint32(nil, 0)
		epb = le.AppendUint32(epb, uint32(ns>>32))
		epb = le.AppendUint32(epb, uint32(ns))
		epb = le.AppendUint32(epb, uint32(len(data)))
		epb = le.AppendUint32(epb, uint32(cis[i].Length))
		block(6, append(epb, data...))
	}
	return out
}

// failingSink fails every Write after the first n.
type failingSink struct{ n int }

func (s *failingSink) Write(formats.Record) error {
	if s.n == 0 {
		return errors.New("disk full")
	}
	s.n--
	return nil
}

// TestWorkersSinkFails: when the Sink fails, Packet returns its error (a
// batch later than without workers), every worker ends, and Close returns
// the error again.
func TestWorkersSinkFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	pcap, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "multi-watch", "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []int{0, 10, 500} {
		oo, ob := batchOps, batchBytes
		batchOps, batchBytes = 16, 1<<20
		pc, err := NewPcap(bytes.NewReader(pcap), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pc.Record(context.Background(), &failingSink{n: after}, Options{Workers: 2}, nil)
		pc.Close()
		batchOps, batchBytes = oo, ob
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("sink failing after %d records: Record = %v; want the sink's error", after, err)
		}
	}
}
