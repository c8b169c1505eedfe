package pcapfile

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Writer writes a classic pcap file with nanosecond timestamps (magic
// 0xa1b23c4d, little-endian, version 2.4), as `tcpdump -w
// --time-stamp-precision=nano` and gopacket's pcapgo.NewWriterNanos write
// it; Reader reads it back. It does not buffer: give it a bufio.Writer.
// A Writer is not safe for concurrent use.
type Writer struct {
	w    io.Writer
	snap int
	hdr  [16]byte
}

// NewWriter writes the file header for packets of link type link captured
// with snap length snapLen (1..MaxPacketSize) and returns the Writer.
func NewWriter(w io.Writer, link LinkType, snapLen int) (*Writer, error) {
	if snapLen <= 0 || snapLen > MaxPacketSize {
		return nil, fmt.Errorf("pcapfile: snap length %d out of range [1, %d]", snapLen, MaxPacketSize)
	}
	var h [24]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:4], 0xa1b23c4d)
	le.PutUint16(h[4:6], 2)
	le.PutUint16(h[6:8], 4)
	le.PutUint32(h[16:20], uint32(snapLen))
	le.PutUint32(h[20:24], uint32(link))
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, snap: snapLen}, nil
}

// WritePacket appends p: its Time, Length (at least len(p.Data)) and Data,
// which must not exceed the snap length. LinkType and Interface are the
// file's.
func (w *Writer) WritePacket(p Packet) error {
	if len(p.Data) > w.snap {
		return fmt.Errorf("pcapfile: packet of %d bytes exceeds the snap length %d", len(p.Data), w.snap)
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:4], uint32(p.Time/1e9))
	le.PutUint32(w.hdr[4:8], uint32(p.Time%1e9))
	le.PutUint32(w.hdr[8:12], uint32(len(p.Data)))
	le.PutUint32(w.hdr[12:16], uint32(max(p.Length, len(p.Data))))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return err
	}
	_, err := w.w.Write(p.Data)
	return err
}
