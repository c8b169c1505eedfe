package capture

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// FuzzTCP drives the reassembly with arbitrary segments — any sequence
// numbers, flags, payload sizes, snap-length cuts and clock steps on a few
// connections, with tight limits — and checks its bookkeeping: nothing
// panics, held bytes are never counted below zero, and after Close no
// connection, held byte or waiting stream is left.
//
// Each 6 bytes of input make one segment: connection and direction, flags,
// sequence offset (2 bytes, relative to the direction's start), payload
// length, clock step.
func FuzzTCP(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 1, 3, 0, 0, 0, 1, 0, 0, 0, 0, 40, 1, 0, 0, 0, 80, 40, 1, 1, 4, 0, 0, 0, 1})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 100, 30, 1, 0, 0, 0, 0, 30, 200, 2, 8, 0, 130, 10, 9})
	f.Add([]byte{4, 1, 0, 0, 0, 0, 4, 0, 0, 200, 50, 0, 4, 0, 0, 0, 200, 0, 5, 16, 0, 0, 0, 0})
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\"}\r\n"[i%72]
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rec := NewRecorder(discardSink{}, Options{MaxConns: 2, MaxBufferedPerConn: 600, MaxBuffered: 1000, ReorderWindow: 50 * time.Millisecond})
		now := pcaptest.Start
		addr := func(conn, side byte) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1 + conn%3}), []uint16{40000, 8001}[side])
		}
		for ; len(in) >= 6; in = in[6:] {
			conn, dir := in[0]>>1&3, in[0]&1
			fl := in[1]
			off := uint32(in[2])<<8 | uint32(in[3])
			n := int(in[4])
			now = now.Add(time.Duration(in[5]) * 5 * time.Millisecond)
			p := pcaptest.Packet{Time: now, Src: addr(conn, dir), Dst: addr(conn, 1-dir),
				Seq: 1000*uint32(dir+1) + off, ACK: fl&1 != 0, SYN: fl&2 != 0, FIN: fl&4 != 0, RST: fl&8 != 0,
				Payload: payload[:min(n, len(payload))]}
			if fl&16 != 0 {
				p.Snap = 54 + n/2
			}
			if fl&2 != 0 {
				p.Seq--
			}
			if err := rec.Packet(Packet{Time: now.UnixNano(), LinkType: uint16(pcapfile.LinkEthernet), Data: pcaptest.Encode(p), Length: 54 + n}); err != nil {
				t.Fatal(err)
			}
			if rec.tcp.buffered < 0 || rec.tcp.open != len(rec.tcp.conns) {
				t.Fatalf("bookkeeping: %d bytes held, %d open of %d", rec.tcp.buffered, rec.tcp.open, len(rec.tcp.conns))
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if a := &rec.tcp; a.buffered != 0 || len(a.holding) != 0 || len(a.conns) != 0 || a.open != 0 || a.idle.head != nil || a.halfClosed.head != nil || a.active.head != nil {
			t.Fatalf("after Close: %d bytes held, %d holding, %d conns (%d open), lists %v %v", a.buffered, len(a.holding), len(a.conns), a.open, a.idle.head != nil, a.halfClosed.head != nil)
		}
	})
}

type discardSink struct{}

func (discardSink) Write(formats.Record) error { return nil }
