package chunked

import (
	"testing"
)

// benchBodies are real watch bodies from the corpus: small is basic-json
// (one ~1 KB chunk per event), large is large-objects (32 KiB chunks).
var benchBodies = []struct{ name, file string }{
	{"small", "basic-json-watch.chunked"},
	{"large", "large-objects-watch.chunked"},
}

// BenchmarkDecoder runs the Next loop over a body fed in 64 KiB segments,
// as capture does with loopback TCP segments.
func BenchmarkDecoder(b *testing.B) {
	for _, body := range benchBodies {
		in := readFixture(b, body.file)
		b.Run(body.name, func(b *testing.B) {
			d := NewDecoder()
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				var data int
				for p := in; len(p) > 0; {
					seg := p[:min(len(p), 64<<10)]
					p = p[len(seg):]
					for len(seg) > 0 {
						n, tok, err := d.Next(seg, 0)
						if err != nil {
							b.Fatal(err)
						}
						data += len(tok.Data)
						seg = seg[n:]
					}
				}
				if data == 0 {
					b.Fatal("no data")
				}
			}
		})
	}
}
