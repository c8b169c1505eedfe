package capture_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// teeToken and teeSecret are credentials the tee tests send; they must
// never reach a session.
const (
	teeToken  = "tee-test-token-5f2c9a1e7b"
	teeSecret = "tee-test-secret-value-8d41"
)

// recSink keeps deep copies of the records written to it.
type recSink struct {
	mu   sync.Mutex
	recs []formats.Record
	hold chan struct{} // if set, each Write waits for a value
}

func (s *recSink) Write(r formats.Record) error {
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, clone(r))
	return nil
}

func (s *recSink) records() []formats.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]formats.Record(nil), s.recs...)
}

// clone deep-copies the byte slices of a record (sources reuse buffers).
func clone(r formats.Record) formats.Record {
	switch r := r.(type) {
	case *formats.Frame:
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		c.Pre = append([]byte(nil), r.Pre...)
		return &c
	case *formats.Body:
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		return &c
	case *formats.End:
		c := *r
		c.Tail = append([]byte(nil), r.Tail...)
		return &c
	case *formats.Request:
		c := *r
		return &c
	case *formats.Response:
		c := *r
		return &c
	case *formats.Conn:
		c := *r
		return &c
	case *formats.ConnEnd:
		c := *r
		return &c
	case *formats.Chunk:
		c := *r
		return &c
	case *formats.Anomaly:
		c := *r
		return &c
	}
	return r
}

// fakeClock advances by a microsecond at each reading.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Microsecond)
	return c.t
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

// watchEvents returns n JSON watch events: configmaps, and every fifth a
// Secret whose data holds teeSecret.
func watchEvents(n int) []string {
	var evs []string
	for i := range n {
		if i%5 == 4 {
			evs = append(evs, fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s-%d","namespace":"demo","resourceVersion":"%d"},"data":{"password":"%s"},"type":"Opaque"}}`,
				i, 100+i, base64.StdEncoding.EncodeToString([]byte(teeSecret))))
			continue
		}
		evs = append(evs, fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"k":"%s"}}}`,
			i, 100+i, strings.Repeat("v", i%37)))
	}
	return evs
}

const watchRequest = "GET /api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=99 HTTP/1.1\r\n" +
	"Host: 127.0.0.1:8001\r\nUser-Agent: tee-test\r\nAuthorization: Bearer " + teeToken + "\r\nAccept: application/json\r\n\r\n"

const watchHead = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

// chunk frames p as one HTTP/1.1 chunk.
func chunk(p string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(p), p) }

// feed hands s to c in pieces of size split (0: whole).
func feed(c *capture.TeeConn, dir formats.Direction, s string, split int) {
	for len(s) > 0 {
		n := len(s)
		if split > 0 {
			n = min(n, split)
		}
		c.Data(dir, []byte(s[:n]))
		s = s[n:]
	}
}

// frameData returns the Data of the Frame records, in order.
func frameData(recs []formats.Record) []string {
	var out []string
	for _, r := range recs {
		if f, ok := r.(*formats.Frame); ok {
			out = append(out, string(f.Data))
		}
	}
	return out
}

func TestTeeWatch(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	evs := watchEvents(12)
	for _, split := range []int{0, 1, 7, 100} {
		t.Run(fmt.Sprintf("split=%d", split), func(t *testing.T) {
			for _, keep := range []bool{false, true} {
				sink := &recSink{}
				clk := newFakeClock()
				tee := capture.NewTee(sink, capture.TeeOptions{KeepSecrets: keep, Clock: clk.now})
				c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
				feed(c, formats.ClientToServer, watchRequest, split)
				feed(c, formats.ServerToClient, watchHead, split)
				for _, e := range evs {
					feed(c, formats.ServerToClient, chunk(e+"\n"), split)
				}
				feed(c, formats.ServerToClient, "0\r\n\r\n", split)
				c.Close(formats.ConnClosed)
				if err := tee.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
				recs := sink.records()
				got := frameData(recs)
				if len(got) != len(evs) {
					t.Fatalf("keep=%v: %d frames; want %d", keep, len(got), len(evs))
				}
				for i, e := range evs {
					secret := strings.Contains(e, `"Secret"`)
					switch {
					case keep || !secret:
						if got[i] != e {
							t.Errorf("keep=%v: frame %d = %q; want %q", keep, i, got[i], e)
						}
					case got[i] == e || len(got[i]) != len(e):
						t.Errorf("frame %d (a Secret) = %q; want a redacted copy of the same length", i, got[i])
					}
				}
				var conn *formats.Conn
				var req *formats.Request
				var end *formats.End
				var cend *formats.ConnEnd
				chunks := 0
				for _, r := range recs {
					switch r := r.(type) {
					case *formats.Conn:
						conn = r
					case *formats.Request:
						req = r
					case *formats.End:
						if r.Dir == formats.ServerToClient {
							end = r
						}
					case *formats.ConnEnd:
						cend = r
					case *formats.Chunk:
						chunks++
					}
				}
				if conn == nil || conn.Client != "127.0.0.1:40000" || conn.Server != "127.0.0.1:8001" || conn.Proto != "http/1.1" {
					t.Errorf("Conn = %+v", conn)
				}
				if req == nil || req.Method != "GET" || !strings.HasPrefix(req.Target, "/api/v1/namespaces/demo/configmaps?watch=true") {
					t.Fatalf("Request = %+v", req)
				}
				for _, h := range req.Header {
					if h.Name == "Authorization" && (!h.Redacted || h.Value != "" || h.Len != len("Bearer "+teeToken)) {
						t.Errorf("Authorization header stored as %+v", h)
					}
				}
				if end == nil || end.Status != formats.EndComplete {
					t.Errorf("response End = %+v; want complete", end)
				}
				if chunks != len(evs) {
					t.Errorf("%d Chunk records; want %d", chunks, len(evs))
				}
				total := int64(len(watchRequest))
				if cend == nil || cend.Reason != formats.ConnClosed || cend.ClientBytes != total {
					t.Errorf("ConnEnd = %+v; want ConnClosed with %d client bytes", cend, total)
				}
				st := tee.Stats()
				if st.Conns != 1 || st.Exchanges != 1 || st.Events != int64(len(evs)) || st.Packets != 0 {
					t.Errorf("Stats() = %+v", st)
				}
			}
		})
	}
}

// TestTeeTimes: each piece carries the time it was handed over; an event
// gets the time of the piece that completed it.
func TestTeeTimes(t *testing.T) {
	sink := &recSink{}
	clk := newFakeClock()
	tee := capture.NewTee(sink, capture.TeeOptions{Clock: clk.now})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
	c.Data(formats.ClientToServer, []byte(watchRequest))
	c.Data(formats.ServerToClient, []byte(watchHead))
	ev := watchEvents(1)[0]
	body := chunk(ev + "\n")
	c.Data(formats.ServerToClient, []byte(body[:10]))
	want := clk.t.Add(time.Microsecond).UnixNano() // the next reading
	c.Data(formats.ServerToClient, []byte(body[10:]))
	c.Close(formats.ConnClosed)
	tee.Close()
	for _, r := range sink.records() {
		if f, ok := r.(*formats.Frame); ok && f.Time != want {
			t.Errorf("Frame.Time = %d; want %d (the time of the last piece)", f.Time, want)
		}
	}
}

// TestTeeNote: a note given after the request's bytes ends up in the note
// of its response's End, joined to what the recorder noted itself (a
// stream cut); before any request it is dropped.
func TestTeeNote(t *testing.T) {
	tests := []struct {
		name string
		play func(c *capture.TeeConn)
		want string
	}{
		{"answered whole", func(c *capture.TeeConn) {
			c.Data(formats.ClientToServer, []byte(watchRequest))
			c.Note("replay answer: recorded exchange 3")
			c.Data(formats.ServerToClient, []byte(watchHead+chunk(watchEvents(1)[0]+"\n")+"0\r\n\r\n"))
		}, "replay answer: recorded exchange 3"},
		{"two notes, the head already sent", func(c *capture.TeeConn) {
			c.Data(formats.ClientToServer, []byte(watchRequest))
			c.Data(formats.ServerToClient, []byte(watchHead))
			c.Note("a")
			c.Note("b")
			c.Data(formats.ServerToClient, []byte("0\r\n\r\n"))
		}, "a; b"},
		{"before the request", func(c *capture.TeeConn) {
			c.Note("lost")
			c.Data(formats.ClientToServer, []byte(watchRequest))
			c.Data(formats.ServerToClient, []byte(watchHead+"0\r\n\r\n"))
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &recSink{}
			tee := capture.NewTee(sink, capture.TeeOptions{})
			c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
			tt.play(c)
			c.Close(formats.ConnClosed)
			if err := tee.Close(); err != nil {
				t.Fatal(err)
			}
			ends := 0
			for _, r := range sink.records() {
				if e, ok := r.(*formats.End); ok && e.Dir == formats.ServerToClient {
					ends++
					if e.Note != tt.want {
						t.Errorf("End note %q; want %q", e.Note, tt.want)
					}
				}
			}
			if ends != 1 {
				t.Errorf("%d response Ends; want 1", ends)
			}
		})
	}
}

// TestTeeCloseOpen: connections still open when the Tee closes end as
// truncated by the end of the recording; later bytes are ignored.
func TestTeeCloseOpen(t *testing.T) {
	sink := &recSink{}
	tee := capture.NewTee(sink, capture.TeeOptions{})
	c := tee.Conn("[::1]:40000", "[::1]:8001", "http/1.1")
	c.Data(formats.ClientToServer, []byte(watchRequest))
	c.Data(formats.ServerToClient, []byte(watchHead+chunk(watchEvents(1)[0]+"\n")))
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
	c.Data(formats.ServerToClient, []byte(chunk(watchEvents(2)[1]+"\n")))
	c.Close(formats.ConnClosed)
	tee.Conn("[::1]:40001", "[::1]:8001", "http/1.1")
	if err := tee.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	var got []string
	for _, r := range sink.records() {
		switch r := r.(type) {
		case *formats.Frame:
			got = append(got, "frame")
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				got = append(got, "end "+r.Status.String())
			}
		case *formats.ConnEnd:
			got = append(got, "connend "+r.Reason.String())
		case *formats.Conn:
			got = append(got, "conn")
		}
	}
	want := []string{"conn", "frame", "end " + formats.EndTruncated.String(), "connend " + formats.ConnCaptureEnd.String()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records = %q; want %q", got, want)
	}
}

// TestTeeClientGone: a watch whose connection closes before the last
// chunk ends as closed.
func TestTeeClientGone(t *testing.T) {
	sink := &recSink{}
	tee := capture.NewTee(sink, capture.TeeOptions{})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "")
	c.Data(formats.ClientToServer, []byte(watchRequest))
	c.Data(formats.ServerToClient, []byte(watchHead+chunk(watchEvents(1)[0]+"\n")))
	c.Close(formats.ConnClosed)
	tee.Close()
	for _, r := range sink.records() {
		if e, ok := r.(*formats.End); ok && e.Dir == formats.ServerToClient && e.Status != formats.EndClosed {
			t.Errorf("End = %+v; want closed", e)
		}
	}
}

// TestTeeConcurrent: many connections at once, each from its own
// goroutines, with a slow sink and a tiny queue: nothing is lost.
func TestTeeConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sink := &recSink{}
	tee := capture.NewTee(sink, capture.TeeOptions{Queue: 2, FlushInterval: time.Millisecond})
	evs := watchEvents(20)
	const conns = 16
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tee.Conn(fmt.Sprintf("127.0.0.1:%d", 40000+i), "127.0.0.1:8001", "http/1.1")
			feed(c, formats.ClientToServer, watchRequest, 0)
			var resp strings.Builder
			resp.WriteString(watchHead)
			for _, e := range evs {
				resp.WriteString(chunk(e + "\n"))
			}
			resp.WriteString("0\r\n\r\n")
			// Writes from another goroutine than reads, as a proxy does.
			done := make(chan struct{})
			go func() {
				defer close(done)
				feed(c, formats.ServerToClient, resp.String(), 1+i*13)
			}()
			<-done
			c.Close(formats.ConnClosed)
		}()
	}
	wg.Wait()
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
	st := tee.Stats()
	if st.Conns != conns || st.Exchanges != conns || st.Events != conns*int64(len(evs)) {
		t.Errorf("Stats() = %+v; want %d conns, %d exchanges, %d events", st, conns, conns, conns*len(evs))
	}
	byExchange := map[int64]int{}
	for _, r := range sink.records() {
		if f, ok := r.(*formats.Frame); ok {
			if int(f.Seq) != byExchange[f.Exchange] {
				t.Fatalf("exchange %d: frame seq %d; want %d", f.Exchange, f.Seq, byExchange[f.Exchange])
			}
			byExchange[f.Exchange]++
		}
	}
}

// TestTeeBackpressure: with a sink that does not write, Data blocks once
// the queue is full, and resumes without losing bytes.
func TestTeeBackpressure(t *testing.T) {
	hold := make(chan struct{})
	sink := &recSink{hold: hold}
	tee := capture.NewTee(sink, capture.TeeOptions{Queue: 1})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
	evs := watchEvents(50)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Data(formats.ClientToServer, []byte(watchRequest))
		c.Data(formats.ServerToClient, []byte(watchHead))
		for _, e := range evs {
			c.Data(formats.ServerToClient, []byte(chunk(e+"\n")))
		}
		c.Data(formats.ServerToClient, []byte("0\r\n\r\n"))
		c.Close(formats.ConnClosed)
	}()
	// Let records through one at a time until the connection is done.
	for {
		select {
		case hold <- struct{}{}:
			continue
		case <-done:
		}
		break
	}
	// Release the rest while Close drains the queue.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case hold <- struct{}{}:
			case <-stop:
				return
			}
		}
	}()
	err := tee.Close()
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if got := frameData(sink.records()); len(got) != len(evs) {
		t.Errorf("%d frames; want %d", len(got), len(evs))
	}
}

// TestTeeUnknownProto: a protocol the tee cannot parse is announced with
// an anomaly, and its bytes are only counted.
func TestTeeUnknownProto(t *testing.T) {
	sink := &recSink{}
	tee := capture.NewTee(sink, capture.TeeOptions{})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "spdy/3")
	c.Data(formats.ClientToServer, []byte("hello"))
	c.Close(formats.ConnClosed)
	tee.Close()
	var kinds []string
	for _, r := range sink.records() {
		switch r := r.(type) {
		case *formats.Anomaly:
			kinds = append(kinds, "anomaly "+r.Kind.String())
		case *formats.ConnEnd:
			kinds = append(kinds, fmt.Sprintf("connend %d", r.ClientBytes))
		}
	}
	if want := []string{"anomaly " + formats.AnomalyUnknown.String(), "connend 5"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("records = %q; want %q", kinds, want)
	}
}

// TestTeeFileSink: a Tee writing through a FileSink gives a clean session
// file with redacted secrets, flushed by the ticker.
func TestTeeFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tee.wt")
	fs, err := formats.NewFileSink(formats.FileSinkOptions{Path: path, Meta: formats.Meta{Tool: "test", Source: "proxy", Redaction: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan capture.Stats, 100)
	tee := capture.NewTee(fs, capture.TeeOptions{FlushInterval: time.Millisecond, OnTick: func(st capture.Stats) {
		select {
		case ticks <- st:
		default:
		}
	}})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
	c.Data(formats.ClientToServer, []byte(watchRequest))
	c.Data(formats.ServerToClient, []byte(watchHead))
	evs := watchEvents(10)
	for _, e := range evs {
		c.Data(formats.ServerToClient, []byte(chunk(e+"\n")))
	}
	// Wait for a tick that saw every event: the ticker flushed them.
	for st := range ticks {
		if st.Events == int64(len(evs)) {
			break
		}
	}
	c.Close(formats.ConnClosed)
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(formats.Ending{Note: "done"}); err != nil {
		t.Fatal(err)
	}
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx := f.Index()
	if !f.Clean() || idx.Summary == nil || idx.Summary.Events != int64(len(evs)) || idx.Summary.Note != "done" || idx.Summary.Conns != 1 {
		t.Errorf("clean %v, summary %+v", f.Clean(), idx.Summary)
	}
	if len(idx.Exchanges) != 1 || idx.Exchanges[0].Frames != int64(len(evs)) {
		t.Errorf("index exchanges = %+v", idx.Exchanges)
	}
	wttest.CheckNoSecrets(t, path, teeToken, teeSecret, base64.StdEncoding.EncodeToString([]byte(teeSecret)))
}

// readAll returns every record of a session file, and whether it is clean.
func readAll(t *testing.T, path string) ([]formats.Record, *formats.Index) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatalf("formats.Open(%s): %v", path, err)
	}
	defer f.Close()
	if !f.Clean() {
		t.Errorf("%s was not closed cleanly: %v", path, f.Problems())
	}
	var recs []formats.Record
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		recs = append(recs, r)
	}
	return recs, f.Index()
}

// failSink fails every Write after the first n.
type failSink struct {
	mu sync.Mutex
	n  int
}

var errSinkBroken = errors.New("sink broken")

func (s *failSink) Write(formats.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return errSinkBroken
	}
	s.n--
	return nil
}

// TestTeeDone: Done is closed as soon as the Sink fails, with Err saying
// why, while the connections carry on; and after Close.
func TestTeeDone(t *testing.T) {
	tee := capture.NewTee(&failSink{n: 2}, capture.TeeOptions{})
	c := tee.Conn("127.0.0.1:40000", "127.0.0.1:8001", "http/1.1")
	select {
	case <-tee.Done():
		t.Fatal("Done before anything failed")
	default:
	}
	c.Data(formats.ClientToServer, []byte(watchRequest))
	c.Data(formats.ServerToClient, []byte(watchHead+chunk(watchEvents(1)[0]+"\n")))
	select {
	case <-tee.Done():
	case <-time.After(time.Minute):
		t.Fatal("Done not closed within a minute of the sink failing")
	}
	if err := tee.Err(); !errors.Is(err, errSinkBroken) {
		t.Errorf("Err() = %v; want %v", err, errSinkBroken)
	}
	c.Data(formats.ServerToClient, []byte(chunk(watchEvents(2)[1]+"\n"))) // ignored, never blocks
	if err := tee.Close(); !errors.Is(err, errSinkBroken) {
		t.Errorf("Close() = %v; want %v", err, errSinkBroken)
	}

	ok := capture.NewTee(&recSink{}, capture.TeeOptions{})
	if err := ok.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ok.Done():
	default:
		t.Error("Done not closed after Close")
	}
}
