package pcapfile

import (
	"bytes"
	"io"
	"testing"
)

// TestWriter: Writer writes the bytes pcapgo's nanosecond writer writes,
// and Reader reads them back.
func TestWriter(t *testing.T) {
	ps := samplePackets()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, LinkEthernet, 65536)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if err := w.WritePacket(Packet{Time: p.t.UnixNano(), Data: p.data, Length: p.orig}); err != nil {
			t.Fatal(err)
		}
	}
	if want := writePcap(t, ps, true); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("Writer wrote %d bytes unlike pcapgo.NewWriterNanos's %d", buf.Len(), len(want))
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range ps {
		p, err := r.Next()
		if err != nil || p.Time != want.t.UnixNano() || p.Length != want.orig || !bytes.Equal(p.Data, want.data) || p.LinkType != LinkEthernet {
			t.Fatalf("packet %d: %+v, %v; want time %d, length %d, %d bytes", i, p, err, want.t.UnixNano(), want.orig, len(want.data))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last packet: %v; want io.EOF", err)
	}
	if err := w.WritePacket(Packet{Data: make([]byte, 65537)}); err == nil {
		t.Error("a packet over the snap length: no error")
	}
	if _, err := NewWriter(&buf, LinkEthernet, MaxPacketSize+1); err == nil {
		t.Error("a snap length over MaxPacketSize: no error")
	}
}
