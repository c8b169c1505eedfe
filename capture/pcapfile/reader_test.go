package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/klauspost/compress/zstd"
)

type pkt struct {
	data []byte
	t    time.Time
	orig int
}

func samplePackets() []pkt {
	base := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	var ps []pkt
	for i := range 20 {
		d := bytes.Repeat([]byte{byte(i)}, 40+i*7)
		ps = append(ps, pkt{data: d, t: base.Add(time.Duration(i) * time.Millisecond), orig: len(d) + i%3})
	}
	return ps
}

func writePcap(t testing.TB, ps []pkt, nanos bool) []byte {
	var buf bytes.Buffer
	var w *pcapgo.Writer
	if nanos {
		w = pcapgo.NewWriterNanos(&buf)
	} else {
		w = pcapgo.NewWriter(&buf)
	}
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		ci := gopacket.CaptureInfo{Timestamp: p.t, CaptureLength: len(p.data), Length: p.orig}
		if err := w.WritePacket(ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func writePcapNG(t testing.TB, ps []pkt) []byte {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeLinuxSLL)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		ci := gopacket.CaptureInfo{Timestamp: p.t, CaptureLength: len(p.data), Length: p.orig}
		if err := w.WritePacket(ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(t testing.TB, b []byte) ([]Packet, *Reader, error) {
	r, err := NewReader(bytes.NewReader(b), Options{})
	if err != nil {
		return nil, nil, err
	}
	var out []Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		p.Data = bytes.Clone(p.Data)
		out = append(out, p)
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func zst(b []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	return enc.EncodeAll(b, nil)
}

func TestRoundTrip(t *testing.T) {
	ps := samplePackets()
	micro := writePcap(t, ps, false)
	nano := writePcap(t, ps, true)
	ng := writePcapNG(t, ps)
	tests := []struct {
		name   string
		file   []byte
		format Format
		link   LinkType
		res    time.Duration // timestamp resolution of the format
	}{
		{"pcap-micro", micro, FormatPcap, LinkEthernet, time.Microsecond},
		{"pcap-nano", nano, FormatPcap, LinkEthernet, time.Nanosecond},
		{"pcapng", ng, FormatPcapNG, LinkLinuxSLL, time.Nanosecond},
		{"pcap-gzip", gz(nano), FormatPcap, LinkEthernet, time.Nanosecond},
		{"pcapng-zstd", zst(ng), FormatPcapNG, LinkLinuxSLL, time.Nanosecond},
		{"pcap-bigendian", bigEndianPcap(nano), FormatPcap, LinkEthernet, time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, r, err := readAll(t, tt.file)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if r.Format() != tt.format {
				t.Errorf("Format() = %v; want %v", r.Format(), tt.format)
			}
			if len(got) != len(ps) {
				t.Fatalf("read %d packets; want %d", len(got), len(ps))
			}
			for i, p := range got {
				if !bytes.Equal(p.Data, ps[i].data) {
					t.Errorf("packet %d data differs", i)
				}
				if want := ps[i].t.Truncate(tt.res).UnixNano(); p.Time != want {
					t.Errorf("packet %d time = %d; want %d", i, p.Time, want)
				}
				if p.Length != ps[i].orig {
					t.Errorf("packet %d length = %d; want %d", i, p.Length, ps[i].orig)
				}
				if p.LinkType != tt.link {
					t.Errorf("packet %d link type = %d; want %d", i, p.LinkType, tt.link)
				}
			}
		})
	}
}

// bigEndianPcap rewrites a little-endian classic pcap as big-endian.
func bigEndianPcap(le []byte) []byte {
	b := bytes.Clone(le)
	sw32 := func(o int) { binary.BigEndian.PutUint32(b[o:], binary.LittleEndian.Uint32(le[o:])) }
	sw16 := func(o int) { binary.BigEndian.PutUint16(b[o:], binary.LittleEndian.Uint16(le[o:])) }
	sw32(0)
	sw16(4)
	sw16(6)
	sw32(8)
	sw32(12)
	sw32(16)
	sw32(20)
	for o := 24; o < len(b); {
		incl := int(binary.LittleEndian.Uint32(le[o+8:]))
		for k := 0; k < 16; k += 4 {
			sw32(o + k)
		}
		o += 16 + incl
	}
	return b
}

// TestTruncated cuts files at every offset: every complete packet before the
// cut is returned, then a clean EOF (cut between records) or ErrTruncated
// with an offset, never a panic.
func TestTruncated(t *testing.T) {
	ps := samplePackets()[:6]
	for _, f := range []struct {
		name string
		b    []byte
	}{{"pcap", writePcap(t, ps, true)}, {"pcapng", writePcapNG(t, ps)}} {
		t.Run(f.name, func(t *testing.T) {
			for cut := 0; cut < len(f.b); cut++ {
				got, _, err := readAll(t, f.b[:cut])
				if err == nil {
					// Only a cut exactly at a record boundary reads cleanly.
					continue
				}
				var pe *Error
				if errors.As(err, &pe) {
					if !errors.Is(err, ErrTruncated) && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("cut %d: err = %v; want ErrTruncated", cut, err)
					}
					if pe.Offset > int64(cut) {
						t.Errorf("cut %d: error offset %d past the end", cut, pe.Offset)
					}
				} else if !errors.Is(err, ErrNotCapture) {
					t.Errorf("cut %d: err = %v (%T)", cut, err, err)
				}
				for i, p := range got {
					if !bytes.Equal(p.Data, ps[i].data) {
						t.Errorf("cut %d: packet %d differs", cut, i)
					}
				}
			}
		})
	}
}

func TestHostile(t *testing.T) {
	valid := writePcap(t, samplePackets()[:2], false)
	huge := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(huge[24+8:], 0xfffffff0) // incl_len of the first packet
	ng := writePcapNG(t, samplePackets()[:2])
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrNotCapture},
		{"text", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrNotCapture},
		{"huge-packet", huge, nil},
		{"pcapng-huge-block", hugeNGBlock(ng), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readAll(t, tt.b)
			if err == nil {
				t.Fatalf("read succeeded; want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
		})
	}
}

// hugeNGBlock sets the captured length of the first enhanced packet block
// to 4 GiB.
func hugeNGBlock(ng []byte) []byte {
	b := bytes.Clone(ng)
	for o := 0; o+8 <= len(b); {
		typ := binary.LittleEndian.Uint32(b[o:])
		l := int(binary.LittleEndian.Uint32(b[o+4:]))
		if typ == blockEPB {
			binary.LittleEndian.PutUint32(b[o+20:], 0xffffff00)
			return b
		}
		o += l
	}
	return b
}

// TestCorpus reads every real capture of the shared corpus.
func TestCorpus(t *testing.T) {
	dirs, _ := filepath.Glob("../../../shared/corpus/*/capture.pcap")
	if len(dirs) == 0 {
		t.Skip("corpus not found")
	}
	want := map[string]int{"basic-json": 416, "gone-410": 351, "multi-watch": 674, "protobuf": 833}
	for _, path := range dirs {
		name := filepath.Base(filepath.Dir(path))
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := NewReader(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			var last int64
			for {
				p, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("packet %d: %v", n, err)
				}
				if p.LinkType != LinkEthernet {
					t.Fatalf("link type %d", p.LinkType)
				}
				if p.Time < last {
					t.Logf("packet %d goes back in time", n)
				}
				last = p.Time
				n++
			}
			if w, ok := want[name]; ok && n != w {
				t.Errorf("%d packets; want %d", n, w)
			}
		})
	}
}

func FuzzReader(f *testing.F) {
	ps := samplePackets()[:3]
	f.Add(writePcap(f, ps, false))
	f.Add(writePcap(f, ps, true))
	f.Add(writePcapNG(f, ps))
	f.Add(gz(writePcapNG(f, ps)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b), Options{Secrets: func(uint32, []byte) {}})
		if err != nil {
			return
		}
		for range 10000 {
			p, err := r.Next()
			if err != nil {
				return
			}
			if len(p.Data) > MaxPacketSize {
				t.Fatalf("packet of %d bytes", len(p.Data))
			}
		}
	})
}

func BenchmarkReader(b *testing.B) {
	ps := samplePackets()
	for i := range ps {
		ps[i].data, ps[i].orig = bytes.Repeat([]byte{1}, 1500), 1500
	}
	for len(ps) < 4096 { // several read buffers' worth
		ps = append(ps, ps...)
	}
	file := writePcap(b, ps, true)
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	for b.Loop() {
		r, _ := NewReader(bytes.NewReader(file), Options{})
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
