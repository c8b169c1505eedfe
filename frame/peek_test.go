package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// splitAll splits a whole body and returns copies of the events' Data.
func splitAll(t testing.TB, f Format, body []byte) [][]byte {
	t.Helper()
	r := split(NewSplitter(f, Options{}), [][]byte{body}, false)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var out [][]byte
	for _, ev := range r.events {
		out = append(out, ev.Data)
	}
	return out
}

func TestPeekFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "watch" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f := fx.format()
			truth := truthFor(t, fx.Name)
			evs := splitAll(t, f, fx.body(t))
			if len(evs) != len(truth) {
				t.Fatalf("%d events; want %d", len(evs), len(truth))
			}
			initialEnd := 0
			for i, data := range evs {
				m, err := Peek(f, data)
				if err != nil {
					t.Fatalf("Peek(event %d) error: %v", i, err)
				}
				w := truth[i]
				want := Meta{Type: w.Type, APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name,
					ResourceVersion: w.ResourceVersion, Code: w.StatusCode, Reason: w.StatusReason, Message: w.StatusMessage,
					InitialEventsEnd: m.InitialEventsEnd}
				if m != want {
					t.Fatalf("Peek(event %d) = %+v; want %+v", i, m, want)
				}
				// One reading: PeekEvent's Meta is Peek's, a Table's
				// included.
				pm, obj, err := PeekEvent(f, data)
				_, _, wantObj, werr := EventObject(f, data)
				if err != nil || werr != nil || pm != m || !bytes.Equal(obj, wantObj) {
					t.Fatalf("PeekEvent(event %d) = %+v, %d bytes, %v; want Peek's %+v and EventObject's %d bytes (%v)",
						i, pm, len(obj), err, m, len(wantObj), werr)
				}
				for _, pf := range []Format{f, Unknown} {
					if typ, ok := PeekType(pf, data); !ok || string(typ) != w.Type {
						t.Fatalf("PeekType(%v, event %d) = %q, %v; want %q", pf, i, typ, ok, w.Type)
					}
				}
				if m.InitialEventsEnd {
					initialEnd++
					if m.Type != "BOOKMARK" {
						t.Errorf("event %d: InitialEventsEnd on a %s event", i, m.Type)
					}
				}
			}
			// Only streaming lists (multi-watch A, the informers of
			// metadata-informer and cbor-informer) end their initial
			// events with the annotated bookmark.
			if wantEnd := map[bool]int{true: 1, false: 0}[strings.Contains(fx.Request, "sendInitialEvents=true")]; initialEnd != wantEnd {
				t.Errorf("%d events with InitialEventsEnd; want %d", initialEnd, wantEnd)
			}
		})
	}
}

func TestPeekJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Meta
		err  bool
	}{
		{"object first", `{"object":{"metadata":{"resourceVersion":"9","name":"n","namespace":"ns"},"apiVersion":"v1","kind":"Pod"},"type":"ADDED"}`,
			Meta{Type: "ADDED", APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "n", ResourceVersion: "9"}, false},
		{"unknown fields skipped", `{"x":[1,{"type":"ERROR"}],"type":"MODIFIED","object":{"spec":{"kind":"no","metadata":{"name":"no"}},"kind":"K","metadata":{"labels":{"name":"no"},"name":"yes","annotations":{"a":"b"}}},"y":null}`,
			Meta{Type: "MODIFIED", Kind: "K", Name: "yes"}, false},
		{"initial events end", `{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			Meta{Type: "BOOKMARK", Kind: "ConfigMap", APIVersion: "v1", ResourceVersion: "5", InitialEventsEnd: true}, false},
		{"initial events end false", `{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"false","x":1}}}}`,
			Meta{Type: "BOOKMARK"}, false},
		{"status", `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}`,
			Meta{Type: "ERROR", Kind: "Status", APIVersion: "v1", Code: 410, Reason: "Expired", Message: "too old resource version: 1 (2)"}, false},
		{"status fields only for ERROR", `{"type":"ADDED","object":{"kind":"Foo","code":3,"reason":"r","message":"m"}}`,
			Meta{Type: "ADDED", Kind: "Foo"}, false},
		{"escaped strings", `{"type":"ADDED","object":{"metadata":{"name":"a\"b\u00e9"}}}`, Meta{Type: "ADDED", Name: "a\"bé"}, false},
		{"null object", `{"type":"DELETED","object":null}`, Meta{Type: "DELETED"}, false},
		{"not an object", `[1]`, Meta{}, true},
		{"type not a string", `{"type":5}`, Meta{}, true},
		{"truncated", `{"type":"ADDED","object":{"kind":"Po`, Meta{}, true},
		{"garbage", "\x00\xff{", Meta{}, true},
		{"empty", ``, Meta{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Peek(JSON, []byte(tt.in))
			if tt.err {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Peek(%q) = %+v, %v; want an error wrapping ErrInvalid", tt.in, m, err)
				}
				return
			}
			if err != nil || m != tt.want {
				t.Fatalf("Peek(%q) = %+v, %v; want %+v", tt.in, m, err, tt.want)
			}
		})
	}
}

func TestPeekProtobufErrors(t *testing.T) {
	fx := fixtureNamed(t, "protobuf-p1-watch")
	ev := splitAll(t, Protobuf, fx.body(t))[0]
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"truncated", ev[:len(ev)/2]},
		{"bad tag", []byte{0x0a, 0x05, 'A', 'D', 'D', 'E', 'D', 0x07}},
		{"no object", ev[:7]},
		{"type is varint", []byte{0x08, 0x01, 0x12, 0x00}},
		{"no magic", []byte{0x0a, 0x01, 'X', 0x12, 0x04, 0x0a, 0x02, 'k', '8'}},
		{"json", []byte(`{"type":"ADDED"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := Peek(Protobuf, tt.in); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Peek(%x) = %+v, %v; want an error wrapping ErrInvalid", tt.in, m, err)
			}
		})
	}
	if _, err := Peek(CBOR, ev); !errors.Is(err, ErrInvalid) {
		t.Errorf("Peek(CBOR) = %v; want ErrInvalid", err)
	}
}

func TestPeekProtobufInitialEventsEnd(t *testing.T) {
	m, err := Peek(Protobuf, Bookmark(Protobuf, "v1", "ConfigMap", "77", true))
	want := Meta{Type: "BOOKMARK", APIVersion: "v1", Kind: "ConfigMap", ResourceVersion: "77", InitialEventsEnd: true}
	if err != nil || m != want {
		t.Fatalf("Peek(Bookmark) = %+v, %v; want %+v", m, err, want)
	}
}

func TestFormatOf(t *testing.T) {
	tests := []struct {
		ct    string
		watch bool
		want  Format
	}{
		{"application/json", true, JSON},
		{"application/json", false, Unknown},
		{"application/json;stream=watch", false, JSON},
		{"Application/JSON; charset=utf-8", true, JSON},
		{"application/json; Stream=\"Watch\"", false, JSON},
		{"application/vnd.kubernetes.protobuf;stream=watch", false, Protobuf},
		{"application/vnd.kubernetes.protobuf;stream=watch", true, Protobuf},
		{"application/vnd.kubernetes.protobuf; charset=x ; STREAM=watch", false, Protobuf},
		{"application/vnd.kubernetes.protobuf", true, Protobuf},
		{"application/vnd.kubernetes.protobuf", false, Unknown},
		{"application/cbor-seq", false, CBOR},
		{"application/cbor-seq", true, CBOR},
		{"application/cbor;stream=watch", false, CBOR},
		{"application/cbor", true, CBOR},
		{"application/cbor", false, Unknown},
		{"application/yaml", true, Unknown},
		{"text/plain", true, Unknown},
		{"", true, Unknown},
		{";;;=", true, Unknown},
	}
	for _, tt := range tests {
		if got := FormatOf(tt.ct, tt.watch); got != tt.want {
			t.Errorf("FormatOf(%q, %v) = %v; want %v", tt.ct, tt.watch, got, tt.want)
		}
	}
}

func TestResponseFormat(t *testing.T) {
	tests := []struct {
		status int
		ct     string
		watch  bool
		want   Format
	}{
		{200, "application/json", true, JSON},
		{200, "application/json", false, Unknown},
		{200, "application/json;stream=watch", false, JSON},
		{200, "Application/JSON; charset=utf-8", true, JSON},
		{200, "application/vnd.kubernetes.protobuf;stream=watch", true, Protobuf},
		{200, "application/vnd.kubernetes.protobuf; STREAM=\"watch\"", false, Protobuf},
		// A protobuf watch always says so: without the parameter the body
		// is one object (a Status), whatever the request asked.
		{200, "application/vnd.kubernetes.protobuf", true, Unknown},
		{200, "application/cbor-seq", true, CBOR},
		{200, "application/cbor-seq", false, CBOR},
		{200, "application/cbor;stream=watch", true, CBOR},
		{200, "application/cbor", true, Unknown},
		// Error answers to a watch request are one Status, not a stream.
		{404, "application/vnd.kubernetes.protobuf", true, Unknown},
		{404, "application/json", true, Unknown},
		{404, "application/cbor", true, Unknown},
		{410, "application/json", true, Unknown},
		{403, "application/vnd.kubernetes.protobuf;stream=watch", true, Unknown},
		{500, "application/cbor-seq", true, Unknown},
		{201, "application/json", true, Unknown},
		{0, "application/json", true, Unknown},
		{200, "application/yaml", true, Unknown},
		{200, "text/plain", true, Unknown},
		{200, "", true, Unknown},
	}
	for _, tt := range tests {
		if got := ResponseFormat(tt.status, tt.ct, tt.watch); got != tt.want {
			t.Errorf("ResponseFormat(%d, %q, %v) = %v; want %v", tt.status, tt.ct, tt.watch, got, tt.want)
		}
	}
}

func TestSniff(t *testing.T) {
	var pb []byte
	pb = binary.BigEndian.AppendUint32(pb, 3)
	tests := []struct {
		name string
		in   []byte
		want Format
	}{
		{"json watch", fixtureNamed(t, "basic-json-watch").body(t)[5000:9000], JSON},
		{"json error", fixtureNamed(t, "gone-410-g1-error").body(t), JSON},
		{"protobuf watch", fixtureNamed(t, "protobuf-p1-watch").body(t)[5000:9000], Protobuf},
		{"json list", fixtureNamed(t, "basic-json-list").body(t), Unknown},
		{"protobuf list", fixtureNamed(t, "protobuf-p1-list").body(t), Unknown},
		{"type inside an object", []byte(`"conditions":[{"type":"ADDED"}]`), Unknown},
		{"short", []byte(`{"type":"ADD`), Unknown},
		{"bare length", pb, Unknown},
		{"empty", nil, Unknown},
	}
	for _, tt := range tests {
		if got := Sniff(tt.in); got != tt.want {
			t.Errorf("Sniff(%s) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestPeekType(t *testing.T) {
	protoEvent := func(typ string, obj []byte) string {
		return string(WatchEvent(Protobuf, typ, "v1", "ConfigMap", obj))
	}
	tests := []struct {
		data   string
		f      Format
		want   string
		wantOK bool
	}{
		{`{"type":"ADDED","object":{}}`, JSON, "ADDED", true},
		{` {"object":{"type":"NOT","a":[1,{"type":"X"}],"s":"}\"{"},"type" : "MODIFIED"}`, JSON, "MODIFIED", true},
		{`{"object":{"type":"NOT"}}`, JSON, "", false},
		{`{"ty\u0070e":"B\u004fOKMARK"}`, JSON, "BOOKMARK", true},
		{`{"n":-1.5e3,"t":true,"type":"DELETED"}`, JSON, "DELETED", true},
		{`{"type":1}`, JSON, "", false},
		{`{"type":"ADD`, JSON, "", false},
		{`[]`, JSON, "", false},
		{``, JSON, "", false},
		{`{"type":"ERROR"}`, Unknown, "ERROR", true},
		{protoEvent("ADDED", []byte("obj")), Protobuf, "ADDED", true},
		{protoEvent("DELETED", nil), Unknown, "DELETED", true},
		{"\x12\x02ab\x0a\x05ERROR", Protobuf, "ERROR", true},
		{"\x0a\x09ADD", Protobuf, "", false},
		{"\xff", Protobuf, "", false},
		{`{"type":"ADDED"}`, CBOR, "", false},
	}
	for _, tt := range tests {
		got, ok := PeekType(tt.f, []byte(tt.data))
		if string(got) != tt.want || ok != tt.wantOK {
			t.Errorf("PeekType(%v, %q) = %q, %v; want %q, %v", tt.f, tt.data, got, ok, tt.want, tt.wantOK)
		}
	}
	for _, f := range []Format{JSON, Unknown} {
		ev := []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a"}}}`)
		if n := testing.AllocsPerRun(100, func() { PeekType(f, ev) }); n != 0 {
			t.Errorf("PeekType(%v) allocates %v times; want 0", f, n)
		}
	}
	pb := []byte(protoEvent("MODIFIED", []byte("obj")))
	if n := testing.AllocsPerRun(100, func() { PeekType(Protobuf, pb) }); n != 0 {
		t.Errorf("PeekType(Protobuf) allocates %v times; want 0", n)
	}
}
