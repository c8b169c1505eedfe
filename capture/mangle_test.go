package capture

import (
	"encoding/binary"
	"encoding/json"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// This file derives damaged copies of a capture the way the corpus tool
// pcapmangle (../shared/corpus/tools/cmd/pcapmangle) does — same modes,
// same seeded choices, same rules — so that tests can make them on the
// fly from any corpus capture without depending on the corpus' module.

// mangleRec is one record of a classic pcap file.
type mangleRec struct {
	sec, frac uint32 // timestamp as stored
	wireLen   uint32
	data      []byte
	off       int64 // file offset of its record header

	tcp      bool
	src, dst string // ip:port
	payload  int    // TCP payload bytes
}

// mangleCapture is a parsed classic pcap file.
type mangleCapture struct {
	raw  []byte
	bo   binary.ByteOrder
	nano bool
	recs []*mangleRec
}

func parseMangle(t testing.TB, raw []byte) *mangleCapture {
	t.Helper()
	if len(raw) < 24 {
		t.Fatal("mangle: not a pcap file")
	}
	c := &mangleCapture{raw: raw}
	switch binary.LittleEndian.Uint32(raw) {
	case 0xa1b2c3d4:
		c.bo = binary.LittleEndian
	case 0xa1b23c4d:
		c.bo, c.nano = binary.LittleEndian, true
	default:
		switch binary.BigEndian.Uint32(raw) {
		case 0xa1b2c3d4:
			c.bo = binary.BigEndian
		case 0xa1b23c4d:
			c.bo, c.nano = binary.BigEndian, true
		default:
			t.Fatal("mangle: not a classic pcap file")
		}
	}
	link := layers.LinkType(c.bo.Uint32(raw[20:]))
	for off := int64(24); off < int64(len(raw)); {
		h := raw[off : off+16]
		n := int64(c.bo.Uint32(h[8:]))
		r := &mangleRec{sec: c.bo.Uint32(h), frac: c.bo.Uint32(h[4:]), wireLen: c.bo.Uint32(h[12:]),
			data: raw[off+16 : off+16+n], off: off}
		p := gopacket.NewPacket(r.data, link, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		var src, dst net.IP
		if l, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			src, dst = l.SrcIP, l.DstIP
		} else if l, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			src, dst = l.SrcIP, l.DstIP
		}
		if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && src != nil {
			r.tcp = true
			r.src = net.JoinHostPort(src.String(), strconv.Itoa(int(tcp.SrcPort)))
			r.dst = net.JoinHostPort(dst.String(), strconv.Itoa(int(tcp.DstPort)))
			r.payload = len(tcp.Payload)
		}
		c.recs = append(c.recs, r)
		off += 16 + n
	}
	return c
}

// time returns a record's capture time in nanoseconds.
func (c *mangleCapture) time(r *mangleRec) int64 {
	if c.nano {
		return int64(r.sec)*1e9 + int64(r.frac)
	}
	return int64(r.sec)*1e9 + int64(r.frac)*1e3
}

// write returns a pcap file holding recs (with their own timestamps).
func (c *mangleCapture) write(recs []*mangleRec) []byte {
	out := append([]byte(nil), c.raw[:24]...)
	for _, r := range recs {
		var h [16]byte
		c.bo.PutUint32(h[0:], r.sec)
		c.bo.PutUint32(h[4:], r.frac)
		c.bo.PutUint32(h[8:], uint32(len(r.data)))
		c.bo.PutUint32(h[12:], r.wireLen)
		out = append(append(out, h[:]...), r.data...)
	}
	return out
}

// serverData returns the server→client TCP segments that carry data, in
// file order.
func (c *mangleCapture) serverData(server string) []*mangleRec {
	var data []*mangleRec
	for _, r := range c.recs {
		if r.tcp && r.src == server && r.payload > 0 {
			data = append(data, r)
		}
	}
	return data
}

// mangleDrop removes a seeded random fraction rate of the server→client
// data segments (pcapmangle -mode drop).
func (c *mangleCapture) mangleDrop(server string, seed int64, rate float64) []byte {
	data := c.serverData(server)
	rng := rand.New(rand.NewSource(seed))
	k := max(int(float64(len(data))*rate+0.5), 1)
	drop := map[*mangleRec]bool{}
	for _, i := range rng.Perm(len(data))[:k] {
		drop[data[i]] = true
	}
	var out []*mangleRec
	for _, r := range c.recs {
		if !drop[r] {
			out = append(out, r)
		}
	}
	return c.write(out)
}

// mangleReorder swaps adjacent server→client data segments of one
// connection at a fraction swap of the positions, then inserts copies of a
// fraction dup of them 1–4 packets later; every record keeps the
// timestamp of its slot (pcapmangle -mode reorder). moved maps, per
// client address, the pristine time of the first segment of each swapped
// pair to the time of the slot it now sits in: the bytes of that segment
// are only captured then.
func (c *mangleCapture) mangleReorder(server string, seed int64, swap, dup float64) (out []byte, moved map[string]map[int64]int64) {
	data := c.serverData(server)
	rng := rand.New(rand.NewSource(seed))
	order := append([]*mangleRec(nil), c.recs...)
	slot := map[*mangleRec]int{}
	for i, r := range order {
		slot[r] = i
	}
	moved = map[string]map[int64]int64{}
	k := int(float64(len(data))*swap + 0.5)
	used := map[int]bool{}
	swaps := 0
	for _, i := range rng.Perm(len(data) - 1) {
		if swaps >= k {
			break
		}
		if used[i] || used[i+1] || data[i].dst != data[i+1].dst {
			continue
		}
		used[i], used[i+1] = true, true
		a, b := data[i], data[i+1]
		sa, sb := slot[a], slot[b]
		order[sa], order[sb] = b, a
		slot[a], slot[b] = sb, sa
		swaps++
		if moved[a.dst] == nil {
			moved[a.dst] = map[int64]int64{}
		}
		moved[a.dst][c.time(a)] = c.time(b)
	}
	kd := int(float64(len(data))*dup + 0.5)
	after := map[int][]*mangleRec{}
	for _, i := range rng.Perm(len(data))[:kd] {
		r := data[i]
		s := min(slot[r]+1+rng.Intn(4), len(order)-1)
		after[s] = append(after[s], r)
	}
	var recs []*mangleRec
	for s, r := range order {
		nr := *r
		nr.sec, nr.frac = c.recs[s].sec, c.recs[s].frac // the slot keeps its timestamp
		recs = append(recs, &nr)
		for _, d := range after[s] {
			cp := *d
			cp.sec, cp.frac = nr.sec, nr.frac
			recs = append(recs, &cp)
		}
	}
	return c.write(recs), moved
}

// mangleTruncate cuts the file inside the data of the first server→client
// data segment whose record begins at or after the fraction cut of the
// file (pcapmangle -mode truncate).
func (c *mangleCapture) mangleTruncate(server string, cut float64) []byte {
	target := int64(float64(len(c.raw)) * cut)
	for _, r := range c.serverData(server) {
		if r.off >= target {
			return c.raw[:r.off+16+int64(len(r.data))/2]
		}
	}
	return c.raw
}

// corpusServer returns the server address of a corpus scenario, from its
// meta.json as pcapmangle reads it.
func corpusServer(t testing.TB, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Requests []struct {
			Server string `json:"server"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	for _, q := range meta.Requests {
		if q.Server != "" {
			return q.Server
		}
	}
	t.Fatalf("%s: no server address in meta.json", dir)
	return ""
}
