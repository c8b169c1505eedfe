package edit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/capture"
)

// BenchmarkMerge merges the parts of a rotated recording (8 KiB parts of
// a corpus capture) and two recordings; bytes/s are of the inputs.
func BenchmarkMerge(b *testing.B) {
	for _, name := range []string{"basic-json", "large-objects"} {
		pcap := corpusPcaps(b)[name]
		if pcap == "" {
			continue
		}
		dir := b.TempDir()
		whole, parts := recordRotated(b, pcap, dir, 64<<10)
		size := func(files ...string) int64 {
			var n int64
			for _, f := range files {
				st, err := os.Stat(f)
				if err != nil {
					b.Fatal(err)
				}
				n += st.Size()
			}
			return n
		}
		for _, c := range []struct {
			name   string
			inputs []string
		}{{"parts", parts}, {"two-recordings", []string{whole, whole}}} {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(size(c.inputs...))
				b.ReportAllocs()
				out := filepath.Join(dir, "merged.wt")
				for b.Loop() {
					if _, err := Merge(context.Background(), c.inputs, MergeOptions{Output: capture.FileSinkOptions{Path: out}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
