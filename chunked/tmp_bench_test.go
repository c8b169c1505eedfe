package chunked

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkTmpReuse(b *testing.B) {
	for _, body := range benchBodies {
		in := readFixture(b, body.file)
		b.Run(body.name, func(b *testing.B) {
			buf := make([]byte, 32<<10)
			src := bytes.NewReader(in)
			r := NewReader(src)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(in)
				r.Reset(src)
				for {
					_, err := r.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
