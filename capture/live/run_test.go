package live

import (
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
)

// pcapSource replays a capture file as a live source: a timeout after
// every packet, then timeouts forever (or err, if set).
type pcapSource struct {
	r       *pcapfile.Reader
	timeout bool
	end     error
	done    atomic.Bool
}

func (s *pcapSource) Next() (capture.Packet, error) {
	if s.timeout {
		s.timeout = false
		return capture.Packet{}, ErrTimeout
	}
	p, err := s.r.Next()
	if err == io.EOF {
		s.done.Store(true)
		if s.end != nil {
			return capture.Packet{}, s.end
		}
		time.Sleep(time.Millisecond)
		return capture.Packet{}, ErrTimeout
	}
	s.timeout = true
	return capture.Packet{Time: p.Time, LinkType: uint16(p.LinkType), Data: p.Data, Length: p.Length}, err
}

func openPcap(t *testing.T, path string) *pcapfile.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("corpus capture: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := pcapfile.NewReader(f, pcapfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type countSink struct{ events int }

func (s *countSink) Write(r formats.Record) error {
	if _, ok := r.(*formats.Frame); ok {
		s.events++
	}
	return nil
}

func TestRun(t *testing.T) {
	src := &pcapSource{r: openPcap(t, "../../testdata/corpus/basic-json/capture.pcap")}
	sink := &countSink{}
	rec := capture.NewRecorder(sink, capture.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flushes, packets, ticks int
	err := Run(ctx, src, rec, RunOptions{
		FlushInterval: time.Millisecond,
		Flush:         func() error { flushes++; return nil },
		Packet:        func(capture.Packet) error { packets++; return nil },
		OnTick: func(st capture.Stats) {
			ticks++
			if src.done.Load() {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	rec.Close()
	if st := rec.Stats(); st.Packets != 416 || packets != 416 || sink.events != 200 {
		t.Errorf("stats %+v, %d packets seen, %d events; want 416 packets, 200 events", st, packets, sink.events)
	}
	if flushes == 0 || ticks != flushes {
		t.Errorf("%d flushes, %d ticks", flushes, ticks)
	}
}

func TestRunErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		src  *pcapSource
		opts RunOptions
	}{
		{"source", &pcapSource{end: boom}, RunOptions{}},
		{"packet", &pcapSource{}, RunOptions{Packet: func(capture.Packet) error { return boom }}},
		{"flush", &pcapSource{}, RunOptions{FlushInterval: time.Nanosecond, Flush: func() error { return boom }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.r = openPcap(t, "../../testdata/corpus/basic-json/capture.pcap")
			rec := capture.NewRecorder(&countSink{}, capture.Options{})
			if err := Run(context.Background(), tc.src, rec, tc.opts); !errors.Is(err, boom) {
				t.Errorf("Run() = %v; want %v", err, boom)
			}
		})
	}
}
