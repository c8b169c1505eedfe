package export

import (
	"io"
	"os"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// BenchmarkExport exports corpus sessions in each format to io.Discard;
// bytes/s are of the session file.
func BenchmarkExport(b *testing.B) {
	for _, name := range []string{"basic-json", "tls-h2", "large-objects"} {
		var sc scenario
		for _, s := range scenarios(b) {
			if s.name == name {
				sc = s
			}
		}
		if sc.pcap == "" {
			continue
		}
		path := record(b, sc, true)
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		f := wttest.OpenSession(b, path)
		for _, format := range []struct {
			name string
			fn   func(io.Writer) (Result, error)
		}{
			{"jsonl", func(w io.Writer) (Result, error) { return JSONL(w, f, JSONLOptions{}) }},
			{"jsonl-data", func(w io.Writer) (Result, error) { return JSONL(w, f, JSONLOptions{Data: true}) }},
			{"har", func(w io.Writer) (Result, error) { return HAR(w, f, HAROptions{}) }},
			{"pcap", func(w io.Writer) (Result, error) { return Pcap(w, f, PcapOptions{}) }},
		} {
			b.Run(name+"/"+format.name, func(b *testing.B) {
				b.SetBytes(st.Size())
				b.ReportAllocs()
				for b.Loop() {
					if _, err := format.fn(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
