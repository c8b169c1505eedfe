package replay

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runIdle starts a server process, opens watchers watches that stay open
// without events (idleTarget), and returns the server's resident memory
// per watcher once all have their response head: VmRSS then, less VmRSS
// before the first connection, over watchers.
func runIdle(b *testing.B, srv latenessServer, path string, watchers int) latenessResult {
	b.StopTimer()
	cmd, addr, stdin, out := startServer(b, srv, path)
	time.Sleep(200 * time.Millisecond) // the server settled after start-up
	cmd.Process.Signal(syscall.SIGUSR1)
	time.Sleep(300 * time.Millisecond)
	before := residentKiB(cmd.Process.Pid)
	cpu0 := cpuTime(cmd.Process.Pid)
	herdStart := time.Now()
	b.StartTimer()
	req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", idleTarget, addr))
	conns := make([]net.Conn, watchers)
	errs := make(chan error, watchers)
	sem := make(chan struct{}, 256) // keep within the listen backlog
	var wg sync.WaitGroup
	for w := 0; w < watchers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err == nil {
				_, err = c.Write(req)
			}
			if err != nil {
				errs <- err
				return
			}
			conns[w] = c
			br := bufio.NewReaderSize(c, 1024)
			for {
				l, err := br.ReadSlice('\n')
				if err != nil {
					errs <- fmt.Errorf("head: %w", err)
					return
				}
				if len(l) == 2 {
					return
				}
			}
		}(w)
	}
	wg.Wait()
	herd := time.Since(herdStart)
	b.StopTimer()
	time.Sleep(500 * time.Millisecond) // the server's handlers reached their wait
	after := residentKiB(cmd.Process.Pid)
	accept := cpuTime(cmd.Process.Pid) - cpu0
	cmd.Process.Signal(syscall.SIGUSR1)
	time.Sleep(time.Second)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	rss, _, live := stopServer(cmd, stdin, out)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.StartTimer()
	res := latenessResult{rss: rss, idle: []float64{float64(after-before) * 1024 / float64(watchers)},
		herd: []float64{float64(herd) / 1e6}, accept: []float64{float64(accept.Microseconds()) / float64(watchers)}}
	if len(live) == 2 {
		res.idleLive = []float64{float64(live[1]-live[0]) / float64(watchers)}
	}
	return res
}

// runLateness starts srv's process, and watchers clients, and returns
// the lateness of every event every client received, that of the events
// due once every client was connected, the server's peak RSS (kB) and its
// CPU time per delivered event.
func runLateness(b *testing.B, srv latenessServer, path string, watchers int, start int64, ends, times []int64) latenessResult {
	b.StopTimer()
	cmd, addr, stdin, out := startServer(b, srv, path)
	runtime.GC()
	// The server's CPU time from here to when the last client is done:
	// serving, not starting and stopping.
	cpu0 := cpuTime(cmd.Process.Pid)
	w0, r0, wb0 := syscalls(cmd.Process.Pid)
	b.StartTimer()

	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	herdStart := time.Now()
	req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr))
	late := make([][]time.Duration, watchers)
	dues := make([][]time.Time, watchers)
	// When each watcher had its response head: the herd of connections is
	// over once the last has (the settled lateness counts the events due
	// after). Not X-Arrival, which with the world is the first request's.
	connected := make([]time.Time, watchers)
	errs := make(chan error, watchers)
	sem := make(chan struct{}, 256) // keep within the listen backlog
	var wg sync.WaitGroup
	for w := 0; w < watchers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sem <- struct{}{}
			c, err := net.Dial("tcp", addr)
			if err == nil {
				_, err = c.Write(req)
			}
			if err != nil {
				<-sem
				errs <- err
				return
			}
			defer c.Close()
			br := bufio.NewReaderSize(c, 8<<10)
			// Response head, with the request's arrival at the server: the
			// origin of the timeline.
			var arrival time.Time
			for {
				l, err := br.ReadSlice('\n')
				if err != nil {
					<-sem
					errs <- fmt.Errorf("head: %w", err)
					return
				}
				if len(l) == 2 {
					break
				}
				if v, ok := strings.CutPrefix(string(l), "X-Arrival: "); ok {
					ns, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					arrival = time.Unix(0, ns)
				}
			}
			<-sem
			connected[w] = time.Now()
			ls := make([]time.Duration, 0, len(ends))
			ds := make([]time.Time, 0, len(ends))
			var got int64
			next := 0
			for next < len(ends) {
				l, err := br.ReadSlice('\n')
				if err != nil {
					errs <- fmt.Errorf("chunk: %w", err)
					return
				}
				n, err := strconv.ParseInt(strings.TrimSpace(string(l)), 16, 64)
				if err != nil || n == 0 {
					errs <- fmt.Errorf("chunk size %q after %d events", l, next)
					return
				}
				if _, err := br.Discard(int(n) + 2); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				got += n
				for next < len(ends) && got >= ends[next] {
					due := arrival.Add(time.Duration(times[next] - start))
					ls = append(ls, now.Sub(due))
					ds = append(ds, due)
					if os.Getenv("WTRACE_LATENESS_TRACE") != "" {
						traceMu.Lock()
						traceLines = append(traceLines, fmt.Sprintf("%d %d %d", due.UnixNano(), now.Sub(due), w))
						traceMu.Unlock()
					}
					next++
				}
			}
			late[w], dues[w] = ls, ds
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	if p := os.Getenv("WTRACE_LATENESS_TRACE"); p != "" {
		os.WriteFile(p+"."+srv.name, []byte(strings.Join(traceLines, "\n")), 0o644)
		traceLines = nil
	}
	cpu := cpuTime(cmd.Process.Pid) - cpu0
	w1, r1, wb1 := syscalls(cmd.Process.Pid)
	rss, _, _ := stopServer(cmd, stdin, out)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var all, settled []time.Duration
	var herdEnd time.Time
	for _, a := range connected {
		if a.After(herdEnd) {
			herdEnd = a
		}
	}
	for w, ls := range late {
		all = append(all, ls...)
		for i, d := range dues[w] {
			if d.After(herdEnd) {
				settled = append(settled, ls[i])
			}
		}
	}
	b.StartTimer()
	var res latenessResult
	res.all, res.settled, res.rss = all, settled, rss
	res.herd = []float64{float64(herdEnd.Sub(herdStart)) / 1e6}
	if len(all) > 0 {
		res.rounds = []float64{float64(cpu.Microseconds()) / float64(len(all))}
		res.writes = []float64{float64(w1-w0) / float64(len(all))}
		res.reads = []float64{float64(r1-r0) / float64(len(all))}
		res.wbytes = []float64{float64(wb1-wb0) / float64(len(all))}
	}
	return res
}
