package chunked

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httputil"
	"sort"
	"syscall"
	"testing"
)

func cpuNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func TestTmpCPU(t *testing.T) {
	type variant struct {
		name string
		in   []byte
		new  func(io.Reader) io.Reader
	}
	var vs []variant
	for _, body := range benchBodies {
		in := readFixture(t, body.file)
		vs = append(vs, variant{body.name + "/wtrace", in, func(r io.Reader) io.Reader { return NewReader(r) }})
		vs = append(vs, variant{body.name + "/httputil", in, httputil.NewChunkedReader})
		dec := &decReader{d: NewDecoder(), in: in}
		vs = append(vs, variant{body.name + "/decoder", in, func(io.Reader) io.Reader { dec.d.Reset(); dec.p = dec.in; return dec }})
	}
	res := map[string][]float64{}
	buf := make([]byte, 32<<10)
	for round := 0; round < 15; round++ {
		for _, v := range vs {
			src := bytes.NewReader(v.in)
			const N = 300
			start := cpuNow()
			for i := 0; i < N; i++ {
				src.Reset(v.in)
				r := v.new(src)
				for {
					_, err := r.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			res[v.name] = append(res[v.name], float64(cpuNow()-start)/N)
		}
	}
	for _, v := range vs {
		x := res[v.name]
		sort.Float64s(x)
		fmt.Printf("%-20s median cpu %8.0f ns/op  min %8.0f  MB/s %.0f\n", v.name, x[len(x)/2], x[0], float64(len(v.in))/x[len(x)/2]*1e3)
	}
}

// decReader runs the Next loop over 64 KiB segments and reports EOF at Done.
type decReader struct {
	d  *Decoder
	in []byte
	p  []byte
}

func (r *decReader) Read(b []byte) (int, error) {
	for len(r.p) > 0 {
		seg := r.p[:min(len(r.p), 64<<10)]
		r.p = r.p[len(seg):]
		for len(seg) > 0 {
			n, _, err := r.d.Next(seg, 0)
			if err != nil {
				return 0, err
			}
			seg = seg[n:]
		}
	}
	return 0, io.EOF
}
