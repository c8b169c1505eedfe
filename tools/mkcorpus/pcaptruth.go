package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// The truth of clients that cannot be instrumented (kubectl) comes from the
// capture itself, read with other code than wtrace's: TCP reassembled here
// (loopback loses nothing; a hole is an error), HTTP/1.1 parsed by
// net/http, watch bodies split by apimachinery's framers.

type segment struct {
	seq  uint32
	data []byte
}

type half struct {
	isn    uint32
	hasSYN bool
	segs   []segment
}

type tcpConn struct {
	client, server string
	first          int
	c2s, s2c       *half
}

// stream reassembles one direction: segments in sequence order,
// retransmitted bytes dropped.
func (h *half) stream() ([]byte, error) {
	if !h.hasSYN {
		return nil, fmt.Errorf("direction without SYN")
	}
	sort.SliceStable(h.segs, func(i, j int) bool { return h.segs[i].seq-h.isn < h.segs[j].seq-h.isn })
	var out []byte
	next := uint32(1) // relative: the SYN takes one
	for _, s := range h.segs {
		rel := s.seq - h.isn
		end := rel + uint32(len(s.data))
		switch {
		case end <= next:
			continue // retransmission
		case rel > next:
			return out, fmt.Errorf("hole of %d bytes at relative sequence %d", rel-next, next)
		}
		out = append(out, s.data[next-rel:]...)
		next = end
	}
	return out, nil
}

// pcapTruth reads the capture, parses the HTTP/1.1 exchanges of every
// connection, and adds the events of every watch response (status 200,
// watch=true) to r, as if client received them.
func pcapTruth(path, client string, r *recorder) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		return err
	}
	conns := map[string]*tcpConn{}
	var order []*tcpConn
	for n := 0; ; n++ {
		data, _, err := pr.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		pkt := gopacket.NewPacket(data, pr.LinkType(), gopacket.Default)
		ip4, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip4 == nil || tcp == nil {
			continue
		}
		src := fmt.Sprintf("%s:%d", ip4.SrcIP, tcp.SrcPort)
		dst := fmt.Sprintf("%s:%d", ip4.DstIP, tcp.DstPort)
		c := conns[src+">"+dst]
		if c == nil {
			c = conns[dst+">"+src]
		}
		if c == nil {
			if !tcp.SYN || tcp.ACK {
				continue // a connection that began before the capture
			}
			c = &tcpConn{client: src, server: dst, first: n, c2s: &half{}, s2c: &half{}}
			conns[src+">"+dst] = c
			order = append(order, c)
		}
		h := c.c2s
		if src == c.server {
			h = c.s2c
		}
		if tcp.SYN {
			h.isn, h.hasSYN = tcp.Seq, true
		}
		if len(tcp.Payload) > 0 {
			h.segs = append(h.segs, segment{tcp.Seq, append([]byte(nil), tcp.Payload...)})
		}
	}
	for _, c := range order {
		reqs, err := c.c2s.stream()
		if err != nil {
			return fmt.Errorf("%s->%s requests: %w", c.client, c.server, err)
		}
		resps, err := c.s2c.stream()
		if err != nil {
			return fmt.Errorf("%s->%s responses: %w", c.client, c.server, err)
		}
		qr, sr := bufio.NewReader(bytes.NewReader(reqs)), bufio.NewReader(bytes.NewReader(resps))
		for {
			req, err := http.ReadRequest(qr)
			if err != nil {
				break
			}
			drain(req.Body)
			rl := r.newReq(client, req)
			rl.Conn, rl.Server = c.client, c.server
			resp, err := http.ReadResponse(sr, req)
			if err != nil {
				rl.EndReason = "no response in the capture"
				break
			}
			rl.Status, rl.Proto = resp.StatusCode, resp.Proto
			rl.RespHeaders = map[string]string{}
			for k, v := range resp.Header {
				rl.RespHeaders[k] = strings.Join(v, ", ")
			}
			body, err := io.ReadAll(resp.Body)
			rl.BodyBytes = int64(len(body))
			rl.EndReason = "eof"
			if err != nil {
				rl.EndReason = "cut: " + err.Error()
			}
			if enc := encodingOf(resp.Header.Get("Content-Type")); rl.Watch && resp.StatusCode == 200 && enc != "" {
				splitEvents(enc, bytes.NewReader(body), func(data []byte, start, end int64) {
					ev := &truthEvent{ReqID: rl.ID, Client: client, Conn: rl.Conn, Server: rl.Server, Proto: rl.Proto,
						Request: rl.Request, Encoding: enc, Index: rl.Events, BodyOffset: start, BodyEnd: end}
					rl.Events++
					describe(ev, enc, data)
					r.add(ev)
				})
			}
			if err != nil {
				break
			}
		}
	}
	return nil
}
