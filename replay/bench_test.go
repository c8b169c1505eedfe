package replay

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// lateness from (the server's own arrival time is a few µs later). A
	// replay with the world serves every watcher one timeline, the
	// world's, which starts at the first watch: its origin is then the
	// first arrival, whenever a watcher came.
	h := srv.Handler()
	var first atomic.Int64
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		if srv.world.Live() {
			now = first.Load()
		}
		w.Header().Set("X-Arrival", strconv.FormatInt(now, 10))
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
	profileOnSignal()
	fmt.Printf("URL http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes our stdin
	hs.Close()
	srv.Close()
	fmt.Printf("VmHWM %d\n", peakRSS("/proc/self/status"))
}

// profileOnSignal makes the process answer SIGUSR1 (runIdle sends it
// before and after its watchers connect): after a garbage collection, it
// prints "LIVE" and the bytes of heap spans and goroutine stacks in use
// to stdout, and writes a heap profile to the file
// WTRACE_LATENESS_HEAPPROFILE names, if set.
func profileOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			runtime.GC()
			runtime.GC() // and what the first one's finalizers and pools let go
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Printf("LIVE %d\n", ms.HeapInuse+ms.StackInuse)
			if p := os.Getenv("WTRACE_LATENESS_HEAPPROFILE"); p != "" {
				if f, err := os.Create(p); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
}

// BenchmarkLateness measures how late events reach many concurrent
// watchers at speed 1, for the replay server and for its floor
// (TestFloorServer: the same bytes written by the simplest loop, one
// writev per socket per due chunk), alternately in the same run: the
// server runs in a child process, and raw HTTP/1.1 clients here, all
// started at once, read a 12 s watch: the first 12 s of the basic-json
// watch (55 events, its original bursts of up to 10 in 100 ms and pauses
// of seconds), or a steady synthetic one (a 1 KiB event every 200 ms). An
// event's lateness is when its last byte arrived minus when it was due: the
// arrival of the request at the server plus the event's recorded offset
// from the response start. With the world (the default writes mode), whose
// one timeline starts at the first watch, it is the first request's
// arrival, for the floor too: every watcher is then due each event at the
// same moment. Reported per server: p50, p99 and max lateness over all
// events of all watchers, the peak RSS of the server, and its CPU time
// (getrusage user + system) per delivered event, the best of the rounds.
// The timeline=idle rounds open watches that stay open without events and
// report the server's memory per idle watcher: its resident set once every
// watcher has its response head, less the resident set before.
//
//	go test -run='^$' -bench=BenchmarkLateness -benchtime=1x ./replay/
//
// WTRACE_LATENESS_ROUNDS (default 1) is the number of rounds of each
// server per benchmark, alternating which goes first. With
// WTRACE_LATENESS_BEFORE set to a test binary of this package built from
// another version (go test -c), that binary's TestLatenessServer is
// measured too, as "before". With WTRACE_LATENESS_WRITES=recorded the
// server keeps no world (see Options.Writes), as replays did before it.
// WTRACE_LATENESS_WATCHERS (a comma-separated list) replaces the default
// counts, 1000 and 10000.
func BenchmarkLateness(b *testing.B) {
	limit, err := raiseFileLimit()
	if err != nil {
		b.Fatal(err)
	}
	servers := []latenessServer{{name: "wtrace", bin: os.Args[0], test: "TestLatenessServer", env: "WTRACE_LATENESS_SERVER"},
		{name: "floor", bin: os.Args[0], test: "TestFloorServer", env: "WTRACE_FLOOR_SERVER"}}
	if bin := os.Getenv("WTRACE_LATENESS_BEFORE"); bin != "" {
		servers = append(servers, latenessServer{name: "before", bin: bin, test: "TestLatenessServer", env: "WTRACE_LATENESS_SERVER"})
	}
	rounds := 1
	if v := os.Getenv("WTRACE_LATENESS_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("WTRACE_LATENESS_ROUNDS=%q: want a count ≥ 1", v)
		}
	}
	counts := []int{1000, 10000}
	if v := os.Getenv("WTRACE_LATENESS_WATCHERS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("WTRACE_LATENESS_WATCHERS=%q: want counts ≥ 1", v)
			}
			counts = append(counts, n)
		}
	}
	for _, tl := range []struct {
		name    string
		session func(*testing.B) (string, int64, []int64, []int64)
	}{{"basic-json", benchSession}, {"steady-5/s", steadySession}, {"idle", benchSession}} {
		b.Run("timeline="+tl.name, func(b *testing.B) {
			path, start, ends, times := tl.session(b)
			for _, watchers := range counts {
				b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
					if uint64(watchers)+64 > limit {
						b.Skipf("open file limit %d is too low for %d watchers", limit, watchers)
					}
					b.ReportAllocs()
					b.SetBytes(int64(watchers) * (ends[len(ends)-1] + 1))
					res := make([]latenessResult, len(servers))
					for i := 0; i < b.N; i++ {
						for r := 0; r < rounds; r++ {
							for k := range servers {
								k := (k + r + i) % len(servers) // alternate who goes first
								if tl.name == "idle" {
									res[k].add(runIdle(b, servers[k], path, watchers))
								} else {
									res[k].add(runLateness(b, servers[k], path, watchers, start, ends, times))
								}
							}
						}
					}
					for k, srv := range servers {
						res[k].report(b, srv.name, watchers, tl.name == "idle")
					}
					if tl.name != "idle" && res[0].cpuPerEvent > 0 && res[1].cpuPerEvent > 0 {
						b.ReportMetric(res[0].cpuPerEvent/res[1].cpuPerEvent, "wtrace/floor-cpu")
					}
					b.ReportMetric(float64(peakRSS("/proc/self/status"))/1024, "client-peak-RSS-MiB")
				})
			}
		})
	}
}

// latenessServer is a server process BenchmarkLateness measures: the test
// binary bin running test, given the session's path in env.
type latenessServer struct {
	name, bin, test, env string
}

// latenessResult gathers one server's rounds.
type latenessResult struct {
	all, settled []time.Duration
	rounds       []float64 // CPU µs per delivered event of each round
	cpuPerEvent  float64   // the best round's
	rss          int64     // peak, kB
	idle         []float64 // resident bytes per idle watcher, each round
	idleLive     []float64 // heap and stack bytes in use per idle watcher
	herd         []float64 // ms from the first dial to the last response head, each round
	writes       []float64 // write system calls per delivered event, each round
	reads        []float64 // read system calls per delivered event, each round
	wbytes       []float64 // bytes written per delivered event, each round
	accept       []float64 // idle: the server's CPU µs per watch, from its request to its wait, each round
}

func (r *latenessResult) add(o latenessResult) {
	r.all = append(r.all, o.all...)
	r.settled = append(r.settled, o.settled...)
	r.rounds = append(r.rounds, o.rounds...)
	r.idle = append(r.idle, o.idle...)
	r.idleLive = append(r.idleLive, o.idleLive...)
	r.herd = append(r.herd, o.herd...)
	r.writes = append(r.writes, o.writes...)
	r.reads = append(r.reads, o.reads...)
	r.wbytes = append(r.wbytes, o.wbytes...)
	r.accept = append(r.accept, o.accept...)
	r.rss = max(r.rss, o.rss)
}

func (r *latenessResult) report(b *testing.B, name string, watchers int, idle bool) {
	if idle {
		if len(r.idle) > 0 {
			best := r.idle[0]
			for _, v := range r.idle {
				best = min(best, v)
			}
			b.ReportMetric(best/1024, name+"-KiB/idle-watcher")
			b.Logf("%s, %d idle watchers: resident bytes per watcher, each round: %.0f", name, watchers, r.idle)
		}
		if len(r.idleLive) > 0 {
			best := r.idleLive[0]
			for _, v := range r.idleLive {
				best = min(best, v)
			}
			// After a garbage collection: what the watchers hold, without
			// the garbage of their connection herd.
			b.ReportMetric(best/1024, name+"-live-KiB/idle-watcher")
			b.ReportMetric(float64(r.rss)/1024, name+"-peak-RSS-MiB")
		}
		// What a connection herd costs: the server's CPU per watch from
		// its connection to its wait (the fewest of the rounds; the
		// clock ticks every 10 ms), and how long the herd lasted.
		if len(r.accept) > 0 {
			b.ReportMetric(slices.Min(r.accept), name+"-cpu-µs/watch")
			b.ReportMetric(slices.Max(r.herd), name+"-herd-ms")
		}
		return
	}
	pct := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return -1
		}
		return float64(ds[int(p*float64(len(ds)-1))]) / 1e6
	}
	sort.Slice(r.all, func(i, j int) bool { return r.all[i] < r.all[j] })
	sort.Slice(r.settled, func(i, j int) bool { return r.settled[i] < r.settled[j] })
	b.ReportMetric(pct(r.all, 0.50), name+"-p50-ms")
	b.ReportMetric(pct(r.all, 0.99), name+"-p99-ms")
	b.ReportMetric(pct(r.all, 1), name+"-max-ms")
	// Once every watcher is connected (the connection herd is over): the
	// steady state.
	b.ReportMetric(pct(r.settled, 0.99), name+"-settled-p99-ms")
	b.ReportMetric(float64(r.rss)/1024, name+"-peak-RSS-MiB")
	// How long the connection herd lasted: from the first dial to the
	// last response head (the longest round).
	if len(r.herd) > 0 {
		b.ReportMetric(slices.Max(r.herd), name+"-herd-ms")
	}
	// System calls per delivered event (the fewest of the rounds): a
	// write is the least an event costs; reads are the connections'.
	if len(r.writes) > 0 {
		b.ReportMetric(slices.Min(r.writes), name+"-writes/event")
		b.ReportMetric(slices.Min(r.reads), name+"-reads/event")
		b.ReportMetric(slices.Min(r.wbytes), name+"-B-written/event")
	}
	// The server's CPU time (user + system) per event delivered to one
	// watcher: what a burst costs, and so the floor under lateness when a
	// burst is due for every watcher at once. The best round, and the
	// spread of the rounds in the log.
	if len(r.rounds) > 0 {
		r.cpuPerEvent = r.rounds[0]
		for _, v := range r.rounds {
			r.cpuPerEvent = min(r.cpuPerEvent, v)
		}
		b.ReportMetric(r.cpuPerEvent, name+"-cpu-µs/event")
		b.Logf("%s, %d watchers: CPU µs per delivered event, each round: %.1f", name, watchers, r.rounds)
	}
}

var (
	traceMu    sync.Mutex
	traceLines []string
)
