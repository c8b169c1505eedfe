package formats

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// TestEvents: a session's watch events come out in file order with their
// connection, request and peeked metadata, and encode as the events line
// format.
func TestEvents(t *testing.T) {
	recs := session(10, 200, time.Millisecond)
	data := encode(t, recs, WriterOptions{}, false)
	f, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var frames []*Frame
	for _, r := range recs {
		if fr, ok := r.(*Frame); ok {
			frames = append(frames, fr)
		}
	}
	var evs []*Event
	for ev, err := range f.Events() {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != len(frames) {
		t.Fatalf("%d events; want %d", len(evs), len(frames))
	}
	for i, ev := range evs {
		fr := frames[i]
		wantConn, wantReq, wantFormat := "127.0.0.1:50000->127.0.0.1:8001", "GET /api/v1/namespaces/demo/configmaps?watch=true", frame.JSON
		if fr.Exchange == 2 {
			wantConn, wantReq, wantFormat = "127.0.0.1:50001->127.0.0.1:8001", "GET /api/v1/configmaps?watch=1", frame.Protobuf
		}
		if ev.Exchange != fr.Exchange || ev.Seq != fr.Seq || ev.Time != fr.Time || !bytes.Equal(ev.Data, fr.Data) ||
			ev.Conn != wantConn || ev.Request != wantReq || ev.Format != wantFormat {
			t.Errorf("event %d = %+v; want frame %+v on %s, %q, %v", i, ev, fr, wantConn, wantReq, wantFormat)
		}
		// The protobuf events of session() hold no real object: Peek
		// cannot read them, and Meta stays zero.
		if want := eventTypes[i%len(eventTypes)]; ev.Format == frame.JSON && ev.Meta.Type != want || ev.Format == frame.Protobuf && ev.Meta != (frame.Meta{}) {
			t.Errorf("event %d: meta %+v; want type %q", i, ev.Meta, want)
		}
	}

	// The line format.
	var b bytes.Buffer
	enc := NewEventEncoder(&b, true)
	if err := enc.Encode(evs[0]); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatalf("line %q: %v", b.Bytes(), err)
	}
	sum := sha256.Sum256(evs[0].Data)
	want := map[string]any{"conn": evs[0].Conn, "exchange": 1.0, "request": evs[0].Request, "seq": 0.0,
		"time": time.Unix(0, evs[0].Time).UTC().Format(TimeFormat), "type": "ADDED",
		"size": float64(len(evs[0].Data)), "sha256": hex.EncodeToString(sum[:]), "format": "json"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("line %s = %v; want %v", k, line[k], v)
		}
	}
	if _, ok := line["event"].(map[string]any); !ok || !strings.HasSuffix(b.String(), "}\n") {
		t.Errorf("line with data %q: no event object", b.String())
	}
	l := evs[1].Line(true)
	if l.Format != "protobuf" || l.EventBase64 == "" || l.Event != nil {
		t.Errorf("protobuf line %+v: want event_base64 only", l)
	}
}

func TestEventFilter(t *testing.T) {
	m := frame.Meta{Type: "ADDED", Kind: "ConfigMap", Namespace: "demo", Name: "cm-1"}
	for _, tt := range []struct {
		f    EventFilter
		want bool
	}{
		{EventFilter{}, true},
		{EventFilter{Types: []string{"added"}}, true},
		{EventFilter{Types: []string{"DELETED", "ADDED"}, Kinds: []string{"configmap"}}, true},
		{EventFilter{Types: []string{"DELETED"}}, false},
		{EventFilter{Namespaces: []string{"other"}}, false},
		{EventFilter{Names: []string{"cm-1"}, Namespaces: []string{"demo"}}, true},
	} {
		if got := tt.f.Match(m); got != tt.want {
			t.Errorf("%+v.Match(%+v) = %v; want %v", tt.f, m, got, tt.want)
		}
	}
}
