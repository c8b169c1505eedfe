package frame

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
)

// splitBody feeds pieces to s and counts events; it panics on error.
func splitBody(s *Splitter, pieces [][]byte) int {
	n := 0
	for _, p := range pieces {
		for len(p) > 0 {
			k, _, ok, err := s.Next(p)
			if err != nil {
				panic(err)
			}
			if ok {
				n++
			}
			p = p[k:]
		}
	}
	return n
}

// BenchmarkSplitJSON splits the real basic-json watch body (243 KB, 200
// events). wtrace is one input (zero-copy); wtrace_1448 cuts it into
// Ethernet-sized pieces (events span pieces and are copied); encoding_json
// is an encoding/json.Decoder reading json.RawMessage values, the usual
// hand-rolled splitter.
func BenchmarkSplitJSON(b *testing.B) {
	body := fixtureNamed(b, "basic-json-watch").body(b)
	want := len(truthFor(b, "basic-json-watch"))
	for _, bc := range []struct {
		name   string
		pieces [][]byte
	}{{"wtrace", oneShot(body)}, {"wtrace_1448", fixed(1448)(body)}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewSplitter(JSON, Options{})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if n := splitBody(s, bc.pieces); n != want {
					b.Fatalf("%d events; want %d", n, want)
				}
			}
		})
	}
	stdlib := func(b *testing.B) {
		dec := json.NewDecoder(bytes.NewReader(body))
		n := 0
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != want {
			b.Fatalf("%d events; want %d", n, want)
		}
	}
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			stdlib(b)
		}
	})
	// speedup alternates both splitters body by body, so that a busy
	// machine slows both alike, and reports how many times faster wtrace
	// (one input) is.
	b.Run("speedup", func(b *testing.B) {
		s := NewSplitter(JSON, Options{})
		one := oneShot(body)
		var tw, ts time.Duration
		for b.Loop() {
			t0 := time.Now()
			splitBody(s, one)
			t1 := time.Now()
			stdlib(b)
			tw, ts = tw+t1.Sub(t0), ts+time.Since(t1)
		}
		b.ReportMetric(float64(ts)/float64(tw), "x_vs_encoding_json")
	})
}

// BenchmarkSplitProtobuf splits the real protobuf watch body (197 KB, 201
// frames), in one input and in 1448-byte pieces.
func BenchmarkSplitProtobuf(b *testing.B) {
	body := fixtureNamed(b, "protobuf-p1-watch").body(b)
	want := len(truthFor(b, "protobuf-p1-watch"))
	for _, bc := range []struct {
		name   string
		pieces [][]byte
	}{{"wtrace", oneShot(body)}, {"wtrace_1448", fixed(1448)(body)}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewSplitter(Protobuf, Options{})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if n := splitBody(s, bc.pieces); n != want {
					b.Fatalf("%d events; want %d", n, want)
				}
			}
		})
	}
}

// BenchmarkSplitCBOR splits the real CBOR watch body of cbor-informer
// (25 KB, 45 events of Secrets, application/cbor-seq from a real
// apiserver), in one input and in 1448-byte pieces. The bytes are repeated
// into a body of about 250 KB so that per-body costs do not dominate.
// apimachinery is client-go's own CBOR frame reader
// (cbor.NewFramer().NewFrameReader, which decodes each item as a
// cbor.RawMessage): what a client spends on the same body.
func BenchmarkSplitCBOR(b *testing.B) {
	one := fixtureNamed(b, "cbor-informer-secrets").body(b)
	oneN := len(truthFor(b, "cbor-informer-secrets"))
	// The fixture ends inside a last, cut event: repeat only whole events.
	end := truthFor(b, "cbor-informer-secrets")[oneN-1].BodyEnd
	var body []byte
	want := 0
	for len(body) < 250<<10 {
		body = append(body, one[:end]...)
		want += oneN
	}
	for _, bc := range []struct {
		name   string
		pieces [][]byte
	}{{"wtrace", oneShot(body)}, {"wtrace_1448", fixed(1448)(body)}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewSplitter(CBOR, Options{})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if n := splitBody(s, bc.pieces); n != want {
					b.Fatalf("%d events; want %d", n, want)
				}
			}
		})
	}
	b.Run("apimachinery", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		buf := make([]byte, 64<<10)
		for b.Loop() {
			fr := cbor.NewFramer().NewFrameReader(io.NopCloser(bytes.NewReader(body)))
			n := 0
			for {
				_, err := fr.Read(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n != want {
				b.Fatalf("%d events; want %d", n, want)
			}
		}
	})
}

// BenchmarkResync scans the real bodies in resync mode from byte 1 (the
// first event is lost, the rest is split normally).
func BenchmarkResync(b *testing.B) {
	for _, bc := range []struct{ name, fixture string }{{"json", "basic-json-watch"}, {"protobuf", "protobuf-p1-watch"}, {"cbor", "cbor-informer-secrets"}} {
		body := fixtureNamed(b, bc.fixture).body(b)[1:]
		f := fixtureNamed(b, bc.fixture).format()
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s := NewSplitter(f, Options{Resync: true})
				splitBody(s, [][]byte{body})
			}
		})
	}
}

// BenchmarkPeek peeks every event of the real watch bodies; bytes are the
// events' bytes.
func BenchmarkPeek(b *testing.B) {
	for _, bc := range []struct{ name, fixture string }{{"json", "basic-json-watch"}, {"protobuf", "protobuf-p1-watch"}, {"cbor", "cbor-informer-secrets"}, {"table", "table-watch-configmaps"}} {
		fx := fixtureNamed(b, bc.fixture)
		evs := splitAll(b, fx.format(), fx.body(b))
		total := 0
		for _, ev := range evs {
			total += len(ev)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for _, ev := range evs {
					if _, err := Peek(fx.format(), ev); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
