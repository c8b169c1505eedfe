package diff

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// benchSession writes a session of one LIST and one watch of n events
// (ConfigMaps of about 1.2 KB, like the basic-json capture's, 500 objects
// added, modified, deleted in turn), event i at i ms. rvBase numbers
// resourceVersions, uids and timestamps: sessions with another rvBase
// differ in the bytes of every event, not after normalization. It
// returns the events' total size.
func benchSession(b *testing.B, path string, n, rvBase int) int64 {
	b.Helper()
	file, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	must := func(r formats.Record) {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	must(&formats.Meta{Tool: "wtrace bench"})
	must(&formats.Conn{ID: 0, Time: t0, Client: "127.0.0.1:50000", Server: "127.0.0.1:8001", Proto: "http/1.1"})
	must(&formats.Request{Exchange: 0, Time: t0, Method: "GET", Target: cmPath, Proto: "HTTP/1.1"})
	must(&formats.Response{Exchange: 0, Time: t0, Status: 200, Header: []formats.Header{{Name: "Content-Type", Value: "application/json"}}})
	must(&formats.Body{Exchange: 0, Dir: formats.ServerToClient, Time: t0, Data: []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"` + fmt.Sprint(rvBase) + `"},"items":[]}`)})
	must(&formats.End{Exchange: 0, Dir: formats.ServerToClient, Time: t0})
	must(&formats.Request{Exchange: 1, Time: t0, Method: "GET", Target: watchTarget, Proto: "HTTP/1.1"})
	must(&formats.Response{Exchange: 1, Time: t0, Status: 200, Events: frame.JSON, Header: []formats.Header{{Name: "Content-Type", Value: "application/json"}}})
	payload := strings.Repeat("x", 700)
	var total, off int64
	for i := 0; i < n; i++ {
		typ := [...]string{"ADDED", "MODIFIED", "MODIFIED", "DELETED"}[(i/500)%4]
		o := obj{name: fmt.Sprintf("cm-%04d", i%500), ns: "demo", rv: rvBase + i,
			data: map[string]string{"payload": payload, "i": fmt.Sprint(i / 500)}, labels: map[string]string{"app": "bench"}}
		data := ev(typ, o)
		total += int64(len(data))
		must(&formats.Frame{Exchange: 1, Seq: int64(i), Time: t0 + int64(i)*int64(time.Millisecond), Offset: off, Pre: []byte("\n"), Data: data})
		off += int64(len(data) + 1)
	}
	must(&formats.End{Exchange: 1, Dir: formats.ServerToClient, Time: t0 + int64(n)*int64(time.Millisecond), Size: off})
	must(&formats.Summary{Events: int64(n)})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkSessions diffs two sessions of n events: identical ones
// (every event equal byte for byte) and renumbered ones (every event's
// resourceVersion, uid and timestamps differ, so every pair is compared
// normalized). SetBytes counts the events of both sessions. peak-heap-MB
// is the largest heap in use while diffing (sampled every millisecond);
// peak-RSS-MB the process's (generating the sessions included).
// With $WTRACE_DIFF_BENCH_KEEP naming a directory, the sessions are
// written there and kept (<kind>-<n>k-a.wt, -b.wt), for timing
// `wtrace diff` on them. $WTRACE_DIFF_BENCH_1M adds sessions of a
// million events (the memory held must not grow with them).
func BenchmarkSessions(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("WTRACE_DIFF_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		for _, kind := range []string{"identical", "renumbered"} {
			b.Run(fmt.Sprintf("%s/%dk", kind, n/1000), func(b *testing.B) {
				dir, prefix := b.TempDir(), ""
				if keep := os.Getenv("WTRACE_DIFF_BENCH_KEEP"); keep != "" {
					dir, prefix = keep, fmt.Sprintf("%s-%dk-", kind, n/1000)
				}
				pa, pb := filepath.Join(dir, prefix+"a.wt"), filepath.Join(dir, prefix+"b.wt")
				size := benchSession(b, pa, n, 1000)
				base := 1000
				if kind == "renumbered" {
					base = 5_000_000
				}
				size += benchSession(b, pb, n, base)
				runtime.GC()
				peak := samplePeakHeap()
				b.SetBytes(size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					rep, err := Sessions(pa, pb, Options{})
					if err != nil {
						b.Fatal(err)
					}
					if !rep.Same || rep.Summary.Events.Compared != n {
						b.Fatalf("summary %+v", rep.Summary)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
				var ru syscall.Rusage
				if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
					b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB") // Linux: KiB
				}
			})
		}
	}
}

// samplePeakHeap samples HeapInuse every millisecond until the returned
// function is called, which returns the largest value seen.
func samplePeakHeap() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		return peak.Load()
	}
}
