package edit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/formats"
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
					if _, err := Merge(context.Background(), c.inputs, MergeOptions{Output: formats.FileSinkOptions{Path: out}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSlice slices corpus sessions from the middle of their span to
// the end (their watches cut there, the world rebuilt) and by namespace;
// bytes/s are of the input.
func BenchmarkSlice(b *testing.B) {
	for _, name := range []string{"multi-watch", "large-objects"} {
		pcap := corpusPcaps(b)[name]
		if pcap == "" {
			continue
		}
		dir := b.TempDir()
		in, _ := recordRotated(b, pcap, dir, 1<<40)
		f, err := formats.Open(in, formats.ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		idx := f.Index()
		start, end := Start(idx), int64(0)
		for _, x := range idx.Exchanges {
			end = max(end, x.Last)
		}
		f.Close()
		st, err := os.Stat(in)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			opts SliceOptions
		}{{"middle", SliceOptions{From: start + (end-start)/2}}, {"namespace", SliceOptions{Namespaces: []string{"corpus-multi"}}}} {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(st.Size())
				b.ReportAllocs()
				opts := c.opts
				opts.Output = formats.FileSinkOptions{Path: filepath.Join(dir, "slice.wt")}
				for b.Loop() {
					if _, err := Slice(context.Background(), in, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
