package pace

import (
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testStream is a Stream over one end of a loopback TCP connection; what
// the scheduler does with it goes to events.
type testStream struct {
	name   string
	slot   Slot
	due    time.Time
	conn   *net.TCPConn
	raw    syscall.RawConn
	again  []time.Time // Fire returns true with Due set to each in turn
	events chan<- string
}

func (s *testStream) Slot() *Slot           { return &s.slot }
func (s *testStream) Due() time.Time        { return s.due }
func (s *testStream) Conn() syscall.RawConn { return s.raw }
func (s *testStream) Fire() bool {
	s.events <- "fire " + s.name
	if len(s.again) > 0 {
		s.due, s.again = s.again[0], s.again[1:]
		return true
	}
	return false
}
func (s *testStream) End(left bool) {
	if left {
		s.events <- "left " + s.name
		return
	}
	s.events <- "end " + s.name
}

// tcpPair returns the two ends of a loopback TCP connection, closed with
// the test.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err == nil {
			server = c.(*net.TCPConn)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); c.Close() })
	return server, c.(*net.TCPConn)
}

func newTestStream(t *testing.T, name string, due time.Time, events chan<- string) (*testStream, *net.TCPConn) {
	t.Helper()
	srv, cli := tcpPair(t)
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return &testStream{name: name, due: due, conn: srv, raw: rc, events: events}, cli
}

func next(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the scheduler in 30 s")
		return ""
	}
}

// TestSchedulerOrder: parked streams fire in the order they fall due, not
// the order they parked; a stream that waits again fires again at its new
// time; Stop ends the streams still parked (a never-due one among them),
// and a Push after Stop is refused.
func TestSchedulerOrder(t *testing.T) {
	if !Supported {
		t.Skip("no scheduler on this platform")
	}
	events := make(chan string, 16)
	sc := New()
	// Due well after the pushes, so that all are parked before the first
	// is due (the order asserted is the due times', never a duration).
	base := time.Now().Add(300 * time.Millisecond)
	c, _ := newTestStream(t, "c", base.Add(20*time.Millisecond), events)
	a, _ := newTestStream(t, "a", base, events)
	b, _ := newTestStream(t, "b", base.Add(10*time.Millisecond), events)
	a.again = []time.Time{base.Add(30 * time.Millisecond)}
	never, _ := newTestStream(t, "never", time.Time{}, events)
	for _, s := range []*testStream{c, never, b, a} {
		if !sc.Push(s) {
			t.Fatalf("Push(%s) = false before Stop", s.name)
		}
	}
	var got []string
	for range 4 {
		got = append(got, next(t, events))
	}
	want := []string{"fire a", "fire b", "fire c", "fire a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events = %q; want %q", got, want)
		}
	}
	if n := sc.Len(); n != 1 {
		t.Errorf("Len() = %d after the due streams fired; want 1 (the never-due one)", n)
	}
	sc.Stop()
	if e := next(t, events); e != "end never" {
		t.Errorf("Stop: %q; want end never", e)
	}
	if sc.Push(a) {
		t.Error("Push after Stop = true; want false")
	}
}

// TestSchedulerSweep: a parked stream whose client closes its connection
// is ended (End(true)) by a sweep; one whose client stays is not.
func TestSchedulerSweep(t *testing.T) {
	if !Supported {
		t.Skip("no scheduler on this platform")
	}
	events := make(chan string, 4)
	sc := New()
	defer sc.Stop()
	gone, gcli := newTestStream(t, "gone", time.Time{}, events)
	stay, _ := newTestStream(t, "stay", time.Time{}, events)
	sc.Push(stay)
	sc.Push(gone)
	gcli.Close()
	if e := next(t, events); e != "left gone" {
		t.Fatalf("after the client left: %q; want left gone", e)
	}
	if n := sc.Len(); n != 1 {
		t.Errorf("Len() = %d; want 1 (the stream whose client stays)", n)
	}
}

// TestSchedulerWake: Wake fires a parked stream that waits for no time
// at once, and moves one due later to now; a Wake that comes while the
// stream is not parked (between its owner's last look and its Push) is
// kept: the stream fires as soon as it is pushed, and once only.
func TestSchedulerWake(t *testing.T) {
	if !Supported {
		t.Skip("no scheduler on this platform")
	}
	events := make(chan string, 8)
	sc := New()
	defer sc.Stop()
	never, _ := newTestStream(t, "never", time.Time{}, events)
	later, _ := newTestStream(t, "later", time.Now().Add(time.Hour), events)
	sc.Push(never)
	sc.Push(later)
	sc.Wake([]Stream{later, never})
	got := map[string]bool{next(t, events): true, next(t, events): true}
	if !got["fire never"] || !got["fire later"] {
		t.Fatalf("after Wake: %v; want both fired", got)
	}
	early, _ := newTestStream(t, "early", time.Time{}, events)
	sc.Wake([]Stream{early}) // not parked yet
	sc.Push(early)
	if e := next(t, events); e != "fire early" {
		t.Fatalf("Push after Wake: %q; want fire early", e)
	}
	early.due = time.Time{}
	sc.Push(early) // the Wake was used up: parked for good now
	select {
	case e := <-events:
		t.Fatalf("a second Push fired again: %q", e)
	case <-time.After(50 * time.Millisecond):
	}
	if n := sc.Len(); n != 1 {
		t.Errorf("Len() = %d; want 1", n)
	}
}

// TestWritev: Writev writes every buffer, in order, in one call.
func TestWritev(t *testing.T) {
	if !Supported {
		t.Skip("no scheduler on this platform")
	}
	srv, cli := tcpPair(t)
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sc := New()
	bufs := [][]byte{[]byte("3\r\nabc\r\n"), nil, []byte("0\r\n\r\n")}
	n, err := sc.Writev(rc, bufs)
	if err != nil || n != 13 {
		t.Fatalf("Writev = %d, %v; want 13, nil", n, err)
	}
	srv.Close()
	got, err := io.ReadAll(cli)
	if err != nil || string(got) != "3\r\nabc\r\n0\r\n\r\n" {
		t.Errorf("read %q, %v; want the buffers in order", got, err)
	}
}

// BenchmarkSchedulerPark measures parking and firing one stream due at
// once: the heap's push and pop, no allocation.
func BenchmarkSchedulerPark(b *testing.B) {
	h := streamHeap{}
	sts := make([]*testStream, 1024)
	for i := range sts {
		sts[i] = &testStream{due: time.Unix(0, int64(i*7919%1024))}
		h.push(entry{due: sts[i].due.UnixNano(), sl: &sts[i].slot, st: sts[i]})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := h.remove(0)
		e.due += int64(1024 + i)
		h.push(e)
	}
}
