package redact_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// corpusParts are the events and opaque response bodies of a corpus
// capture recorded with Secret values kept.
type corpusParts struct {
	events [][]byte
	format []frame.Format
	bodies [][]byte // decoded
	cts    []string
}

func loadCorpus(b *testing.B, scenario string) corpusParts {
	b.Helper()
	return loadSession(b, wttest.RecordCorpus(b, scenario, true))
}

// loadPcap records a capture outside testdata (the shared corpus).
func loadPcap(b *testing.B, pcap string) corpusParts {
	b.Helper()
	if _, err := os.Stat(pcap); err != nil {
		b.Skip("capture not found:", err)
	}
	out := filepath.Join(b.TempDir(), "s.wt")
	if _, err := wttest.RecordPcap(pcap, out, capture.Options{KeepSecrets: true}); err != nil {
		b.Fatal(err)
	}
	return loadSession(b, out)
}

func loadSession(b *testing.B, path string) corpusParts {
	b.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var p corpusParts
	fmts := map[int64]frame.Format{}
	encs := map[int64]string{}
	cts := map[int64]string{}
	bodies := map[int64][]byte{}
	for _, x := range f.Index().Exchanges {
		if x.Response != nil {
			fmts[x.Request.Exchange] = frame.Format(x.Response.Events)
			encs[x.Request.Exchange] = x.Response.Encoding
			for _, h := range x.Response.Header {
				if h.Name == "Content-Type" {
					cts[x.Request.Exchange] = h.Value
				}
			}
		}
	}
	for r, err := range f.Records().All() {
		if err != nil {
			b.Fatal(err)
		}
		switch r := r.(type) {
		case *formats.Frame:
			p.events = append(p.events, r.Data)
			p.format = append(p.format, fmts[r.Exchange])
		case *formats.Body:
			if r.Dir == formats.ServerToClient {
				bodies[r.Exchange] = append(bodies[r.Exchange], r.Data...)
			}
		}
	}
	for id, body := range bodies {
		if encs[id] == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				b.Fatal(err)
			}
		}
		p.bodies = append(p.bodies, body)
		p.cts = append(p.cts, cts[id])
	}
	return p
}

// BenchmarkEvent: the redactor on every watch event of a corpus capture.
// basic-json and protobuf hold no Secret (the cost every event pays);
// multi-watch's Secret watch does, and cbor-informer's (CBOR, from a real
// apiserver: configmaps and Secrets).
func BenchmarkEvent(b *testing.B) {
	for _, sc := range []string{"basic-json", "protobuf", "multi-watch", "cbor-informer"} {
		b.Run(sc, func(b *testing.B) {
			p := loadCorpus(b, sc)
			var n int64
			for _, e := range p.events {
				n += int64(len(e))
			}
			s := redact.NewSecrets()
			b.SetBytes(n)
			b.ReportAllocs()
			for b.Loop() {
				for i, e := range p.events {
					var rep redact.Report
					s.Event(p.format[i], e, &rep)
				}
			}
		})
	}
}

// BenchmarkBody: the streaming redactor on every opaque response body of
// a corpus capture (LISTs, discovery), fed in 32 KiB pieces.
func BenchmarkBody(b *testing.B) {
	for _, sc := range []string{"basic-json", "multi-watch", "large-objects", "cbor-informer"} {
		b.Run(sc, func(b *testing.B) {
			var p corpusParts
			if sc == "large-objects" {
				pcap := filepath.Join("..", "..", "..", "shared", "corpus", sc, "capture.pcap")
				p = loadPcap(b, pcap)
			} else {
				p = loadCorpus(b, sc)
			}
			var n int64
			for _, body := range p.bodies {
				n += int64(len(body))
			}
			s := redact.NewSecrets()
			b.SetBytes(n)
			b.ReportAllocs()
			emit := func([]byte) {}
			for b.Loop() {
				for i, body := range p.bodies {
					var rep redact.Report
					bd := s.NewBody(redact.BodyOptions{ContentType: p.cts[i]}, &rep)
					for q := body; len(q) > 0; {
						k := min(len(q), 32<<10)
						bd.Write(q[:k], emit)
						q = q[k:]
					}
					bd.Close(true, emit)
				}
			}
		})
	}
}
