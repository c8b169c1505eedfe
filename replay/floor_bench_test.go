package replay

import (
	"bufio"
	"bytes"
	"container/heap"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay/internal/tape"
)

// idleTarget is the watch the idle rounds of BenchmarkLateness open: from
// a resourceVersion past everything the session holds, so the replay
// answers an empty watch that stays open (and the floor only its head).
const idleTarget = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=999999999"

// TestFloorServer is the floor of BenchmarkLateness: the bytes the replay
// server sends for the benchmark's watch — its head and its recorded
// chunks, each framed as an HTTP/1.1 chunk — written by the simplest
// possible loop. One goroutine accepts connections and reads each request
// whole; one goroutine keeps the watchers in a heap by the time their next
// chunk is due, sleeps until the earliest, and writes each due chunk with
// one writev (net.Buffers.WriteTo: size line, data, CRLF) per socket. It
// runs only when the benchmark starts it.
func TestFloorServer(t *testing.T) {
	path := os.Getenv("WTRACE_FLOOR_SERVER")
	if path == "" {
		t.Skip("run by BenchmarkLateness")
	}
	if _, err := raiseFileLimit(); err != nil {
		t.Fatal(err)
	}
	// The session's watch as the replay serves it: its head and its writes
	// (the recorded chunks) with their times.
	srv, err := Open(path, Options{Writes: WritesRecorded})
	if err != nil {
		t.Fatal(err)
	}
	var x *tape.Exchange
	for _, r := range srv.tape.Exchanges() {
		if r.Format != 0 {
			x = r
		}
	}
	if x == nil {
		t.Fatal("the session holds no watch")
	}
	head := srv.tape.Head(x).Raw()
	src, err := srv.tape.Source(x)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []floorChunk
	for {
		w, ok, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if len(w.Data) > 0 {
			chunks = append(chunks, floorChunk{due: time.Duration(w.At - x.RespTime()), size: []byte(strconv.FormatInt(int64(len(w.Data)), 16) + "\r\n"), data: w.Data})
		}
	}
	srv.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A replay that answers writes serves every watcher the world's one
	// timeline, from the first request (see TestLatenessServer): so does
	// the floor then, and every watcher's chunk is due at the same moment.
	oneTimeline := Writes(os.Getenv("WTRACE_LATENESS_WRITES")).AnswersWrites()
	var first time.Time
	add := make(chan *floorWatcher, 1024)
	var idles []net.Conn // kept open (a lost net.Conn is closed by its finalizer)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(add)
				return
			}
			// The request line and header fields, whole (the clients
			// send them at once).
			br := bufio.NewReaderSize(c, 1024)
			idle := false
			for {
				l, err := br.ReadSlice('\n')
				if err != nil {
					c.Close()
					break
				}
				if bytes.HasPrefix(l, []byte("GET ")) && bytes.Contains(l, []byte(idleTarget)) {
					idle = true
				}
				if len(l) <= 2 {
					arrival := time.Now()
					if first.IsZero() {
						first = arrival
					}
					if oneTimeline {
						arrival = first
					}
					hd := make([]byte, 0, len(head)+128)
					hd = append(hd, head...)
					hd = append(hd, "X-Arrival: "...)
					hd = strconv.AppendInt(hd, arrival.UnixNano(), 10)
					hd = append(hd, "\r\nDate: "...)
					hd = arrival.UTC().AppendFormat(hd, "Mon, 02 Jan 2006 15:04:05 GMT")
					hd = append(hd, "\r\n\r\n"...)
					if _, err := c.Write(hd); err != nil {
						c.Close()
						break
					}
					if idle {
						idles = append(idles, c) // an idle watcher: its connection stays open
						break
					}
					add <- &floorWatcher{c: c.(*net.TCPConn), arrival: arrival, due: arrival.Add(chunks[0].due)}
					break
				}
			}
		}
	}()
	go floorLoop(chunks, add)
	if p := os.Getenv("WTRACE_LATENESS_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	profileOnSignal()
	fmt.Printf("URL http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes our stdin
	ln.Close()
	fmt.Printf("VmHWM %d\n", peakRSS("/proc/self/status"))
}

// floorChunk is one chunk of the floor's watch: due after the response
// head, its size line and data.
type floorChunk struct {
	due  time.Duration
	size []byte
	data []byte
}

// floorWatcher is one watcher of the floor: its connection, and its next
// chunk, due at due.
type floorWatcher struct {
	c       *net.TCPConn
	arrival time.Time
	next    int
	due     time.Time
}

type floorHeap []*floorWatcher

func (h floorHeap) Len() int           { return len(h) }
func (h floorHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h floorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floorHeap) Push(x any)        { *h = append(*h, x.(*floorWatcher)) }
func (h *floorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// floorLoop writes every watcher's chunks when they are due, one writev
// each, and closes a watcher's connection after its last chunk.
func floorLoop(chunks []floorChunk, add <-chan *floorWatcher) {
	var h floorHeap
	timer := time.NewTimer(time.Hour)
	var bufs net.Buffers
	for {
		now := time.Now()
		for len(h) > 0 && !h[0].due.After(now) {
			w := h[0]
			ch := &chunks[w.next]
			bufs = append(bufs[:0], ch.size, ch.data, []byte("\r\n"))
			if _, err := bufs.WriteTo(w.c); err != nil || w.next+1 == len(chunks) {
				w.c.Close()
				heap.Pop(&h)
				continue
			}
			w.next++
			w.due = w.arrival.Add(chunks[w.next].due)
			heap.Fix(&h, 0)
		}
		wait := time.Hour
		if len(h) > 0 {
			wait = h[0].due.Sub(now)
		}
		timer.Reset(wait)
		select {
		case w, ok := <-add:
			if !ok {
				return
			}
			heap.Push(&h, w)
		case <-timer.C:
		}
	}
}
