package capture

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// BenchmarkRecord measures the whole record path — pcap parsing, TCP
// reassembly, HTTP/1.1, chunked decoding, event splitting, redaction checks
// and the .wt writer (zstd) — in MB/s of pcap.
func BenchmarkRecord(b *testing.B) {
	for _, c := range []struct{ name, path string }{
		{"basic-json", filepath.Join("..", "testdata", "corpus", "basic-json", "capture.pcap")},
		{"protobuf", filepath.Join("..", "testdata", "corpus", "protobuf", "capture.pcap")},
		{"large-objects", filepath.Join("..", "..", "shared", "corpus", "large-objects", "capture.pcap")},
	} {
		b.Run(c.name, func(b *testing.B) {
			data, err := os.ReadFile(c.path)
			if err != nil {
				b.Skip("capture not found:", err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var out int64
			for b.Loop() {
				cw := &countWriter{}
				if err := recordBytes(data, cw); err != nil {
					b.Fatal(err)
				}
				out = cw.n
			}
			b.ReportMetric(float64(out)/float64(len(data)), "wt/pcap")
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// recordBytes records a capture as wtrace record --pcap does.
func recordBytes(data []byte, out io.Writer) error {
	_, err := RecordPcap(context.Background(), bytes.NewReader(data), PcapOptions{Tool: "bench", Name: "bench.pcap", Output: formats.FileSinkOptions{Out: out}})
	return err
}

// soakPcap builds, once per process, the long-watch capture of
// BenchmarkRecordSoak: 21 overlapping copies of the real 8-minute soak of
// testdata/soak (a new copy every 23 s, like 21 clusters' watches
// recorded at once), WTRACE_SOAK_MB megabytes (500 by default), in a
// temporary file. WTRACE_SOAK_PCAP names a capture to use instead.
var soakPcap = sync.OnceValues(buildSoak)

// soakFile is the file soakPcap built, removed by TestMain.
var soakFile string

func buildSoak() (string, error) {
	if p := os.Getenv("WTRACE_SOAK_PCAP"); p != "" {
		return p, nil // the caller's own long capture, kept
	}
	zf, err := os.Open(filepath.Join(longSoak, "capture.pcap.zst"))
	if err != nil {
		return "", err
	}
	defer zf.Close()
	zr, err := zstd.NewReader(zf)
	if err != nil {
		return "", err
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		return "", err
	}
	pcaps := [][]byte{pcaptest.Nanosecond(raw)}
	mb := int64(500)
	if v, err := strconv.ParseInt(os.Getenv("WTRACE_SOAK_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	f, err := os.CreateTemp("", "wtrace-soak-*.pcap")
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := pcaptest.Overlap(w, pcaps, mb<<20, 21, 8001); err != nil {
		return "", err
	}
	soakFile = f.Name()
	if err := w.Flush(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// BenchmarkRecordSoak records a long capture of watch traffic (see
// soakPcap) beside the floor of reading it: the capture file parsed and
// every packet decoded down to TCP (capture/pcapfile and gopacket's
// layers), nothing reassembled. Both read the file from the page cache.
// Alternate them with -count; the input is removed at the end.
//
//	go test ./capture -run='^$' -bench=RecordSoak -benchtime=1x -count=3
//
// record is RecordPcap with connections parsed on GOMAXPROCS workers
// (what wtrace record --pcap does with more than two cores); record-1 on
// the recording goroutine alone (its default on two).
func BenchmarkRecordSoak(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 500 MB capture")
	}
	path, err := soakPcap()
	if err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("floor", func(b *testing.B) {
		b.SetBytes(st.Size())
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			pr, err := pcapfile.NewReader(f, pcapfile.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var d decoder
			var tcp int
			for {
				p, err := pr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := d.decode(p.LinkType, p.Data); err == nil {
					tcp++
				}
			}
			pr.Close()
			f.Close()
			b.ReportMetric(float64(tcp), "packets")
		}
	})
	// record: connections parsed on GOMAXPROCS workers; record-1: on one
	// goroutine.
	for _, bc := range []struct {
		name    string
		workers int
	}{{"record", runtime.GOMAXPROCS(0)}, {"record-1", 1}} {
		b.Run(bc.name, func(b *testing.B) { benchRecordSoak(b, path, st.Size(), bc.workers) })
	}
}

func benchRecordSoak(b *testing.B, path string, size int64, workers int) {
	{
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			cw := &countWriter{}
			res, err := RecordPcap(context.Background(), f, PcapOptions{Options: Options{Workers: workers}, Tool: "bench", Name: "soak.pcap", Output: formats.FileSinkOptions{Out: cw}})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cw.n)/float64(size), "wt/pcap")
			b.ReportMetric(float64(res.Stats.Events), "events")
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if soakFile != "" {
		os.Remove(soakFile)
	}
	os.Exit(code)
}

// BenchmarkCaptureDigest hashes a capture in the 1 MiB chunks readAhead
// reads: the XXH64 every recording of a capture file computes for its
// identity, against the SHA-256 it computed before (--capture-sha256).
func BenchmarkCaptureDigest(b *testing.B) {
	chunk := make([]byte, readAheadChunk)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	for _, bc := range []struct {
		name string
		h    hash.Hash
	}{{"xxh64", xxhash.New()}, {"sha256", sha256.New()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			for b.Loop() {
				bc.h.Write(chunk)
			}
		})
	}
}
