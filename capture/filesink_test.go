package capture_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

func TestPartName(t *testing.T) {
	for _, tc := range []struct {
		path string
		n    int
		want string
	}{
		{"s.wt", 1, "s-0001.wt"},
		{"dir/s.wt", 12, "dir/s-0012.wt"},
		{"session", 3, "session-0003"},
		{"a.b.wt", 10000, "a.b-10000.wt"},
	} {
		if got := formats.PartName(tc.path, tc.n); got != tc.want {
			t.Errorf("PartName(%q, %d) = %q; want %q", tc.path, tc.n, got, tc.want)
		}
	}
}

// manualClock is a wall clock moved by the test.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestFileSinkRotate: a long watch spread over several parts by size and
// by duration; each part stands on its own, and the parts together hold
// every event once, in order.
func TestFileSinkRotate(t *testing.T) {
	for _, by := range []string{"size", "duration"} {
		t.Run(by, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.wt")
			clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
			opts := formats.FileSinkOptions{
				Path:   path,
				Meta:   formats.Meta{Tool: "test", Source: "proxy", Labels: map[string]string{"who": "test"}},
				Rotate: true,
				Clock:  clk.now,
				Writer: formats.WriterOptions{BlockSize: 4 << 10},
			}
			if by == "size" {
				opts.MaxSize = 2 << 10
			} else {
				opts.MaxDuration = time.Minute
			}
			var rotations [][2]string
			opts.OnRotate = func(a, b string) { rotations = append(rotations, [2]string{a, b}) }
			fs, err := formats.NewFileSink(opts)
			if err != nil {
				t.Fatal(err)
			}
			// The Tee's ticker is not used: Flush is called by the test
			// between batches, from the goroutine that owns the sink.
			sink := &syncSink{fs: fs}
			tee := capture.NewTee(sink, capture.TeeOptions{FlushInterval: time.Hour})
			// A short exchange that ends in the first part, and a watch
			// that spans every part.
			short := tee.Conn("127.0.0.1:39999", "127.0.0.1:8001", "http/1.1")
			short.Data(formats.ClientToServer, []byte("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"))
			short.Data(formats.ServerToClient, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
			short.Close(formats.ConnClosed)
			c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
			c.Data(formats.ClientToServer, []byte(watchRequest))
			c.Data(formats.ServerToClient, []byte(watchHead))
			evs := watchEvents(400)
			for i, e := range evs {
				c.Data(formats.ServerToClient, []byte(chunk(e+"\n")))
				if i%40 == 39 {
					sink.flush(t, tee, clk)
				}
			}
			c.Data(formats.ServerToClient, []byte("0\r\n\r\n"))
			c.Close(formats.ConnClosed)
			if err := tee.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fs.Close(formats.Ending{Note: "stopped"}); err != nil {
				t.Fatal(err)
			}
			names := fs.Names()
			if len(names) < 3 {
				t.Fatalf("Names() = %q; want at least 3 parts", names)
			}
			if len(rotations) != len(names)-1 {
				t.Errorf("OnRotate called %d times for %d parts", len(rotations), len(names))
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("%s exists; with Rotate only the numbered parts are written", path)
			}
			var all []string
			for i, name := range names {
				if want := formats.PartName(path, i+1); name != want {
					t.Errorf("part %d is %s; want %s", i+1, name, want)
				}
				recs, idx := readAll(t, name)
				m := idx.Meta
				if m == nil || m.Labels["part"] != strconv.Itoa(i+1) || m.Labels["who"] != "test" {
					t.Errorf("%s: Meta = %+v", name, m)
				} else if i > 0 && m.Labels["previous"] != filepath.Base(names[i-1]) {
					t.Errorf("%s: previous = %q; want %q", name, m.Labels["previous"], filepath.Base(names[i-1]))
				}
				// The watch's connection and exchange are announced in
				// every part, before its frames.
				var kinds []formats.Type
				frames := 0
				for _, r := range recs {
					switch r.Type() {
					case formats.TypeConn:
						if r.(*formats.Conn).Client == "127.0.0.1:40000" {
							kinds = append(kinds, r.Type())
						}
					case formats.TypeRequest, formats.TypeResponse:
						kinds = append(kinds, r.Type())
					case formats.TypeFrame:
						frames++
						if len(kinds) < 3 {
							t.Fatalf("%s: a frame before its exchange was announced (%v)", name, kinds)
						}
					}
				}
				if i > 0 && !reflect.DeepEqual(kinds, []formats.Type{formats.TypeConn, formats.TypeRequest, formats.TypeResponse}) {
					t.Errorf("%s announces %v; want the watch's Conn, Request, Response", name, kinds)
				}
				// Every part but the last holds frames; the last may hold
				// only the stream's end, when the part before filled up
				// with its last event (where that falls depends on how
				// well the format compresses).
				if frames == 0 && i < len(names)-1 {
					t.Errorf("%s holds no frames", name)
				}
				if len(idx.Exchanges) == 0 || idx.Exchanges[len(idx.Exchanges)-1].Response == nil {
					t.Errorf("%s: index has no response for the watch: %+v", name, idx.Exchanges)
				}
				s := idx.Summary
				if s == nil || s.Events != int64(frames) {
					t.Errorf("%s: Summary = %+v; want %d events", name, s, frames)
				}
				last := i == len(names)-1
				if last && s.Note != "stopped" || !last && s.Note == "" {
					t.Errorf("%s: Summary note %q", name, s.Note)
				}
				all = append(all, frameData(recs)...)
				wttest.CheckNoSecrets(t, name, teeToken, teeSecret)
			}
			if len(all) != len(evs) {
				t.Fatalf("the parts hold %d events; want %d", len(all), len(evs))
			}
			for i := range all {
				if len(all[i]) != len(evs[i]) {
					t.Fatalf("event %d: %d bytes; want %d", i, len(all[i]), len(evs[i]))
				}
			}
		})
	}
}

// syncSink lets a test call the FileSink's Flush from outside the
// recording goroutine safely: every call holds a lock.
type syncSink struct {
	mu sync.Mutex
	fs *formats.FileSink
}

func (s *syncSink) Write(r formats.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fs.Write(r)
}

// flush waits until the tee has recorded what it was given, then moves
// the clock 25 s on and flushes.
func (s *syncSink) flush(t *testing.T, tee *capture.Tee, clk *manualClock) {
	t.Helper()
	// A Conn on a fresh connection is a marker: once the Tee's stats count
	// it, everything before it went through the sink.
	want := tee.Stats().Conns + 1
	m := tee.Conn("127.0.0.1:1", "127.0.0.1:2", "http/1.1")
	wttest.WaitFor(t, time.Minute, func() bool { return tee.Stats().Conns >= want }, "the tee to record connection %d", want)
	m.Close(formats.ConnClosed)
	clk.advance(25 * time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fs.Flush()
}

// TestFileSinkLimit: without Rotate, a limit calls OnLimit once and the
// file goes on until Close.
func TestFileSinkLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.wt")
	var reasons []formats.Limit
	clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
	fs, err := formats.NewFileSink(formats.FileSinkOptions{
		Path: path, Meta: formats.Meta{Tool: "test"}, MaxSize: 2 << 10, MaxDuration: time.Minute, Clock: clk.now,
		OnLimit: func(r formats.Limit) { reasons = append(reasons, r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := fs.Write(&formats.Conn{ID: uint64(i), Time: int64(i), Client: "127.0.0.1:1", Server: "127.0.0.1:2", Proto: "http/1.1"}); err != nil {
			t.Fatal(err)
		}
		if err := fs.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Hour)
	fs.Flush()
	if err := fs.Write(&formats.Summary{}); err != formats.ErrSinkRecord {
		t.Errorf("Write(Summary) = %v; want ErrSinkRecord", err)
	}
	if err := fs.Close(formats.Ending{Note: "limit"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reasons, []formats.Limit{formats.LimitSize}) {
		t.Errorf("OnLimit calls %v; want one %v", reasons, formats.LimitSize)
	}
	_, idx := readAll(t, path)
	if idx.Summary == nil || idx.Summary.Conns != 100 || len(fs.Names()) != 1 {
		t.Errorf("summary %+v, names %q", idx.Summary, fs.Names())
	}
}

func TestFileSinkErrors(t *testing.T) {
	if _, err := formats.NewFileSink(formats.FileSinkOptions{}); err == nil {
		t.Error("NewFileSink without Path or Out: no error")
	}
	if _, err := formats.NewFileSink(formats.FileSinkOptions{Out: os.Stdout, Rotate: true}); err == nil {
		t.Error("NewFileSink(Out, Rotate): no error")
	}
	if _, err := formats.NewFileSink(formats.FileSinkOptions{Path: filepath.Join(t.TempDir(), "no", "such", "dir.wt")}); err == nil {
		t.Error("NewFileSink in a missing directory: no error")
	}
}
