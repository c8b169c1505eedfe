package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// watchBody is a chunked JSON watch response of n events, one chunk each.
func watchBody(n int) (head string, chunks []string, events []string) {
	head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	for i := range n {
		ev := fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"k":"%s"}}}`,
			i, 100+i, strings.Repeat("x", 50+i*13%200))
		events = append(events, ev)
		chunks = append(chunks, fmt.Sprintf("%x\r\n%s\n\r\n", len(ev)+1, ev))
	}
	return head, chunks, events
}

const watchReq = "GET /api/v1/namespaces/demo/configmaps?watch=true HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n\r\n"

// recordPcap records a capture held in memory.
func recordPcap(t *testing.T, pcap []byte, opts Options) *memSink {
	t.Helper()
	sink, _ := recordReader(t, bytes.NewReader(pcap), opts)
	return sink
}

func frames(recs []formats.Record) []string {
	var out []string
	for _, r := range recs {
		if f, ok := r.(*formats.Frame); ok {
			out = append(out, string(f.Data))
		}
	}
	return out
}

// TestTCPDamage records one watch through the kinds of damage real
// captures show and checks which events survive.
func TestTCPDamage(t *testing.T) {
	head, chunks, events := watchBody(12)
	body := head + strings.Join(chunks, "") + "0\r\n\r\n"
	tests := []struct {
		name      string
		build     func(b *pcaptest.Builder, c *pcaptest.Conn)
		want      []string // events expected, in order
		anomalies []formats.AnomalyKind
		end       formats.EndStatus
	}{{
		name: "in order",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.Send(pcaptest.ToClient, []byte(body))
			c.FIN(pcaptest.ToClient)
			c.FIN(pcaptest.ToServer)
		},
		want: events,
		end:  formats.EndComplete,
	}, {
		name: "out of order, retransmitted and overlapping segments",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.MSS = 300
			segs := c.Segments(pcaptest.ToClient, []byte(body))
			// Swap pairs, resend some, and add a segment that overlaps two others.
			for i := 0; i+1 < len(segs); i += 3 {
				segs[i], segs[i+1] = segs[i+1], segs[i]
			}
			var all []pcaptest.Packet
			for i, s := range segs {
				all = append(all, s)
				if i%4 == 0 {
					all = append(all, s) // retransmission
				}
				if i == 5 {
					o := segs[2]
					o.Payload = append(bytes.Clone(segs[2].Payload), segs[3].Payload[:10]...)
					all = append(all, o) // overlaps segments 2 and 3
				}
			}
			c.Add(all...)
			c.FIN(pcaptest.ToClient)
		},
		want: events,
		end:  formats.EndComplete,
	}, {
		name: "a segment never captured",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.MSS = 400
			segs := c.Segments(pcaptest.ToClient, []byte(body))
			c.Add(segs[:4]...)
			c.Add(segs[5:]...) // segment 4 lost
			c.FIN(pcaptest.ToClient)
		},
		anomalies: []formats.AnomalyKind{formats.AnomalyGap},
		end:       formats.EndGap,
	}, {
		name: "connection began before the capture",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			// No handshake, no request: the capture starts inside chunk 3.
			c.Segments(pcaptest.ToServer, []byte(watchReq))
			pre := head + strings.Join(chunks[:3], "") + chunks[3][:20]
			c.Segments(pcaptest.ToClient, []byte(pre))
			c.Ack(pcaptest.ToServer)
			c.Send(pcaptest.ToClient, []byte(chunks[3][20:]+strings.Join(chunks[4:], "")+"0\r\n\r\n"))
		},
		want:      events[4:],
		anomalies: []formats.AnomalyKind{formats.AnomalyResync},
		end:       formats.EndComplete,
	}, {
		name: "capture ends inside an event",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			cut := len(head) + len(strings.Join(chunks[:6], "")) + 30
			c.Send(pcaptest.ToClient, []byte(body[:cut]))
		},
		want:      events[:6],
		anomalies: []formats.AnomalyKind{formats.AnomalyTruncated},
		end:       formats.EndTruncated,
	}, {
		name: "snap length cuts a segment",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.MSS = 500
			segs := c.Segments(pcaptest.ToClient, []byte(body))
			segs[3].Snap = 54 + 100 // headers + 100 bytes of payload
			c.Add(segs...)
			c.FIN(pcaptest.ToClient)
		},
		anomalies: []formats.AnomalyKind{formats.AnomalyGap},
		end:       formats.EndGap,
	}, {
		name: "reset by the client",
		build: func(b *pcaptest.Builder, c *pcaptest.Conn) {
			c.Send(pcaptest.ToServer, []byte(watchReq))
			cut := len(head) + len(strings.Join(chunks[:5], ""))
			c.Send(pcaptest.ToClient, []byte(body[:cut]))
			c.RST(pcaptest.ToServer)
		},
		want: events[:5],
		end:  formats.EndReset,
	}}
	for _, tt := range tests {
		for _, v6 := range []bool{false, true} {
			name := tt.name
			client, server := "127.0.0.1:40000", "127.0.0.1:8001"
			if v6 {
				name += "/ipv6"
				client, server = "[::1]:40000", "[::1]:8001"
			}
			t.Run(name, func(t *testing.T) {
				b := pcaptest.New()
				handshake := tt.name != "connection began before the capture"
				c := b.Conn(client, server, handshake)
				tt.build(b, c)
				sink := recordPcap(t, b.Pcap(), Options{KeepSecrets: true})
				got := frames(sink.recs)
				if tt.want != nil && strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("events:\ngot  %d: %.200q\nwant %d: %.200q", len(got), got, len(tt.want), tt.want)
				}
				if tt.want == nil {
					// Damage in the middle: what survives is a subset, in order.
					j := 0
					for _, g := range got {
						for j < len(events) && events[j] != g {
							j++
						}
						if j == len(events) {
							t.Errorf("event %.60q was not sent (or out of order)", g)
						}
					}
					if len(got) == 0 || len(got) == len(events) {
						t.Errorf("%d of %d events survived", len(got), len(events))
					}
				}
				kinds := map[formats.AnomalyKind]bool{}
				for _, a := range anomalies(sink.recs) {
					kinds[a.Kind] = true
				}
				for _, k := range tt.anomalies {
					if !kinds[k] {
						t.Errorf("no %s anomaly recorded; got %v", k, anomalies(sink.recs))
					}
				}
				var end *formats.End
				for _, r := range sink.recs {
					if e, ok := r.(*formats.End); ok && e.Dir == formats.ServerToClient {
						end = e
					}
				}
				if end == nil || end.Status != tt.end {
					t.Errorf("response end = %+v; want status %s", end, tt.end)
				}
				for _, r := range sink.recs {
					if c, ok := r.(*formats.Conn); ok && (c.Client != client || c.Server != server) {
						t.Errorf("conn %s → %s; want %s → %s", c.Client, c.Server, client, server)
					}
				}
			})
		}
	}
}

// TestLinkTypes decodes the same TCP packet under every supported link type.
func TestLinkTypes(t *testing.T) {
	pkt := pcaptest.Encode(pcaptest.Packet{Src: netipAP("10.0.0.2:40000"), Dst: netipAP("10.0.0.1:6443"), Seq: 7, ACK: true, Payload: []byte("GET / HTTP/1.1\r\n\r\n")})
	ip := pkt[14:]
	pkt6 := pcaptest.Encode(pcaptest.Packet{Src: netipAP("[fd00::2]:40000"), Dst: netipAP("[fd00::1]:6443"), Seq: 7, ACK: true, Payload: []byte("x")})
	ip6 := pkt6[14:]
	sll := append(append(make([]byte, 14), 0x08, 0x00), ip...)
	sll2 := append(append([]byte{0x08, 0x00}, make([]byte, 18)...), ip...)
	null := append(binary.LittleEndian.AppendUint32(nil, 2), ip...)
	loop6 := append(binary.BigEndian.AppendUint32(nil, 24), ip6...)
	vlan := append(append(bytes.Clone(pkt[:12]), 0x81, 0x00, 0x00, 0x05, 0x08, 0x00), ip...)
	tests := []struct {
		name string
		link pcapfile.LinkType
		data []byte
		src  string
	}{
		{"ethernet", pcapfile.LinkEthernet, pkt, "10.0.0.2:40000"},
		{"vlan", pcapfile.LinkEthernet, vlan, "10.0.0.2:40000"},
		{"linux-sll", pcapfile.LinkLinuxSLL, sll, "10.0.0.2:40000"},
		{"linux-sll2", pcapfile.LinkSLL2, sll2, "10.0.0.2:40000"},
		{"null", pcapfile.LinkNull, null, "10.0.0.2:40000"},
		{"loop-ipv6", pcapfile.LinkLoop, loop6, "[fd00::2]:40000"},
		{"raw", pcapfile.LinkRaw, ip, "10.0.0.2:40000"},
		{"ipv6", pcapfile.LinkIPv6, ip6, "[fd00::2]:40000"},
	}
	for _, tt := range tests {
		var d decoder
		sg, err := d.decode(tt.link, tt.data)
		if err != nil {
			t.Errorf("%s: decode: %v", tt.name, err)
			continue
		}
		if got := sg.src.String(); got != tt.src {
			t.Errorf("%s: source %s; want %s", tt.name, got, tt.src)
		}
	}
	var d decoder
	if _, err := d.decode(pcapfile.LinkEthernet, pkt[:20]); err == nil {
		t.Errorf("short packet decoded")
	}
}

// TestIdleWatch: a watch silent for longer than the reorder window (and
// than any flush interval) stays one exchange.
func TestIdleWatch(t *testing.T) {
	head, chunks, events := watchBody(3)
	b := pcaptest.New()
	c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
	c.Send(pcaptest.ToServer, []byte(watchReq))
	c.Send(pcaptest.ToClient, []byte(head+chunks[0]))
	b.Advance(10 * time.Minute)
	c.Send(pcaptest.ToClient, []byte(chunks[1]))
	b.Advance(10 * time.Minute)
	c.Send(pcaptest.ToClient, []byte(chunks[2]+"0\r\n\r\n"))
	sink := recordPcap(t, b.Pcap(), Options{})
	if got := frames(sink.recs); strings.Join(got, "\n") != strings.Join(events, "\n") {
		t.Errorf("events after long silences: %d; want %d", len(got), len(events))
	}
	var exchanges int
	for _, r := range sink.recs {
		if _, ok := r.(*formats.Request); ok {
			exchanges++
		}
	}
	if exchanges != 1 {
		t.Errorf("%d exchanges; want 1", exchanges)
	}
}

func netipAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// tallySink counts records without keeping them.
type tallySink struct {
	frames, requests int
	anomalies        []formats.Anomaly
}

func (c *tallySink) Write(r formats.Record) error {
	switch r := r.(type) {
	case *formats.Frame:
		c.frames++
	case *formats.Request:
		c.requests++
	case *formats.Anomaly:
		c.anomalies = append(c.anomalies, *r)
	}
	return nil
}

// feed hands the packets of b to a new Recorder and closes it.
func feed(t *testing.T, b *pcaptest.Builder, opts Options) (*tallySink, Stats) {
	t.Helper()
	sink := &tallySink{}
	rec := NewRecorder(sink, opts)
	for _, p := range b.Packets {
		if err := rec.Packet(Packet{Time: p.Time.UnixNano(), LinkType: uint16(pcapfile.LinkEthernet), Data: pcaptest.Encode(p)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return sink, rec.Stats()
}

// addWatch adds one complete watch connection of n events to b.
func addWatch(b *pcaptest.Builder, client string, n int) { addWatchEnd(b, client, n, "fin") }

// addWatchEnd adds a watch connection of n events ended by FINs both ways
// ("fin"), a reset by the client ("rst"), or the server's FIN alone
// ("half").
func addWatchEnd(b *pcaptest.Builder, client string, n int, end string) {
	head, chunks, _ := watchBody(n)
	c := b.Conn(client, "127.0.0.1:8001", true)
	c.Send(pcaptest.ToServer, []byte(watchReq))
	c.Send(pcaptest.ToClient, []byte(head+strings.Join(chunks, "")+"0\r\n\r\n"))
	switch end {
	case "rst":
		c.RST(pcaptest.ToServer)
	case "half":
		c.FIN(pcaptest.ToClient)
	default:
		c.FIN(pcaptest.ToClient)
		c.FIN(pcaptest.ToServer)
	}
}

// TestSYNFlood: more half-open flows than the connection limit (a SYN
// flood, a port scan) before a real watch. The flows that never carried
// data make room, oldest first; the flood is reported once, with a count;
// the watch is recorded. A higher limit keeps them all.
func TestSYNFlood(t *testing.T) {
	const flood = DefaultMaxConns + 4000
	b := pcaptest.New()
	b.Step = time.Microsecond
	for i := range flood {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)}), uint16(1024+i%60000))
		b.Packets = append(b.Packets, pcaptest.Packet{Time: b.Now(), Src: src, Dst: netipAP("10.0.0.1:8001"), Seq: uint32(i), SYN: true})
		b.Advance(time.Microsecond)
	}
	addWatch(b, "127.0.0.1:40000", 5)
	for _, tt := range []struct {
		name    string
		max     int
		evicted int64
	}{
		{"default limit", 0, flood + 1 - DefaultMaxConns},
		{"raised limit", flood + 10, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink, st := feed(t, b, Options{MaxConns: tt.max})
			if sink.frames != 5 || sink.requests != 1 {
				t.Errorf("%d events in %d exchanges recorded; want 5 in 1", sink.frames, sink.requests)
			}
			if st.Evicted != tt.evicted {
				t.Errorf("Stats.Evicted = %d; want %d", st.Evicted, tt.evicted)
			}
			var limits []formats.Anomaly
			for _, a := range sink.anomalies {
				if a.Kind == formats.AnomalyLimit {
					limits = append(limits, a)
				}
			}
			switch {
			case tt.evicted == 0 && len(limits) != 0:
				t.Errorf("anomalies %+v; want none", limits)
			case tt.evicted > 0 && (len(limits) != 1 || limits[0].Bytes != tt.evicted ||
				!strings.Contains(limits[0].Message, fmt.Sprint(tt.evicted))):
				t.Errorf("anomalies %+v; want one counting %d flows", limits, tt.evicted)
			}
		})
	}
}

// TestConnSlots: a connection that ended frees its slot (many more
// sequential connections than the limit are all recorded); when every
// slot holds a connection that carried data, the one idle the longest
// makes room (reported), and what it sends later is still recorded.
func TestConnSlots(t *testing.T) {
	for _, end := range []string{"fin", "rst", "half"} {
		b := pcaptest.New()
		for i := range 200 {
			addWatchEnd(b, fmt.Sprintf("127.0.0.1:%d", 30000+i), 1, end)
			b.Advance(time.Second)
		}
		sink, _ := feed(t, b, Options{MaxConns: 4})
		if sink.frames != 200 || sink.requests != 200 {
			t.Errorf("sequential connections ended by %s: %d events in %d exchanges; want 200 in 200", end, sink.frames, sink.requests)
		}
		if end != "half" && len(sink.anomalies) != 0 {
			t.Errorf("sequential connections ended by %s: anomalies %v; want none", end, sink.anomalies)
		}
	}

	b := pcaptest.New()
	head, chunks, _ := watchBody(3)
	var open []*pcaptest.Conn
	for i := range 3 { // three watches stay open
		c := b.Conn(fmt.Sprintf("127.0.0.1:%d", 20000+i), "127.0.0.1:8001", true)
		c.Send(pcaptest.ToServer, []byte(watchReq))
		c.Send(pcaptest.ToClient, []byte(head+chunks[0]))
		open = append(open, c)
	}
	open[1].Send(pcaptest.ToClient, []byte(chunks[1])) // watch 0 is now idle the longest
	addWatch(b, "127.0.0.1:21000", 1)                  // no room: watch 0 makes it
	open[0].Send(pcaptest.ToClient, []byte(chunks[1]+chunks[2]+"0\r\n\r\n"))
	open[0].FIN(pcaptest.ToClient)
	open[0].FIN(pcaptest.ToServer)
	addWatch(b, "127.0.0.1:21001", 1)
	sink, _ := feed(t, b, Options{MaxConns: 3})
	// Watch 0's later events are recorded on a connection captured from
	// its middle (the first one after the cut may be taken for the middle
	// of an event; the next is not).
	if sink.frames < 3+1+1+1+1 {
		t.Errorf("%d events; want at least 7", sink.frames)
	}
	var limits []formats.Anomaly
	for _, a := range sink.anomalies {
		if a.Kind == formats.AnomalyLimit {
			limits = append(limits, a)
		}
	}
	if len(limits) == 0 || !strings.Contains(limits[len(limits)-1].Message, "idle the longest") {
		t.Errorf("the connection ended to make room was not reported: %v", sink.anomalies)
	}
}

// TestHeldDataTimes: after a segment that is never captured, the events
// behind it carry the times of their own packets — whether they wait out
// the reorder window, outlast it, or are pushed out by the buffer limit —
// and a segment that arrives late completes the events it joins, at its
// own time.
func TestHeldDataTimes(t *testing.T) {
	head, chunks, events := watchBody(40)
	for _, tt := range []struct {
		name string
		opts Options
		lost bool // segment 5 is never captured (else it comes after segment 9)
	}{
		{"lost, reorder window", Options{}, true},
		{"lost, buffer limit", Options{MaxBufferedPerConn: 1000}, true},
		{"late", Options{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := pcaptest.New()
			c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
			c.Send(pcaptest.ToServer, []byte(watchReq))
			c.Send(pcaptest.ToClient, []byte(head))
			segs := c.Segments(pcaptest.ToClient, []byte(strings.Join(chunks, "")+"0\r\n\r\n"))
			// One event per segment, 700 ms apart: 28 s of events.
			var pkts []pcaptest.Packet
			seq := segs[0].Seq
			for _, ch := range append(chunks, "0\r\n\r\n") {
				p := segs[0]
				p.Seq, p.Payload = seq, []byte(ch)
				seq += uint32(len(ch))
				pkts = append(pkts, p)
			}
			when := map[int]time.Time{} // event index → time of the packet that completes it
			for i, p := range pkts {
				b.Advance(700 * time.Millisecond)
				switch {
				case i == 5:
					continue // lost, or sent after 9
				case i == 9 && !tt.lost:
					c.Add(p)
					when[9] = b.Now().Add(-time.Microsecond)
					b.Advance(700 * time.Millisecond)
					c.Add(pkts[5])
					for j := 5; j <= 8; j++ {
						when[j] = b.Now().Add(-time.Microsecond) // completed by the late segment
					}
					when[9] = when[5]
					continue
				}
				c.Add(p)
				if i < len(events) {
					when[i] = b.Now().Add(-time.Microsecond)
				}
			}
			c.FIN(pcaptest.ToClient)
			c.FIN(pcaptest.ToServer)
			sink := recordPcap(t, b.Pcap(), tt.opts)
			got := 0
			for _, r := range sink.recs {
				f, ok := r.(*formats.Frame)
				if !ok {
					continue
				}
				got++
				i := slices.Index(events, string(f.Data))
				if i < 0 {
					t.Fatalf("event %.40q was not sent", f.Data)
				}
				if want := when[i].UnixNano(); f.Time != want {
					t.Errorf("event %d at %v; want %v (its packet's time)", i, time.Duration(f.Time-pcaptest.Start.UnixNano()), time.Duration(want-pcaptest.Start.UnixNano()))
				}
			}
			want := len(events)
			if tt.lost {
				want-- // the lost event
			}
			if got != want {
				t.Errorf("%d events; want %d", got, want)
			}
		})
	}
}

// TestLostResponseHead: a gap takes the head of a response on a keep-alive
// connection. If the rest of its body follows, it still answers its
// request (a watch keeps its later events); if the whole response was
// lost, the next response answers the next request, not the lost one's.
func TestLostResponseHead(t *testing.T) {
	head, chunks, events := watchBody(6)
	list := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"items\":[]}\n"
	const listReq = "GET /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n\r\n"
	for _, tt := range []struct {
		name     string
		lost     int    // bytes of the server's stream lost
		stream   string // what the server sends
		requests []string
		want     []string       // events recorded
		answered map[string]int // request → status of its response (-1: head lost, 0: none)
	}{{
		name:     "body follows",
		stream:   head + strings.Join(chunks, "") + "0\r\n\r\n",
		lost:     len(head) + len(chunks[0]) + 10,
		requests: []string{watchReq},
		want:     events[2:],
		answered: map[string]int{"GET /api/v1/namespaces/demo/configmaps?watch=true": -1},
	}, {
		name:     "whole response lost",
		stream:   list + head + strings.Join(chunks, "") + "0\r\n\r\n",
		lost:     len(list),
		requests: []string{listReq, watchReq},
		want:     events,
		answered: map[string]int{"GET /api/v1/namespaces/demo/configmaps?watch=true": 200, "GET /api/v1/namespaces/demo/configmaps": 0},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			b := pcaptest.New()
			c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
			for _, r := range tt.requests {
				c.Send(pcaptest.ToServer, []byte(r))
			}
			c.Segments(pcaptest.ToClient, []byte(tt.stream[:tt.lost])) // never captured
			c.MSS = 200
			c.Send(pcaptest.ToClient, []byte(tt.stream[tt.lost:]))
			c.FIN(pcaptest.ToClient)
			c.FIN(pcaptest.ToServer)
			sink := recordPcap(t, b.Pcap(), Options{KeepSecrets: true})
			if got := frames(sink.recs); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("events: got %d, want %d", len(got), len(tt.want))
			}
			reqs := map[int64]string{}
			status := map[string]int{}
			for _, r := range sink.recs {
				switch r := r.(type) {
				case *formats.Request:
					reqs[r.Exchange] = r.Method + " " + r.Target
					status[r.Method+" "+r.Target] = 0
				case *formats.Response:
					status[reqs[r.Exchange]] = r.Status
					if r.Midstream {
						status[reqs[r.Exchange]] = -1
					}
				}
			}
			for req, st := range tt.answered {
				if status[req] != st {
					t.Errorf("%s answered %d; want %d (responses %v)", req, status[req], st, status)
				}
			}
		})
	}
}
