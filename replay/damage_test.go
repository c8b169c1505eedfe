package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchEvents decodes a JSON watch body into its events' resourceVersions.
func watchEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var rvs []string
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var ev struct {
			Type   string
			Object struct {
				Metadata struct{ ResourceVersion string }
			}
		}
		if err := dec.Decode(&ev); err == io.EOF {
			return rvs
		} else if err != nil {
			t.Fatalf("watch body: event %d: %v", len(rvs), err)
		}
		rvs = append(rvs, ev.Object.Metadata.ResourceVersion)
	}
}

// TestDamagedBlock replays the real basic-json session with one byte of a
// block in the middle of its watch flipped (the index stays intact, so
// nothing but the block's checksum shows it): the server says what was
// lost and where (Losses, the log), the watch is served without those
// events and ends cut, over HTTP/1.1 and HTTP/2, and a client that
// resumes after the loss gets the rest of the watch ending as recorded.
func TestDamagedBlock(t *testing.T) {
	src := corpusSession(t, "basic-json")
	f := openSession(t, src)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	all := sessionEvents(t, f, id)
	x := f.Index().Exchanges[id]
	k := x.Blocks[len(x.Blocks)*2/3]
	blk := f.Index().Blocks[k]
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	data[blk.Offset+blk.Size/2] ^= 0x40
	path := filepath.Join(t.TempDir(), "damaged.wt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	open := func() *Server {
		srv, err := Open(path, Options{Writes: WritesReject, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		return srv
	}
	srv := open()
	ls := srv.Losses()
	if len(ls) != 1 || ls[0].Exchange != id || ls[0].Events <= 0 || ls[0].Damage == nil || ls[0].Damage.Block != k || ls[0].Damage.Offset != blk.Offset {
		t.Fatalf("Losses() = %v; want one loss of events of exchange %d in block %d at offset %d", ls, id, k, blk.Offset)
	}
	l := ls[0]
	t.Logf("loss: %v", l)
	// The events lost are the ones numbered After+1 … After+Events.
	var want []string
	for _, e := range all {
		if e.seq <= l.After || e.seq > l.After+l.Events {
			want = append(want, e.meta.ResourceVersion)
		}
	}
	if int64(len(all)-len(want)) != l.Events {
		t.Fatalf("loss of %d events after event %d; the session has %d events", l.Events, l.After, len(all))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	target := "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205"

	t.Run("HTTP/1.1", func(t *testing.T) {
		r := rawGet(t, srv.URL, target)
		cs, err := r.chunks()
		if r.status != 200 || err != io.ErrUnexpectedEOF {
			t.Errorf("status %d, stream ended with %v; want 200, cut (no terminating chunk)", r.status, err)
		}
		got := watchEvents(t, bytes.Join(cs, nil))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%d events served; want the %d of the %d recorded that survived", len(got), len(want), len(all))
		}
		for _, s := range []string{"crosses data lost to session damage", "stream cut",
			"block " + i64(int64(k)) + " at offset " + i64(blk.Offset), i64(l.Events) + " events lost after event " + i64(l.After)} {
			if !strings.Contains(logs.String(), s) {
				t.Errorf("log does not say %q:\n%s", s, logs.String())
			}
		}
	})

	t.Run("resumed after the loss", func(t *testing.T) {
		// The client re-watches from an event after the loss: the rest
		// of the watch does not cross it, and ends as recorded.
		after := all[l.After+l.Events+2]
		r := rawGet(t, srv.URL, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion="+after.meta.ResourceVersion)
		cs, err := r.chunks()
		if r.status != 200 || err != io.EOF {
			t.Errorf("status %d, stream ended with %v; want 200, a clean end", r.status, err)
		}
		if got := watchEvents(t, bytes.Join(cs, nil)); len(got) != len(all)-int(after.seq)-1 {
			t.Errorf("%d events after event %d; want %d", len(got), after.seq, len(all)-int(after.seq)-1)
		}
		// From the last event before the loss, it is crossed again.
		before := all[l.After]
		r = rawGet(t, srv.URL, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion="+before.meta.ResourceVersion)
		if _, err := r.chunks(); err != io.ErrUnexpectedEOF {
			t.Errorf("watch from the event before the loss ended with %v; want cut", err)
		}
	})

	t.Run("index rebuilt", func(t *testing.T) {
		// The same damage in a file whose writer was killed: the index is
		// rebuilt without the damaged block, and the events' numbers
		// still say how many were lost.
		var end int64
		for _, b := range f.Index().Blocks {
			end = max(end, b.Offset+b.Size)
		}
		p := filepath.Join(t.TempDir(), "killed.wt")
		if err := os.WriteFile(p, data[:end], 0o644); err != nil {
			t.Fatal(err)
		}
		srv, err := Open(p, Options{Writes: WritesReject})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if ls := srv.Losses(); len(ls) != 1 || ls[0].Events != l.Events || ls[0].After != l.After || ls[0].Damage.Offset != blk.Offset {
			t.Errorf("Losses() = %v; want %v", ls, l)
		}
	})

	t.Run("HTTP/2", func(t *testing.T) {
		tsrv := open()
		if err := tsrv.StartTLS(); err != nil {
			t.Fatal(err)
		}
		c := tsrv.Client()
		resp, err := c.Get(tsrv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s %d, body read: %v; want HTTP/2 200 and a stream reset", resp.Proto, resp.StatusCode, err)
		}
		if got := watchEvents(t, body); len(got) != len(want) {
			t.Errorf("%d events served; want %d", len(got), len(want))
		}
	})
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// TestDamagedDictionarySource replays the real basic-json session written
// with a small session dictionary (format version 2: most blocks of the
// watch compressed with the first records as a dictionary) and one of the
// blocks the dictionary is taken from damaged: the dictionary's copy in
// the file stands in, so the watch's later blocks read and it is served
// whole; only the exchanges of the damaged block lose anything.
func TestDamagedDictionarySource(t *testing.T) {
	f := openSession(t, corpusSession(t, "basic-json"))
	id := exchangeByTarget(t, f, "GET", "watch=true")
	all := sessionEvents(t, f, id)
	var buf bytes.Buffer
	w, err := formats.NewWriter(&buf, formats.WriterOptions{BlockSize: 1024, DictSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	path := filepath.Join(t.TempDir(), "dict.wt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	g := openSession(t, path)
	x := g.Index().Exchanges[id]
	if last := x.Blocks[len(x.Blocks)-1]; last < 12 {
		t.Fatalf("the watch ends in block %d; want it to reach blocks that use the dictionary", last)
	}
	// A block among the first (8 KiB in 1 KiB blocks) that the watch does
	// not touch.
	k := -1
	for i := 1; i < 6 && k < 0; i++ {
		if !slices.Contains(x.Blocks, i) {
			k = i
		}
	}
	if k < 0 {
		t.Fatalf("the watch touches every block of the dictionary: %v", x.Blocks)
	}
	blk := g.Index().Blocks[k]
	data[blk.Offset+blk.Size-3] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := Open(path, Options{Writes: WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, l := range srv.Losses() {
		if l.Exchange == id || l.Damage == nil || l.Damage.Block != k {
			t.Errorf("loss %v; want only losses of block %d, none of the watch (exchange %d)", l, k, id)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	r := rawGet(t, srv.URL, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205")
	cs, err := r.chunks()
	if r.status != 200 || err != io.EOF {
		t.Errorf("status %d, stream ended with %v; want 200, a clean end", r.status, err)
	}
	var want []string
	for _, e := range all {
		want = append(want, e.meta.ResourceVersion)
	}
	if got := watchEvents(t, bytes.Join(cs, nil)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%d events served; want all %d recorded", len(got), len(all))
	}
}
