package formats

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wtrace/wtrace/frame"
)

// realEvents returns the 200 watch events (about 1.2 KiB of JSON each) that
// a real kube-apiserver sent in the corpus's basic-json scenario.
func realEvents(tb testing.TB) [][]byte {
	data, err := os.ReadFile("testdata/events-basic-json.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

// benchFrames returns n Frame records cycling through the real events, 1
// ms apart, and their event bytes in total.
func benchFrames(tb testing.TB, n int) ([]Record, int64) {
	events := realEvents(tb)
	recs := make([]Record, n)
	var size, off int64
	for i := range recs {
		ev := events[i%len(events)]
		recs[i] = &Frame{Exchange: 1, Seq: int64(i), Time: t0 + int64(i)*int64(time.Millisecond), Offset: off, Pre: []byte("\n"), Data: ev}
		size += int64(len(ev))
		off += int64(len(ev) + 1)
	}
	return recs, size
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkWriter writes 1.2 KiB JSON event frames; one op is one Frame.
// The ratio metric is event bytes per file byte.
func BenchmarkWriter(b *testing.B) {
	recs, size := benchFrames(b, 4096)
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		b.Run(level.String(), func(b *testing.B) {
			var cw countWriter
			w, err := NewWriter(&cw, WriterOptions{Level: int(level)})
			if err != nil {
				b.Fatal(err)
			}
			w.Write(&Meta{Tool: "bench"})
			w.Write(&Request{Exchange: 1, Method: "GET", Target: "/api/v1/configmaps?watch=1"})
			w.Write(&Response{Exchange: 1, Status: 200, Events: frame.JSON})
			b.SetBytes(size / int64(len(recs)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := w.Write(recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size)*float64(i)/float64(len(recs))/float64(cw.n), "ratio")
		})
	}
}

// BenchmarkReader reads a file of 4096 event frames (5 MB of events); one
// op reads them all.
func BenchmarkReader(b *testing.B) {
	recs, size := benchFrames(b, 4096)
	all := append([]Record{&Meta{}, &Request{Exchange: 1}, &Response{Exchange: 1, Events: frame.JSON}}, recs...)
	// A second exchange interleaved, so that ExchangeRecords filters.
	mixed := append([]Record{}, all[:3]...)
	for i, r := range recs {
		mixed = append(mixed, r)
		if i%4 == 0 {
			fr := *r.(*Frame)
			fr.Exchange = 2
			mixed = append(mixed, &fr)
		}
	}
	data := encode(b, all, WriterOptions{}, false)
	mixedData := encode(b, mixed, WriterOptions{}, false)
	b.Logf("%d event bytes in a %d-byte file: ratio %.2f", size, len(data), float64(size)/float64(len(data)))

	b.Run("Reader", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			r, err := NewReader(bytes.NewReader(data), ReaderOptions{})
			if err != nil {
				b.Fatal(err)
			}
			count(b, r, len(all))
		}
	})
	b.Run("File.Records", func(b *testing.B) {
		f := open(b, data)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			count(b, f.Records(), len(all))
		}
	})
	b.Run("File.CheckBlocks", func(b *testing.B) {
		// What replay.New adds to check a session whose index is intact.
		f := open(b, data)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if d, err := f.CheckBlocks(); err != nil || len(d) > 0 {
				b.Fatal(d, err)
			}
		}
	})
	b.Run("File.ExchangeRecords", func(b *testing.B) {
		f := open(b, mixedData)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			count(b, f.ExchangeRecords(1), len(all)-1)
		}
	})
}

func count(b *testing.B, s recordSource, want int) {
	n := 0
	for {
		_, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != want {
		b.Fatal(fmt.Sprintf("read %d records; want %d", n, want))
	}
}
