package diff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// t0 is the capture time synthetic sessions start at.
const t0 = int64(1_800_000_000_000_000_000)

// sx is one exchange of a synthetic session.
type sx struct {
	method, target string
	ctype          string // request Content-Type
	body           []byte // request body
	status         int    // default 200
	respType       string // response Content-Type; default application/json
	resp           []byte // opaque response body
	events         [][]byte
	format         frame.Format  // of events; default JSON when events are set
	at             time.Duration // request time since t0; default: one second after the previous exchange
	gaps           []time.Duration
	conn           uint64
}

// writeSession writes a session of the given exchanges and returns its path.
func writeSession(t testing.TB, name string, exs ...sx) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := writeSessionFile(path, exs...); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeSessionFile(path string, exs ...sx) error { return writeSessionNote(path, "", exs...) }

// writeSessionNote is writeSessionFile with the Summary's note (a
// perturbed run's lists its perturbations).
func writeSessionNote(path, note string, exs ...sx) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		return err
	}
	var werr error
	must := func(r formats.Record) {
		if werr == nil {
			werr = w.Write(r)
		}
	}
	must(&formats.Meta{Tool: "wtrace test", Source: "synthetic"})
	conns := map[uint64]bool{}
	last := time.Duration(-time.Second)
	for i, x := range exs {
		id := int64(i)
		at := x.at
		if at == 0 {
			at = last + time.Second
		}
		last = at
		tm := t0 + int64(at)
		if !conns[x.conn] {
			conns[x.conn] = true
			must(&formats.Conn{ID: x.conn, Time: tm, Client: fmt.Sprintf("127.0.0.1:%d", 50000+x.conn), Server: "127.0.0.1:8001", Proto: "http/1.1"})
		}
		method := x.method
		if method == "" {
			method = "GET"
		}
		var hdr []formats.Header
		if x.ctype != "" {
			hdr = append(hdr, formats.Header{Name: "Content-Type", Value: x.ctype})
		}
		must(&formats.Request{Exchange: id, Conn: x.conn, Time: tm, Method: method, Target: x.target, Proto: "HTTP/1.1", Header: hdr})
		if len(x.body) > 0 {
			must(&formats.Body{Exchange: id, Dir: formats.ClientToServer, Time: tm, Data: x.body})
		}
		must(&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: tm, Size: int64(len(x.body))})
		status := x.status
		if status == 0 {
			status = 200
		}
		rt := x.respType
		if rt == "" {
			rt = "application/json"
		}
		f := x.format
		if f == 0 && x.events != nil {
			f = frame.JSON
		}
		if f == frame.Protobuf && x.respType == "" {
			rt = "application/vnd.kubernetes.protobuf;stream=watch"
		}
		resp := tm + int64(time.Millisecond)
		must(&formats.Response{Exchange: id, Time: resp, Proto: "HTTP/1.1", Status: status,
			Header: []formats.Header{{Name: "Content-Type", Value: rt}}, Framing: formats.FramingChunked, Events: f})
		et := resp
		var off int64
		for j, ev := range x.events {
			gap := 100 * time.Millisecond
			if j < len(x.gaps) {
				gap = x.gaps[j]
			}
			et += int64(gap)
			pre := []byte("\n")
			if f == frame.Protobuf {
				pre = []byte{byte(len(ev) >> 24), byte(len(ev) >> 16), byte(len(ev) >> 8), byte(len(ev))}
			} else if j == 0 {
				pre = nil
			}
			must(&formats.Frame{Exchange: id, Seq: int64(j), Time: et, Offset: off, Pre: pre, Data: ev})
			off += int64(len(pre) + len(ev))
		}
		if len(x.resp) > 0 {
			must(&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: et, Data: x.resp})
			off += int64(len(x.resp))
		}
		must(&formats.End{Exchange: id, Dir: formats.ServerToClient, Time: et + int64(time.Millisecond), Size: off})
	}
	must(&formats.Summary{Time: t0 + int64(last) + int64(time.Minute), Exchanges: int64(len(exs)), Note: note})
	if werr != nil {
		return werr
	}
	return w.Close()
}

// obj is a ConfigMap as JSON, as the apiserver writes it, with the fields
// that differ from run to run derived from rv.
type obj struct {
	name, ns    string
	rv          int
	annotations map[string]string
	data        map[string]string
	labels      map[string]string
}

func (o obj) value() map[string]any {
	md := map[string]any{
		"name":              o.name,
		"namespace":         o.ns,
		"uid":               fmt.Sprintf("uid-%d", o.rv),
		"resourceVersion":   fmt.Sprint(o.rv),
		"creationTimestamp": fmt.Sprintf("2026-11-21T12:00:%02dZ", o.rv%60),
		"managedFields": []any{map[string]any{"manager": "test", "operation": "Update", "apiVersion": "v1",
			"time": fmt.Sprintf("2026-11-21T12:01:%02dZ", o.rv%60)}},
	}
	if o.annotations != nil {
		md["annotations"] = o.annotations
	}
	if o.labels != nil {
		md["labels"] = o.labels
	}
	v := map[string]any{"kind": "ConfigMap", "apiVersion": "v1", "metadata": md}
	if o.data != nil {
		v["data"] = o.data
	}
	return v
}

func (o obj) json() []byte {
	b, err := json.Marshal(o.value())
	if err != nil {
		panic(err)
	}
	return b
}

// ev is a JSON watch event of o.
func ev(typ string, o obj) []byte {
	return frame.WatchEvent(frame.JSON, typ, "v1", "ConfigMap", o.json())
}

const cmPath = "/api/v1/namespaces/demo/configmaps"

// mustDiff compares a and b.
func mustDiff(t *testing.T, a, b string, opts Options) *Report {
	t.Helper()
	rep, err := Sessions(a, b, opts)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	return rep
}

// all returns every listed difference.
func all(r *Report) []Difference {
	var ds []Difference
	for _, g := range r.Groups {
		ds = append(ds, g.Differences...)
	}
	return ds
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
