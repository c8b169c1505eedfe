package replay

import (
	"fmt"
	"io"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

func TestProbe(t *testing.T) {
	for _, p := range []string{"/tmp/basic-json.wt", "/tmp/multi-watch.wt", "/tmp/protobuf.wt"} {
		f, err := formats.Open(p, formats.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{0, 1, 4} {
			sc := f.ExchangeRecords(id)
			n := 0
			for n < 14 {
				r, err := sc.Next()
				if err == io.EOF {
					break
				}
				n++
				switch r := r.(type) {
				case *formats.Frame:
					d := r.Data
					if len(d) > 60 {
						d = d[:60]
					}
					fmt.Printf("%s #%d frame seq=%d t=%d off=%d pre=%q data=%q\n", p, id, r.Seq, r.Time, r.Offset, r.Pre, d)
				case *formats.Chunk:
					fmt.Printf("%s #%d chunk t=%d off=%d size=%d\n", p, id, r.Time, r.Offset, r.Size)
				case *formats.Body:
					fmt.Printf("%s #%d body t=%d off=%d len=%d %q\n", p, id, r.Time, r.Offset, len(r.Data), r.Data[:min(len(r.Data), 300)])
				case *formats.End:
					fmt.Printf("%s #%d end %+v\n", p, id, r)
				default:
					fmt.Printf("%s #%d %T\n", p, id, r)
				}
			}
		}
	}
}
