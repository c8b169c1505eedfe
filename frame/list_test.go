package frame

import (
	"github.com/wtrace/wtrace/internal/jsonscan"

	"bytes"
	"errors"
	"strings"
	"testing"
)

// watchBody frames events as the apiserver does.
func watchBody(f Format, evs [][]byte) []byte {
	var b []byte
	for _, ev := range evs {
		b = AppendEvent(b, f, ev)
	}
	return b
}

// listToEvents turns each LIST item into an ADDED event, checks it with
// Peek and EventObject, and returns the events and the objects.
func listToEvents(t *testing.T, f Format, l List) (evs, objs [][]byte) {
	t.Helper()
	kind := strings.TrimSuffix(l.Kind, "List")
	for i, item := range l.Items {
		ev := WatchEvent(f, "ADDED", l.APIVersion, kind, item)
		evs = append(evs, ev)
		m, err := Peek(f, ev)
		if err != nil || m.Type != "ADDED" || m.Kind != kind || m.APIVersion != l.APIVersion || m.Name == "" {
			t.Fatalf("Peek(WatchEvent(item %d)) = %+v, %v", i, m, err)
		}
		av, k, obj, err := EventObject(f, ev)
		if err != nil || av != l.APIVersion || k != kind {
			t.Fatalf("EventObject(WatchEvent(item %d)) = %q, %q, %v", i, av, k, err)
		}
		objs = append(objs, obj)
	}
	return evs, objs
}

// TestListRoundTrip splits real LIST bodies, turns the items into events,
// takes the objects back out and rebuilds the body: byte for byte the
// apiserver's when the list has no continue token.
func TestListRoundTrip(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "list" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f, body := fx.format(), fx.body(t)
			l, err := ListItems(f, body)
			if err != nil {
				t.Fatalf("ListItems: %v", err)
			}
			if l.APIVersion != "v1" || !strings.HasSuffix(l.Kind, "List") || l.ResourceVersion == "" || len(l.Items) == 0 {
				t.Fatalf("ListItems = %s %s rv %q, %d items", l.APIVersion, l.Kind, l.ResourceVersion, len(l.Items))
			}
			if (l.Continue != "") != strings.Contains(fx.Name, "continue") {
				t.Errorf("Continue = %q", l.Continue)
			}
			for i, item := range l.Items {
				if !within(item, body) {
					t.Errorf("item %d does not alias the body", i)
				}
			}
			evs, objs := listToEvents(t, f, l)
			// The events split back out of a watch body.
			r := split(NewSplitter(f, Options{}), [][]byte{watchBody(f, evs)}, false)
			if r.err != nil || len(r.events) != len(evs) {
				t.Fatalf("splitting the built watch body: %d events, %v; want %d", len(r.events), r.err, len(evs))
			}
			rebuilt := BuildList(f, l.APIVersion, l.Kind, l.ResourceVersion, objs)
			// The apiserver writes CBOR maps in no fixed order
			// (EncodeNondeterministic): only JSON and protobuf are
			// compared byte for byte; TestK8sListToWatch decodes all.
			if l.Continue == "" && f != CBOR && !bytes.Equal(rebuilt, body) {
				t.Errorf("BuildList differs from the apiserver's body:\n got %q\nwant %q", rebuilt[:min(300, len(rebuilt))], body[:min(300, len(body))])
			}
			l2, err := ListItems(f, rebuilt)
			if err != nil || len(l2.Items) != len(l.Items) || l2.ResourceVersion != l.ResourceVersion {
				t.Fatalf("ListItems(BuildList) = %d items rv %q, %v", len(l2.Items), l2.ResourceVersion, err)
			}
			for i := range l.Items {
				if !bytes.Equal(l2.Items[i], l.Items[i]) {
					t.Errorf("item %d changed in the round trip", i)
				}
			}
		})
	}
}

// TestEventObjectRoundTrip takes every real event apart and builds it again.
func TestEventObjectRoundTrip(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "watch" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			f := fx.format()
			truth := truthFor(t, fx.Name)
			for i, data := range splitAll(t, f, fx.body(t)) {
				av, kind, obj, err := EventObject(f, data)
				if err != nil {
					t.Fatalf("EventObject(event %d): %v", i, err)
				}
				if av != truth[i].APIVersion || kind != truth[i].Kind {
					t.Errorf("EventObject(event %d) = %s %s; want %s %s", i, av, kind, truth[i].APIVersion, truth[i].Kind)
				}
				// The truth hashes the object as on the wire: JSON the
				// "object" value, protobuf the k8s\x00 envelope.
				wire := obj
				if f == Protobuf {
					wire = appendUnknown(nil, av, kind, obj)
				}
				if sha(wire) != truth[i].ObjectSHA256 {
					t.Errorf("event %d: object sha256 %s; want %s", i, sha(wire), truth[i].ObjectSHA256)
				}
				ev := WatchEvent(f, truth[i].Type, av, kind, obj)
				if f == CBOR {
					// Members in another order than the apiserver's
					// (which has none): the same type, the same object.
					_, _, obj2, err := EventObject(f, ev)
					if m, _ := Peek(f, ev); err != nil || m.Type != truth[i].Type || !bytes.Equal(obj2, obj) {
						t.Fatalf("WatchEvent(EventObject(event %d)): type %q, object equal %v, %v", i, m.Type, bytes.Equal(obj2, obj), err)
					}
					continue
				}
				if !bytes.Equal(ev, data) {
					t.Fatalf("WatchEvent(EventObject(event %d)) differs:\n got %q\nwant %q", i, ev, data)
				}
			}
		})
	}
}

func TestWatchEventJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"metadata":{"name":"a"}}`, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}}`},
		{`{"kind":"X","metadata":{}}`, `{"type":"ADDED","object":{"apiVersion":"v1","kind":"X","metadata":{}}}`},
		{`{"apiVersion":"v2","kind":"X"}`, `{"type":"ADDED","object":{"apiVersion":"v2","kind":"X"}}`},
		{`{}`, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1"}}`},
		{` { } `, `{"type":"ADDED","object": {"kind":"ConfigMap","apiVersion":"v1" } }`},
		{`not json`, `{"type":"ADDED","object":not json}`},
		{`{"a":1`, `{"type":"ADDED","object":{"a":1}`},
	}
	for _, tt := range tests {
		if got := WatchEvent(JSON, "ADDED", "v1", "ConfigMap", []byte(tt.in)); string(got) != tt.want {
			t.Errorf("WatchEvent(JSON, %q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	if got := WatchEvent(JSON, "ADDED", "v1", "", []byte(`{}`)); string(got) != `{"type":"ADDED","object":{"apiVersion":"v1"}}` {
		t.Errorf("WatchEvent without kind = %q", got)
	}
	if got := WatchEvent(JSON, "A<B", "v1", "K", []byte(`{"kind":"K","apiVersion":"v1"}`)); string(got) != `{"type":"A\u003cB","object":{"kind":"K","apiVersion":"v1"}}` {
		t.Errorf("WatchEvent escaping = %q", got)
	}
	if got := WatchEvent(Unknown, "ADDED", "v1", "K", []byte(`{}`)); got != nil {
		t.Errorf("WatchEvent(Unknown) = %q; want nil", got)
	}
}

func TestBookmark(t *testing.T) {
	const brief = `{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"123","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}`
	if got := Bookmark(JSON, "v1", "ConfigMap", "123", true); string(got) != brief {
		t.Errorf("Bookmark(JSON, initial-events-end) = %s; want %s", got, brief)
	}
	// The apiserver's own bookmarks, byte for byte.
	for _, name := range []string{"multi-watch-f-watch", "protobuf-p1-watch"} {
		fx := fixtureNamed(t, name)
		f := fx.format()
		n := 0
		for i, data := range splitAll(t, f, fx.body(t)) {
			w := truthFor(t, name)[i]
			if w.Type != "BOOKMARK" {
				continue
			}
			n++
			if got := Bookmark(f, w.APIVersion, w.Kind, w.ResourceVersion, false); !bytes.Equal(got, data) {
				t.Errorf("%s: Bookmark(%s, %s) = %q; want %q", name, w.Kind, w.ResourceVersion, got, data)
			}
		}
		if n == 0 {
			t.Errorf("%s: no bookmark", name)
		}
	}
	for _, f := range []Format{JSON, Protobuf, CBOR} {
		pm, err := Peek(f, Bookmark(f, "v1", "ConfigMap", "123", true))
		if want := (Meta{Type: "BOOKMARK", APIVersion: "v1", Kind: "ConfigMap", ResourceVersion: "123", InitialEventsEnd: true}); err != nil || pm != want {
			t.Errorf("Peek(Bookmark(%v)) = %+v, %v; want %+v", f, pm, err, want)
		}
	}
	if Bookmark(Unknown, "v1", "K", "1", false) != nil {
		t.Errorf("Bookmark(Unknown) != nil")
	}
}

func TestListItemsErrors(t *testing.T) {
	pb := fixtureNamed(t, "protobuf-p1-list").body(t)
	tests := []struct {
		name string
		f    Format
		in   string
	}{
		{"json empty", JSON, ""},
		{"json array", JSON, "[]"},
		{"json item not object", JSON, `{"items":[1]}`},
		{"json bad items", JSON, `{"items":{}}`},
		{"json truncated", JSON, `{"kind":"ConfigMapList","items":[{"a":1}`},
		{"json trailing", JSON, `{"items":[]} x`},
		{"json kind not string", JSON, `{"kind":1,"items":[]}`},
		{"json mismatched", JSON, `{"items":[{"a":[}]}`},
		{"json deep", JSON, `{"items":[` + strings.Repeat("[", jsonscan.MaxDepth+1) + `]}`},
		{"protobuf no magic", Protobuf, "\x0a\x00"},
		{"protobuf truncated", Protobuf, string(pb[:len(pb)/2])},
		{"protobuf json content", Protobuf, "k8s\x00\x22\x10application/json"},
		{"protobuf items varint", Protobuf, "k8s\x00\x12\x02\x10\x01"},
		{"cbor", CBOR, "{}"},
	}
	for _, tt := range tests {
		if l, err := ListItems(tt.f, []byte(tt.in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ListItems(%s) = %+v, %v; want ErrInvalid", tt.name, l, err)
		}
	}
	// Fine: null items, escaped keys and values, whitespace.
	l, err := ListItems(JSON, []byte(` {"kind":"XList", "metadata" : {"continue":"c\u0031"},"items":null} `))
	if err != nil || l.Kind != "XList" || l.Continue != "c1" || len(l.Items) != 0 {
		t.Errorf("ListItems(null items) = %+v, %v", l, err)
	}
	l, err = ListItems(JSON, []byte(`{"\u006bind":"K","items":[ {} , {"a":[1,"]"]} ]}`))
	if err != nil || l.Kind != "K" || len(l.Items) != 2 || string(l.Items[1]) != `{"a":[1,"]"]}` {
		t.Errorf("ListItems(escaped key) = %+v, %v", l, err)
	}
}

func TestBuildListEmpty(t *testing.T) {
	for _, f := range []Format{JSON, Protobuf, CBOR} {
		b := BuildList(f, "v1", "ConfigMapList", "42", nil)
		l, err := ListItems(f, b)
		if err != nil || l.ResourceVersion != "42" || l.Kind != "ConfigMapList" || len(l.Items) != 0 {
			t.Errorf("ListItems(BuildList(%v, empty)) = %+v, %v", f, l, err)
		}
	}
	if got := string(BuildList(JSON, "v1", "ConfigMapList", "42", nil)); got != `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[]}`+"\n" {
		t.Errorf("BuildList(JSON, empty) = %q", got)
	}
	// Items keep kind/apiVersion unless they match the list's.
	got := string(BuildList(JSON, "v1", "ConfigMapList", "1", [][]byte{
		[]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}`),
		[]byte(`{"kind":"ConfigMap","apiVersion":"v1"}`),
		[]byte(`{"kind":"Other","apiVersion":"v1","metadata":{}}`),
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap"}`),
	}))
	if want := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{}},{},{"kind":"Other","apiVersion":"v1","metadata":{}},{"apiVersion":"v1","kind":"ConfigMap"}]}` + "\n"; got != want {
		t.Errorf("BuildList = %s; want %s", got, want)
	}
	if BuildList(Unknown, "v1", "L", "1", nil) != nil {
		t.Errorf("BuildList(Unknown) != nil")
	}
}

func TestEventObjectErrors(t *testing.T) {
	tests := []struct {
		f  Format
		in string
	}{
		{JSON, `{"type":"ADDED"}`},
		{JSON, `{"type":"ADDED","object":[1]}`},
		{JSON, `{"type":"ADDED","object":{"kind":1}}`},
		{JSON, `{"type":"ADDED","object":{}`},
		{Protobuf, "\x0a\x05ADDED"},
		{Protobuf, "\x0a\x05ADDED\x12\x03\x0a\x01k"},
		{CBOR, ""},
	}
	for _, tt := range tests {
		if _, _, _, err := EventObject(tt.f, []byte(tt.in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("EventObject(%v, %q) = %v; want ErrInvalid", tt.f, tt.in, err)
		}
	}
}
