package stream

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestSendAllocs pins the write path of a taken-over connection: sending a
// batch of chunks allocates nothing.
func TestSendAllocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := &Stream{hub: &Hub{writeTimeout: time.Minute}, ctx: context.Background(), own: &ownConn{conn: c, tcp: c.(*net.TCPConn)}}
	batch := [][]byte{bytes.Repeat([]byte("a"), 1200), bytes.Repeat([]byte("b"), 700), []byte("\n")}
	st.ownSend(batch) // warm up the reused buffers
	if n := testing.AllocsPerRun(200, func() {
		if !st.ownSend(batch) {
			t.Fatal(st.stopped)
		}
	}); n != 0 {
		t.Errorf("ownSend allocates %v times per batch; want 0", n)
	}
}
