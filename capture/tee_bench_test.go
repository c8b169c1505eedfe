package capture_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// BenchmarkTee measures the proxy's recording path without the network:
// bytes handed to a TeeConn in pieces of the given size (net/http's
// writes), through the recording goroutine, HTTP/1.1 and chunked parsing,
// event splitting, redaction checks and the .wt writer (zstd), to
// io.Discard. MB/s are of response bytes.
func BenchmarkTee(b *testing.B) {
	evs := watchEvents(2000)
	var body strings.Builder
	body.WriteString(watchHead)
	for _, e := range evs {
		body.WriteString(chunk(e + "\n"))
	}
	body.WriteString("0\r\n\r\n")
	resp := []byte(body.String())
	for _, piece := range []int{512, 4 << 10, 32 << 10} {
		for _, keep := range []bool{false, true} {
			b.Run(fmt.Sprintf("piece=%d/keep-secrets=%v", piece, keep), func(b *testing.B) {
				b.SetBytes(int64(len(resp)))
				b.ReportAllocs()
				for b.Loop() {
					fs, err := formats.NewFileSink(formats.FileSinkOptions{Out: io.Discard, Meta: formats.Meta{Tool: "bench"}})
					if err != nil {
						b.Fatal(err)
					}
					tee := capture.NewTee(fs, capture.TeeOptions{KeepSecrets: keep})
					c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
					c.Data(formats.ClientToServer, []byte(watchRequest))
					for p := resp; len(p) > 0; {
						n := min(len(p), piece)
						c.Data(formats.ServerToClient, p[:n])
						p = p[n:]
					}
					c.Close(formats.ConnClosed)
					if err := tee.Close(); err != nil {
						b.Fatal(err)
					}
					if err := fs.Close(formats.Ending{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
