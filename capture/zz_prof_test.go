package capture

import (
	"context"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

func TestZZProf(t *testing.T) {
	path := os.Getenv("PROF_PCAP")
	if path == "" {
		t.Skip()
	}
	f, _ := os.Open(path)
	defer f.Close()
	done := false
	_, err := RecordPcap(context.Background(), f, PcapOptions{Output: FileSinkOptions{Out: io.Discard}, Progress: func(read int64, st Stats) {
		if !done && read > 100<<20 {
			done = true
			runtime.GC()
			pf, _ := os.Create("/tmp/heap.prof")
			pprof.WriteHeapProfile(pf)
			pf.Close()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
}
