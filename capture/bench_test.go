package capture

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
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
	_, err := RecordPcap(context.Background(), bytes.NewReader(data), PcapOptions{Tool: "bench", Name: "bench.pcap", Output: FileSinkOptions{Out: out}})
	return err
}
