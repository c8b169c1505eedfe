package capture

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// memoryWorkers are the Options.Workers the memory tests record with: on
// the caller's goroutine, and with workers (RecordPcap's way), where
// each connection also has a session and merge state of its own
// (memoryWorkerCost more per open connection; the two batches in flight
// are a cost per recording, so the heap is measured after Recorder.drain).
var memoryWorkers = []int{1, 2}

// memoryWorkerCost bounds what workers add per open connection.
const memoryWorkerCost = 300

// liveHeap returns the bytes of heap in use after a collection.
func liveHeap() int64 {
	// Twice: what sync.Pools keep survives one collection (as victims).
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMemoryFollowsOpenWork records workloads of many exchanges through
// the session writer and measures the heap that stays in use as they
// pile up: what finished must cost little (its compressed index entry),
// whatever the history. A pipelined connection's requests are open work
// until answered, each bounded too.
func TestMemoryFollowsOpenWork(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("records 100,000 exchanges; measures the heap (not under -race)")
	}
	const n = 20000
	tests := []struct {
		name     string
		gen      func(b *pcaptest.Builder, n int)
		perEntry int64 // bytes of heap each exchange may keep
	}{
		{"keep-alive exchanges", func(b *pcaptest.Builder, n int) { pcaptest.Exchanges(b, 50, n) }, 300},
		{"connections", func(b *pcaptest.Builder, n int) { pcaptest.Connections(b, n, 0, "fin") }, 300},
		{"connections a second apart, reset", func(b *pcaptest.Builder, n int) { pcaptest.Connections(b, n, time.Second, "rst") }, 300},
		{"watches", pcaptest.Watches, 300},
		{"pipelined", pcaptest.Pipelined, 1000},
	}
	for _, tt := range tests {
		for _, workers := range memoryWorkers {
			t.Run(fmt.Sprintf("%s/workers-%d", tt.name, workers), func(t *testing.T) {
				testMemoryFollows(t, n, tt.gen, tt.perEntry, workers)
			})
		}
	}
}

func testMemoryFollows(t *testing.T, n int, gen func(b *pcaptest.Builder, n int), perEntry int64, workers int) {
	// The workers' two batches keep their arenas and records, up to a
	// few MiB, however many exchanges went through; how far they grew
	// differs from run to run, by more than 300 bytes an exchange over
	// 20,000. Small batches keep that constant out of the measure.
	defer func(b, o int) { batchBytes, batchOps = b, o }(batchBytes, batchOps)
	batchBytes, batchOps = 64<<10, 512
	{
		{
			fs, err := formats.NewFileSink(formats.FileSinkOptions{Out: io.Discard, Meta: formats.NewMeta("test", "pcap", "memory", true)})
			if err != nil {
				t.Fatal(err)
			}
			rec := NewRecorder(fs, Options{KeepSecrets: true, Workers: workers})
			feedAll := func(b *pcaptest.Builder, gen func(*pcaptest.Builder)) {
				b.Emit = func(p pcaptest.Packet) {
					if err := rec.Packet(Packet{Time: p.Time.UnixNano(), LinkType: uint16(pcapfile.LinkEthernet), Data: pcaptest.Encode(p)}); err != nil {
						t.Fatal(err)
					}
				}
				gen(b)
			}
			b := pcaptest.New()
			// A first quarter, then the rest on other addresses: the heap
			// may grow by little per exchange between the two.
			// Each measure after the records are written and the
			// session's pending block cut and compressed: what the
			// heap holds then does not depend on where the workers'
			// records fell among the blocks.
			settle := func() int64 {
				rec.drain()
				if err := fs.Flush(); err != nil {
					t.Fatal(err)
				}
				return liveHeap()
			}
			feedAll(b, func(b *pcaptest.Builder) { gen(b, n/4) })
			before := settle()
			b2 := pcaptest.New()
			b2.SetNow(b.Now().Add(time.Minute))
			feedAll(b2, func(b *pcaptest.Builder) { gen(b, n) })
			after := settle()
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fs.Close(formats.Ending{}); err != nil {
				t.Fatal(err)
			}
			per := (after - before) / int64(n)
			t.Logf("heap %d → %d bytes: %d bytes per exchange", before, after, per)
			if per > perEntry {
				t.Errorf("the heap grows by %d bytes per exchange recorded; want ≤ %d", per, perEntry)
			}
			if st := rec.Stats(); st.Exchanges != int64(n/4+n) {
				t.Errorf("%d exchanges recorded; want %d", st.Exchanges, n/4+n)
			}
		}
	}
}

// TestMemoryPipelined: requests pipelined on one connection are open work
// until their responses come; each waiting one must cost little.
func TestMemoryPipelined(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("records 20,000 pipelined requests; measures the heap (not under -race)")
	}
	for _, workers := range memoryWorkers {
		t.Run(fmt.Sprintf("workers-%d", workers), func(t *testing.T) { testMemoryPipelined(t, workers) })
	}
}

func testMemoryPipelined(t *testing.T, workers int) {
	const n = 20000
	// No session dictionary: it is a cost per file (about 10 MB with its
	// compressors, once the records reach 1 MiB), which would fall inside
	// the measured stretch here and read as a cost per request.
	fs, err := formats.NewFileSink(formats.FileSinkOptions{Out: io.Discard, Meta: formats.NewMeta("test", "pcap", "memory", true),
		Writer: formats.WriterOptions{DictSize: -1}})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(fs, Options{KeepSecrets: true, Workers: workers})
	b := pcaptest.New()
	b.Emit = func(p pcaptest.Packet) {
		if err := rec.Packet(Packet{Time: p.Time.UnixNano(), LinkType: uint16(pcapfile.LinkEthernet), Data: pcaptest.Encode(p)}); err != nil {
			t.Fatal(err)
		}
	}
	c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
	req := func(i int) []byte {
		return []byte(fmt.Sprintf("GET /api/v1/namespaces/default/configmaps/cm-%d HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nAccept: application/json\r\n\r\n", i))
	}
	for i := range n / 4 {
		c.Send(pcaptest.ToServer, req(i))
	}
	rec.drain()
	before := liveHeap()
	for i := n / 4; i < n+n/4; i++ {
		c.Send(pcaptest.ToServer, req(i))
	}
	rec.drain()
	after := liveHeap()
	resp := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	for range n + n/4 {
		c.Send(pcaptest.ToClient, []byte(resp))
	}
	c.FIN(pcaptest.ToServer)
	c.FIN(pcaptest.ToClient)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(formats.Ending{}); err != nil {
		t.Fatal(err)
	}
	per := (after - before) / n
	t.Logf("heap %d → %d bytes: %d bytes per request waiting", before, after, per)
	if per > 400 {
		t.Errorf("the heap grows by %d bytes per request waiting for its response; want ≤ 400", per)
	}
	if st := rec.Stats(); st.Exchanges != n+n/4 {
		t.Errorf("%d exchanges recorded; want %d", st.Exchanges, n+n/4)
	}
}

// TestMemoryOpenWork: what stays open costs little — a watch that got its
// first event and waits for the next (its connection, TCP and HTTP state,
// exchange, chunk decoder, event splitter), a pipelined request waiting
// for its answer. Issue 27: 100,000 open watches took 596 MiB (7.7 KB of
// heap each, 4 KiB of it a chunk decoder's line buffer), 300,000
// unanswered requests 271 MiB (most of it while Close ended them: see
// h1Conn.endQueue); docs/BENCHMARKS.md has the whole-process figures.
// Issue 34: an open watch was 1,606 bytes of heap (100,000 of them peaked
// at 206 MiB of RSS), now 1,284: what only some connections need (a TCP
// direction's out-of-order segments, a head cut across packets, an
// exchange's sniffed bytes and held chunk records) moved out of every
// one, and the event splitter's small fields packed (224 -> 128 bytes).
func TestMemoryOpenWork(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("records 40,000 open watches and requests; measures the heap (not under -race)")
	}
	const n = 20000
	watch := func(b *pcaptest.Builder, i int) {
		c := b.Conn(fmt.Sprintf("127.%d.%d.%d:40000", 1+i>>16, i>>8&255, i&255), "127.0.0.1:8001", true)
		c.Send(pcaptest.ToServer, []byte("GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n\r\n"))
		ev := fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"}}}`, i, 1000+i)
		c.Send(pcaptest.ToClient, []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\n\r\n", len(ev)+1, ev)))
	}
	var pipe *pcaptest.Conn
	request := func(b *pcaptest.Builder, i int) {
		if pipe == nil {
			pipe = b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
		}
		pipe.Send(pcaptest.ToServer, []byte(fmt.Sprintf("GET /api/v1/namespaces/default/configmaps/cm-%d HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nUser-Agent: kubectl/v1.33.13\r\nAccept: application/json\r\n\r\n", i)))
	}
	for _, tt := range []struct {
		name    string
		open    func(b *pcaptest.Builder, i int)
		perOpen int64 // bytes of heap each open item may keep
	}{
		{"watches", watch, 1400},
		{"pipelined requests", request, 300},
	} {
		for _, workers := range memoryWorkers {
			t.Run(fmt.Sprintf("%s/workers-%d", tt.name, workers), func(t *testing.T) {
				pipe = nil
				perOpen := tt.perOpen
				if workers > 1 {
					perOpen += memoryWorkerCost
				}
				testMemoryOpen(t, n, tt.open, perOpen, workers)
			})
		}
	}
}

func testMemoryOpen(t *testing.T, n int, open func(b *pcaptest.Builder, i int), perOpen int64, workers int) {
	{
		{
			// A session dictionary, the writer's buffers and encoders are
			// costs per file, not per item: they come with the first n.
			fs, err := formats.NewFileSink(formats.FileSinkOptions{Out: io.Discard, Meta: formats.NewMeta("test", "pcap", "memory", false),
				Writer: formats.WriterOptions{DictSize: -1}})
			if err != nil {
				t.Fatal(err)
			}
			rec := NewRecorder(fs, Options{Workers: workers})
			b := pcaptest.New()
			b.Emit = func(p pcaptest.Packet) {
				if err := rec.Packet(Packet{Time: p.Time.UnixNano(), LinkType: uint16(pcapfile.LinkEthernet), Data: pcaptest.Encode(p)}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				open(b, i)
			}
			rec.drain()
			before := liveHeap()
			for i := n; i < 2*n; i++ {
				open(b, i)
			}
			rec.drain()
			after := liveHeap()
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fs.Close(formats.Ending{}); err != nil {
				t.Fatal(err)
			}
			per := (after - before) / int64(n)
			t.Logf("heap %d → %d bytes: %d bytes per open item", before, after, per)
			if per > perOpen {
				t.Errorf("the heap grows by %d bytes per open item; want ≤ %d", per, perOpen)
			}
			if st := rec.Stats(); st.Exchanges != int64(2*n) {
				t.Errorf("%d exchanges recorded; want %d", st.Exchanges, 2*n)
			}
		}
	}
}
