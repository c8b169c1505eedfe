package replay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// benchCutoff is how much of the basic-json watch the lateness benchmark
// replays: its first 12 s, with the original spacing (bursts of events a
// few ms apart, pauses of seconds).
const benchCutoff = 12 * time.Second

// benchSession writes the first benchCutoff of basic-json's watch as a
// session of its own, and returns its path, the response start and the
// end offset and time of every event.
func benchSession(b *testing.B) (path string, start int64, ends, times []int64) {
	b.Helper()
	src := corpusSession(b, "basic-json")
	f := openSession(b, src)
	id := exchangeByTarget(b, f, "GET", "watch=true")
	info := f.Index().Exchanges[id]
	start = info.Response.Time
	path = filepath.Join(b.TempDir(), "bench.wt")
	file, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w.Write(&formats.Meta{Tool: "wtrace bench"})
	w.Write(&f.Index().Conns[info.Request.Conn].Conn)
	sc := f.ExchangeRecords(id)
	var last, end int64
	for {
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		switch r := r.(type) {
		case *formats.Frame:
			if r.Time-start > int64(benchCutoff) {
				continue
			}
			last, end = r.Time, r.Offset+int64(len(r.Pre)+len(r.Data))
			ends = append(ends, end)
			times = append(times, r.Time)
		case *formats.Chunk:
			if r.Time-start > int64(benchCutoff) {
				continue
			}
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				r.Time, r.Tail, r.Size = last+int64(500*time.Millisecond), []byte("\n"), end+1
			}
		}
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	w.Write(&formats.Summary{})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return path, start, ends, times
}

// steadySession writes a synthetic watch of 60 ConfigMap events of about
// 1 KiB, one every 200 ms (12 s), each in a chunk of its own.
func steadySession(b *testing.B) (path string, start int64, ends, times []int64) {
	b.Helper()
	const n, gap = 60, 200 * time.Millisecond
	pad := strings.Repeat("x", 900)
	x := synthExchange{target: "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205",
		header: jsonHeader(), events: frame.JSON, chunked: true, gap: gap, tail: []byte("\n")}
	start = t0 + int64(time.Millisecond)
	var off int64
	for j := 0; j < n; j++ {
		ev := fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"corpus-basic","resourceVersion":"%d"},"data":{"pad":"%s"}}}`, j%10, 300+j, pad)
		x.frames = append(x.frames, []byte(ev))
		if j > 0 {
			off++
		}
		off += int64(len(ev))
		ends = append(ends, off)
		times = append(times, start+int64(j+1)*int64(gap))
	}
	return writeSession(b, x), start, ends, times
}

// raiseFileLimit sets the soft limit on open files to the hard limit.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}

// peakRSS reads VmHWM (peak resident set size, kB) from a /proc status
// file.
func peakRSS(statusFile string) int64 {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// TestLatenessServer is the server process of BenchmarkLateness (a
// benchmark with 10,000 watchers needs more descriptors than one process
// may open for both ends). It runs only when the benchmark starts it.
func TestLatenessServer(t *testing.T) {
	path := os.Getenv("WTRACE_LATENESS_SERVER")
	if path == "" {
		t.Skip("run by BenchmarkLateness")
	}
	if _, err := raiseFileLimit(); err != nil {
		t.Fatal(err)
	}
	// WTRACE_LATENESS_WRITES picks the writes mode (the default, answer,
	// serves every event through a flow; recorded keeps no world).
	srv, err := Open(path, Options{Speed: 1, Writes: Writes(os.Getenv("WTRACE_LATENESS_WRITES"))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The wall-clock time each request arrived, for the client to measure
	// lateness from (the server's own arrival time is a few µs later).
	h := srv.Handler()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Arrival", strconv.FormatInt(time.Now().UnixNano(), 10))
		h.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
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
	fmt.Printf("URL http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes our stdin
	hs.Close()
	srv.Close()
	fmt.Printf("VmHWM %d\n", peakRSS("/proc/self/status"))
}

// BenchmarkLateness measures how late events reach many concurrent
// watchers at speed 1: the replay server runs in a child process, and raw
// HTTP/1.1 clients here, all started at once, read a 12 s watch: the first
// 12 s of the basic-json watch (55 events, its original bursts of up to 10
// in 100 ms and pauses of seconds), or a steady synthetic one (a 1 KiB event
// every 200 ms). An event's lateness is when its last byte
// arrived minus when it was due: the arrival of the response head plus the
// event's recorded offset from the response start. Reported: p50, p99 and
// max lateness over all events of all watchers, the peak RSS of both
// processes, and the server's CPU time per delivered event.
//
//	go test -run='^$' -bench=BenchmarkLateness -benchtime=1x ./replay/
//
// With WTRACE_LATENESS_WRITES=recorded the server keeps no world (see
// Options.Writes), as replays did before it.
func BenchmarkLateness(b *testing.B) {
	limit, err := raiseFileLimit()
	if err != nil {
		b.Fatal(err)
	}
	for _, tl := range []struct {
		name    string
		session func(*testing.B) (string, int64, []int64, []int64)
	}{{"basic-json", benchSession}, {"steady-5/s", steadySession}} {
		b.Run("timeline="+tl.name, func(b *testing.B) {
			path, start, ends, times := tl.session(b)
			for _, watchers := range []int{1000, 10000} {
				b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
					if uint64(watchers)+64 > limit {
						b.Skipf("open file limit %d is too low for %d watchers", limit, watchers)
					}
					b.ReportAllocs()
					b.SetBytes(int64(watchers) * (ends[len(ends)-1] + 1))
					var all, settled []time.Duration
					var serverRSS int64
					var serverCPU time.Duration
					for i := 0; i < b.N; i++ {
						late, calm, rss, cpu := runLateness(b, path, watchers, start, ends, times)
						all = append(all, late...)
						settled = append(settled, calm...)
						serverRSS = max(serverRSS, rss)
						serverCPU += cpu
					}
					pct := func(ds []time.Duration, p float64) float64 {
						if len(ds) == 0 {
							return -1
						}
						return float64(ds[int(p*float64(len(ds)-1))]) / 1e6
					}
					sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
					sort.Slice(settled, func(i, j int) bool { return settled[i] < settled[j] })
					b.ReportMetric(pct(all, 0.50), "p50-ms")
					b.ReportMetric(pct(all, 0.99), "p99-ms")
					b.ReportMetric(pct(all, 1), "max-ms")
					// Once every watcher is connected (the connection herd is
					// over): the steady state.
					b.ReportMetric(pct(settled, 0.99), "settled-p99-ms")
					b.ReportMetric(pct(settled, 1), "settled-max-ms")
					b.ReportMetric(float64(serverRSS)/1024, "server-peak-RSS-MiB")
					// The server's CPU time (user + system) per event delivered
					// to one watcher: what a burst costs, and so the floor under
					// lateness when a burst is due for every watcher at once.
					if len(all) > 0 {
						b.ReportMetric(float64(serverCPU.Microseconds())/float64(len(all)), "server-cpu-µs/event")
					}
					b.ReportMetric(float64(peakRSS("/proc/self/status"))/1024, "client-peak-RSS-MiB")
				})
			}
		})
	}
}

var (
	traceMu    sync.Mutex
	traceLines []string
)

// runLateness starts a server process and watchers clients, and returns
// the lateness of every event every client received, that of the events
// due once every client was connected, and the server's peak RSS (kB).
func runLateness(b *testing.B, path string, watchers int, start int64, ends, times []int64) (all, settled []time.Duration, rss int64, cpu time.Duration) {
	b.StopTimer()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLatenessServer$", "-test.v")
	cmd.Env = append(os.Environ(), "WTRACE_LATENESS_SERVER="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	var url string
	for out.Scan() {
		if u, ok := strings.CutPrefix(out.Text(), "URL "); ok {
			url = u
			break
		}
	}
	if url == "" {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatal("the server process did not start")
	}
	addr := strings.TrimPrefix(url, "http://")
	runtime.GC()
	b.StartTimer()

	const target = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"
	req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr))
	late := make([][]time.Duration, watchers)
	dues := make([][]time.Time, watchers)
	arrivals := make([]time.Time, watchers)
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
			arrivals[w] = arrival
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
		os.WriteFile(p, []byte(strings.Join(traceLines, "\n")), 0o644)
		traceLines = nil
	}
	stdin.Close()
	for out.Scan() {
		if v, ok := strings.CutPrefix(out.Text(), "VmHWM "); ok {
			rss, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	cmd.Wait()
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var connected time.Time
	for _, a := range arrivals {
		if a.After(connected) {
			connected = a
		}
	}
	for w, ls := range late {
		all = append(all, ls...)
		for i, d := range dues[w] {
			if d.After(connected) {
				settled = append(settled, ls[i])
			}
		}
	}
	b.StartTimer()
	return all, settled, rss, cpu
}
