package pcaptest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Tap forwards the TCP connections made to its address to an upstream
// server and keeps every byte of both directions, in order, with the time
// it passed: what a packet capture of the loopback traffic holds. Each
// read (at most 65,483 bytes, a loopback segment with segmentation
// offload) is one piece, sent as one segment by Pcap. Close it when done;
// it is safe for concurrent use.
type Tap struct {
	// Slow, while set, makes the server's bytes wait 50 ms before each
	// read, so that they pile up in the socket buffer and reads return
	// up to 64 KiB: a sender that writes faster than the capture's
	// segments go.
	Slow atomic.Bool

	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    []*tapConn
	wg       sync.WaitGroup
}

type tapConn struct {
	client, server string
	pieces         []tapPiece
	fins           int
}

type tapPiece struct {
	dir  int // ToServer, ToClient
	data []byte
	fin  bool // the sender of dir closed its side
	t    time.Time
}

// NewTap listens on a free port of 127.0.0.1 and forwards what it accepts
// to upstream (host:port).
func NewTap(upstream string) (*Tap, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tp := &Tap{ln: ln, upstream: upstream}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := &tapConn{client: c.RemoteAddr().String(), server: ln.Addr().String()}
			tp.mu.Lock()
			tp.conns = append(tp.conns, tc)
			tp.mu.Unlock()
			tp.wg.Add(1)
			go tp.serve(c, tc)
		}
	}()
	return tp, nil
}

// Addr is the address clients dial (host:port).
func (tp *Tap) Addr() string { return tp.ln.Addr().String() }

// Close stops accepting and waits until every forwarded connection has
// ended.
func (tp *Tap) Close() error {
	err := tp.ln.Close()
	tp.wg.Wait()
	return err
}

// Open returns how many connections have not been closed both ways yet.
func (tp *Tap) Open() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	n := 0
	for _, c := range tp.conns {
		if c.fins < 2 {
			n++
		}
	}
	return n
}

func (tp *Tap) serve(c net.Conn, tc *tapConn) {
	defer tp.wg.Done()
	defer c.Close()
	u, err := net.Dial("tcp", tp.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	copyDir := func(dst, src net.Conn, dir int, done chan<- struct{}) {
		defer close(done)
		buf := make([]byte, 65483)
		for {
			if dir == ToClient && tp.Slow.Load() {
				time.Sleep(50 * time.Millisecond)
			}
			n, err := src.Read(buf)
			tp.mu.Lock()
			if n > 0 {
				tc.pieces = append(tc.pieces, tapPiece{dir: dir, data: bytes.Clone(buf[:n]), t: time.Now()})
			}
			if err != nil {
				tc.pieces = append(tc.pieces, tapPiece{dir: dir, fin: true, t: time.Now()})
				tc.fins++
			}
			tp.mu.Unlock()
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if cw, ok := dst.(*net.TCPConn); ok {
					cw.CloseWrite()
				}
				return
			}
		}
	}
	d1, d2 := make(chan struct{}), make(chan struct{})
	go copyDir(u, c, ToServer, d1)
	go copyDir(c, u, ToClient, d2)
	<-d1
	<-d2
}

// TapCapture says how Tap.Pcap builds its capture. The zero value: every
// connection from its handshake, each piece a packet 50 µs after the one
// before.
type TapCapture struct {
	// Midstream: each connection is captured from its first byte
	// server→client on (its first request was sent before the capture
	// began); with Midbody, from the middle of that first piece (a
	// response body captured from its middle).
	Midstream, Midbody bool
	// Times: packets carry the times their bytes passed the tap.
	Times bool
}

// Pcap returns what the tap saw, as a capture (Ethernet; the addresses are
// the clients' and the tap's).
func (tp *Tap) Pcap(o TapCapture) []byte {
	b := New()
	if !o.Times {
		b.Step = 50 * time.Microsecond
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, tc := range tp.conns {
		c := b.Conn(tc.client, tc.server, !o.Midstream)
		started := !o.Midstream
		for _, p := range tc.pieces {
			if p.dir == ToClient && !started && !p.fin {
				started = true
				if o.Midbody {
					p.data = p.data[len(p.data)*2/3:]
				}
			}
			if !started {
				continue
			}
			if o.Times && p.t.After(b.Now()) {
				b.SetNow(p.t)
			}
			if p.fin {
				c.FIN(p.dir)
				continue
			}
			c.Send(p.dir, p.data)
		}
	}
	return b.Pcap()
}
