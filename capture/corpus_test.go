package capture

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// memSink keeps records in memory, deep-copying what aliases the recorder's
// buffers (as formats.Writer does by encoding).
type memSink struct{ recs []formats.Record }

func (m *memSink) Write(r formats.Record) error {
	switch v := r.(type) {
	case *formats.Frame:
		c := *v
		c.Pre = append([]byte(nil), v.Pre...)
		c.Data = append([]byte(nil), v.Data...)
		c.Redacted = append([]int(nil), v.Redacted...) // the recorder reuses its storage
		r = &c
	case *formats.Body:
		c := *v
		c.Data = append([]byte(nil), v.Data...)
		r = &c
	case *formats.End:
		c := *v
		c.Tail = append([]byte(nil), v.Tail...)
		r = &c
	case *formats.Response:
		c := *v
		r = &c
	case *formats.Chunk:
		c := *v
		r = &c
	case *formats.Request:
		c := *v
		r = &c
	}
	m.recs = append(m.recs, r)
	return nil
}

// recordFile records a capture file into memory.
func recordFile(t testing.TB, path string, opts Options) (*memSink, Stats) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return recordReader(t, f, opts)
}

// recordReader records a capture read from r into memory.
func recordReader(t testing.TB, r io.Reader, opts Options) (*memSink, Stats) {
	t.Helper()
	pc, err := NewPcap(r, opts.KeyLog)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sink := &memSink{}
	res, err := pc.Record(context.Background(), sink, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReadErr != nil {
		t.Fatal(res.ReadErr)
	}
	return sink, res.Stats
}

// event is what `wtrace events` reports, as the tests compare it.
type event struct {
	Conn, Request                                       string
	Exchange, Seq                                       int64
	Time                                                int64
	Type, Kind, APIVersion, Namespace, Name, RV, SHA256 string
	Code                                                int32
	Reason, Message                                     string
}

// events derives the event list from records, the way `wtrace events` does.
func events(t testing.TB, recs []formats.Record) []event {
	conns := map[uint64]string{}
	reqs := map[int64]*formats.Request{}
	formatOf := map[int64]frame.Format{}
	var out []event
	for _, r := range recs {
		switch v := r.(type) {
		case *formats.Conn:
			conns[v.ID] = v.Client + "->" + v.Server
		case *formats.Request:
			reqs[v.Exchange] = v
		case *formats.Response:
			formatOf[v.Exchange] = v.Events
		case *formats.Frame:
			req := reqs[v.Exchange]
			f := formatOf[v.Exchange]
			m, err := frame.Peek(f, v.Data)
			if err != nil {
				t.Errorf("exchange %d seq %d: Peek: %v", v.Exchange, v.Seq, err)
			}
			sum := sha256.Sum256(v.Data)
			e := event{Exchange: v.Exchange, Seq: v.Seq, Time: v.Time, Type: m.Type, Kind: m.Kind, APIVersion: m.APIVersion,
				Namespace: m.Namespace, Name: m.Name, RV: m.ResourceVersion, SHA256: hex.EncodeToString(sum[:]),
				Code: m.Code, Reason: m.Reason, Message: m.Message}
			if req != nil {
				e.Conn = conns[req.Conn]
				if !req.Missing {
					e.Request = req.Method + " " + req.Target
				}
			}
			out = append(out, e)
		}
	}
	return out
}

type truthEvent struct {
	ReqID           int    `json:"req_id"`
	Conn            string `json:"conn"`
	Server          string `json:"server"`
	Request         string `json:"request"`
	Index           int    `json:"index"`
	Type            string `json:"type"`
	Kind            string `json:"kind"`
	APIVersion      string `json:"apiVersion"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	RecvUnixNano    int64  `json:"recv_unix_nano"`
	EventSHA256     string `json:"event_sha256"`
	StatusCode      int32  `json:"status_code"`
	StatusReason    string `json:"status_reason"`
	StatusMessage   string `json:"status_message"`
	InCapture       *bool  `json:"in_capture"`
}

func readTruth(t testing.TB, path string) []truthEvent {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []truthEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e truthEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.InCapture != nil && !*e.InCapture {
			continue
		}
		out = append(out, e)
	}
	return out
}

// compareTruth checks that got holds exactly the truth's events: the same
// streams, each with the same events in the same order, same bytes and
// fields, nothing extra.
func compareTruth(t *testing.T, truth []truthEvent, got []event) {
	t.Helper()
	type key struct {
		conn string
		id   string
	}
	want := map[key][]truthEvent{}
	var order []key
	for _, e := range truth {
		k := key{e.Conn + "->" + e.Server, fmt.Sprint(e.ReqID)}
		if _, ok := want[k]; !ok {
			order = append(order, k)
		}
		want[k] = append(want[k], e)
	}
	gotStreams := map[key][]event{}
	var gotOrder []key
	for _, e := range got {
		k := key{e.Conn, fmt.Sprint(e.Exchange)}
		if _, ok := gotStreams[k]; !ok {
			gotOrder = append(gotOrder, k)
		}
		gotStreams[k] = append(gotStreams[k], e)
	}
	used := map[key]bool{}
	for _, wk := range order {
		w := want[wk]
		var match key
		found := false
		for _, gk := range gotOrder {
			if used[gk] || gk.conn != wk.conn {
				continue
			}
			g := gotStreams[gk]
			if g[0].SHA256 == w[0].EventSHA256 {
				match, found = gk, true
				break
			}
		}
		if !found {
			t.Errorf("stream %s %s (req %s): %d events expected, no matching stream reported", wk.conn, w[0].Request, wk.id, len(w))
			continue
		}
		used[match] = true
		g := gotStreams[match]
		if len(g) != len(w) {
			t.Errorf("stream %s %s: %d events reported; want %d", wk.conn, w[0].Request, len(g), len(w))
		}
		for i := 0; i < min(len(g), len(w)); i++ {
			ge, we := g[i], w[i]
			if ge.SHA256 != we.EventSHA256 || ge.Type != we.Type || ge.RV != we.ResourceVersion || ge.Kind != we.Kind ||
				ge.Name != we.Name || ge.Namespace != we.Namespace || ge.APIVersion != we.APIVersion ||
				ge.Code != we.StatusCode || ge.Reason != we.StatusReason || ge.Message != we.StatusMessage {
				t.Errorf("stream %s %s event %d:\n got  %+v\n want %+v", wk.conn, w[0].Request, i, ge, we)
				break
			}
			if ge.Request != "" && ge.Request != "GET "+we.Request {
				t.Errorf("stream %s event %d: request %q; want %q", wk.conn, i, ge.Request, "GET "+we.Request)
			}
		}
	}
	for _, gk := range gotOrder {
		if !used[gk] {
			t.Errorf("stream %s exchange %s: %d events reported that no client received", gk.conn, gk.id, len(gotStreams[gk]))
		}
	}
}

// TestCorpus records the copies of the corpus scenarios in testdata and
// compares the events with what the real clients received. The last three
// are the repository's own (tools/mkcorpus): kubectl get -w
// (Tables), metadata-only informers (PartialObjectMetadata, JSON and
// protobuf), and a CBOR informer over TLS and HTTP/2.
func TestCorpus(t *testing.T) {
	for _, name := range []string{"basic-json", "multi-watch", "protobuf", "gone-410", "table-watch", "metadata-informer", "cbor-informer"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "corpus", name)
			sink, st := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeepSecrets: true, KeyLog: keyLogIn(t, dir)})
			got := events(t, sink.recs)
			truth := readTruth(t, filepath.Join(dir, "truth.jsonl"))
			compareTruth(t, truth, got)
			if st.Events != int64(len(truth)) {
				t.Errorf("Stats.Events = %d; want %d", st.Events, len(truth))
			}
			for _, r := range sink.recs {
				if a, ok := r.(*formats.Anomaly); ok {
					t.Logf("anomaly: %+v", a)
				}
			}
		})
	}
}

// keyLogIn returns the key log of a corpus scenario (nil when it has none).
func keyLogIn(t testing.TB, dir string) *tlsdec.KeyLog {
	f, err := os.Open(filepath.Join(dir, "keylog.txt"))
	if err != nil {
		return nil
	}
	defer f.Close()
	kl, err := tlsdec.ParseKeyLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return kl
}

// TestCorpusShared runs the same comparison on every scenario of the shared
// corpus that is plain HTTP (the large ones are not copied into testdata).
func TestCorpusShared(t *testing.T) {
	root := filepath.Join("..", "..", "shared", "corpus")
	for _, name := range []string{"large-objects", "midstream"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			if _, err := os.Stat(filepath.Join(dir, "capture.pcap")); err != nil {
				t.Skip("shared corpus not found")
			}
			if testing.Short() {
				t.Skip("large capture; skipped with -short")
			}
			sink, _ := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeepSecrets: true})
			compareTruth(t, readTruth(t, filepath.Join(dir, "truth.jsonl")), events(t, sink.recs))
		})
	}
}

// TestRedactSecrets records multi-watch (a watch on Secrets, JSON) with and
// without redaction: Secret events keep their length and framing but none
// of their values; every other event is untouched.
func TestRedactSecrets(t *testing.T) {
	path := filepath.Join("..", "testdata", "corpus", "multi-watch", "capture.pcap")
	kept, _ := recordFile(t, path, Options{KeepSecrets: true})
	red, _ := recordFile(t, path, Options{})
	var kf, rf []*formats.Frame
	for _, r := range kept.recs {
		if f, ok := r.(*formats.Frame); ok {
			kf = append(kf, f)
		}
	}
	for _, r := range red.recs {
		if f, ok := r.(*formats.Frame); ok {
			rf = append(rf, f)
		}
	}
	if len(kf) != len(rf) {
		t.Fatalf("%d frames redacted, %d kept", len(rf), len(kf))
	}
	var values [][]byte
	secrets := 0
	for i := range kf {
		m, _ := frame.Peek(frame.JSON, kf[i].Data)
		if m.Kind != "Secret" || m.Type == "BOOKMARK" {
			if string(kf[i].Data) != string(rf[i].Data) {
				t.Errorf("frame %d (%s %s) changed by redaction", i, m.Type, m.Kind)
			}
			continue
		}
		secrets++
		var ev struct {
			Object struct {
				Data map[string]string `json:"data"`
			} `json:"object"`
		}
		if err := json.Unmarshal(kf[i].Data, &ev); err != nil {
			t.Fatal(err)
		}
		for _, v := range ev.Object.Data {
			if len(v) >= 8 {
				values = append(values, []byte(v))
			}
		}
		if len(rf[i].Data) != len(kf[i].Data) || len(rf[i].Redacted) == 0 || !json.Valid(rf[i].Data) {
			t.Errorf("frame %d: redacted %d bytes (want %d), %d values, valid JSON %v",
				i, len(rf[i].Data), len(kf[i].Data), len(rf[i].Redacted), json.Valid(rf[i].Data))
		}
	}
	if secrets == 0 || len(values) == 0 {
		t.Fatalf("no Secret events with data in multi-watch (%d events)", secrets)
	}
	for _, r := range red.recs {
		var b []byte
		switch v := r.(type) {
		case *formats.Frame:
			b = v.Data
		case *formats.Body:
			b = v.Data
		}
		for _, v := range values {
			if len(b) > 0 && bytes.Contains(b, v) {
				t.Fatalf("secret value %q stored in a %T", v, r)
			}
		}
	}
	t.Logf("%d Secret events redacted, %d values checked", secrets, len(values))
}
