package pcaptest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Overlap writes to w a classic pcap (nanosecond, Ethernet) of overlapping
// copies of a sequence, like many clients of one apiserver: the pcaps
// (classic, little-endian, Ethernet, nanosecond timestamps), one after the
// other, make the sequence; a new copy starts every 1/overlap of its span,
// so about overlap copies run at once, merged in time order, until at
// least limit bytes are written. Each copy's client side (the side whose
// TCP port is not serverPort) gets an IPv4 address of its own, 10.k>>8.k.2,
// so copies never share a connection. It returns the bytes written.
func Overlap(w io.Writer, pcaps [][]byte, limit int64, overlap int, serverPort uint16) (int64, error) {
	type packet struct {
		t    int64
		data []byte
	}
	var base []packet
	var size, end int64
	for i, p := range pcaps {
		if len(p) < 24 || binary.LittleEndian.Uint32(p) != 0xa1b23c4d || binary.LittleEndian.Uint32(p[20:]) != 1 {
			return 0, fmt.Errorf("pcap %d: not a little-endian nanosecond Ethernet pcap", i)
		}
		b := p[24:]
		var shift int64
		first := true
		for len(b) >= 16 {
			t := int64(binary.LittleEndian.Uint32(b[0:4]))*1e9 + int64(binary.LittleEndian.Uint32(b[4:8]))
			n := int(binary.LittleEndian.Uint32(b[8:12]))
			if n > len(b)-16 {
				return 0, fmt.Errorf("pcap %d: cut record", i)
			}
			if first && end != 0 {
				shift = end + 1e9 - t // each input follows the previous one
			}
			first = false
			base = append(base, packet{t: t + shift, data: b[16 : 16+n]})
			size += 16 + int64(n)
			b = b[16+n:]
		}
		if len(base) > 0 {
			end = base[len(base)-1].t
		}
	}
	if len(base) == 0 || overlap < 1 {
		return 0, errors.New("pcaptest: no packets, or overlap < 1")
	}
	copies := int((limit + size - 1) / size)
	if copies > 1<<16 {
		return 0, errors.New("pcaptest: too many copies")
	}
	step := (base[len(base)-1].t - base[0].t) / int64(overlap)
	var fh [24]byte
	binary.LittleEndian.PutUint32(fh[0:4], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(fh[4:6], 2)
	binary.LittleEndian.PutUint16(fh[6:8], 4)
	binary.LittleEndian.PutUint32(fh[16:20], 262144)
	binary.LittleEndian.PutUint32(fh[20:24], 1)
	if _, err := w.Write(fh[:]); err != nil {
		return 0, err
	}
	written := int64(len(fh))
	pos := make([]int, copies) // the next packet of each copy
	lo := 0                    // copies before lo are done
	buf := make([]byte, 0, 1<<18)
	var ph [16]byte
	for {
		best := -1
		var bt int64
		for k := lo; k < copies; k++ {
			if pos[k] >= len(base) {
				if k == lo {
					lo++
				}
				continue
			}
			t := base[pos[k]].t + int64(k)*step
			if best < 0 || t < bt {
				best, bt = k, t
			}
			if base[0].t+int64(k)*step > bt {
				break // later copies have not started yet
			}
		}
		if best < 0 {
			return written, nil
		}
		p := base[pos[best]]
		pos[best]++
		buf = append(buf[:0], p.data...)
		if len(buf) >= 38 && buf[12] == 0x08 && buf[13] == 0x00 && buf[23] == 6 {
			if ihl := int(buf[14]&0x0f) * 4; len(buf) >= 14+ihl+4 {
				ip := buf[26:30] // the client is the source
				if binary.BigEndian.Uint16(buf[14+ihl:]) == serverPort {
					ip = buf[30:34] // … or the destination
				}
				copy(ip, []byte{10, byte(best >> 8), byte(best), 2})
			}
		}
		binary.LittleEndian.PutUint32(ph[0:4], uint32(bt/1e9))
		binary.LittleEndian.PutUint32(ph[4:8], uint32(bt%1e9))
		binary.LittleEndian.PutUint32(ph[8:12], uint32(len(buf)))
		binary.LittleEndian.PutUint32(ph[12:16], uint32(len(buf)))
		if _, err := w.Write(ph[:]); err != nil {
			return written, err
		}
		if _, err := w.Write(buf); err != nil {
			return written, err
		}
		written += 16 + int64(len(buf))
	}
}

// Nanosecond returns a copy of the classic little-endian microsecond pcap
// raw with nanosecond timestamps, as Overlap takes them; any other pcap is
// returned as it is (copied).
func Nanosecond(raw []byte) []byte {
	out := bytes.Clone(raw)
	if binary.LittleEndian.Uint32(out) != 0xa1b2c3d4 {
		return out
	}
	binary.LittleEndian.PutUint32(out, 0xa1b23c4d)
	for b := out[24:]; len(b) >= 16; {
		binary.LittleEndian.PutUint32(b[4:], binary.LittleEndian.Uint32(b[4:])*1000)
		b = b[16+int(binary.LittleEndian.Uint32(b[8:])):]
	}
	return out
}
