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
		reuse := NewReader(nil)
		vs = append(vs, variant{body.name + "/reuse", in, func(r io.Reader) io.Reader { reuse.Reset(r); return reuse }})
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
