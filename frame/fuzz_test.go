package frame

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/internal/cborscan"
)

var update = flag.Bool("update", false, "rewrite the testdata/fuzz seed corpora from the fixtures")

// Fuzz modes (bits of the mode argument).
const (
	fuzzSmallLimit    = 1 << iota // limit 1 + 8*(mode>>3)
	fuzzResyncStart               // Options.Resync
	fuzzResyncOnError             // Resync after each error and go on
)

// cutPieces cuts data into pieces of 1+cuts[i] bytes, cycling through cuts.
func cutPieces(data, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return fixed(1)(data)
	}
	var ps [][]byte
	for i := 0; len(data) > 0; i++ {
		k := min(1+int(cuts[i%len(cuts)]), len(data))
		ps = append(ps, data[:k])
		data = data[k:]
	}
	return ps
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// fuzzSplit checks that splitting data in pieces gives what splitting it in
// one piece gives, and that every byte is accounted for.
func fuzzSplit(t *testing.T, f Format, data, cuts []byte, mode uint8) {
	opts := Options{Resync: mode&fuzzResyncStart != 0}
	if mode&fuzzSmallLimit != 0 {
		opts.MaxEventSize = 1 + 8*int(mode>>3)
	}
	resyncOnErr := mode&fuzzResyncOnError != 0
	r1 := split(NewSplitter(f, opts), [][]byte{data}, resyncOnErr)
	r2 := split(NewSplitter(f, opts), cutPieces(data, cuts), resyncOnErr)
	if errString(r1.err) != errString(r2.err) {
		t.Fatalf("error: one-shot %v; pieces %v", r1.err, r2.err)
	}
	if len(r1.events) != len(r2.events) {
		t.Fatalf("events: one-shot %d; pieces %d", len(r1.events), len(r2.events))
	}
	for i := range r1.events {
		a, b := r1.events[i], r2.events[i]
		if a.Offset != b.Offset || !bytes.Equal(a.Pre, b.Pre) || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("event %d: one-shot %d %q %q; pieces %d %q %q", i, a.Offset, a.Pre, a.Data, b.Offset, b.Pre, b.Data)
		}
	}
	if !bytes.Equal(r1.tail, r2.tail) || r1.skipped != r2.skipped {
		t.Fatalf("tail/skipped: one-shot %q/%d; pieces %q/%d", r1.tail, r1.skipped, r2.tail, r2.skipped)
	}
	limit := opts.MaxEventSize
	if limit == 0 {
		limit = MaxEventSize
	}
	var sum int64
	for i, ev := range r1.events {
		sum += int64(len(ev.Pre) + len(ev.Data))
		end := ev.Offset + int64(len(ev.Pre)+len(ev.Data))
		if ev.Offset < 0 || end > int64(len(data)) || !bytes.Equal(data[ev.Offset:end], append(append([]byte(nil), ev.Pre...), ev.Data...)) {
			t.Fatalf("event %d at %d: bytes differ from the input", i, ev.Offset)
		}
		if len(ev.Data) > limit || len(ev.Data) == 0 {
			t.Fatalf("event %d: %d bytes (limit %d)", i, len(ev.Data), limit)
		}
		switch f {
		case JSON:
			if ev.Data[0] != '{' || ev.Data[len(ev.Data)-1] != '}' || len(bytes.Trim(ev.Pre, " \t\r\n")) != 0 {
				t.Fatalf("event %d: Pre %q Data %q", i, ev.Pre, ev.Data)
			}
		case Protobuf:
			if len(ev.Pre) != 4 || int(uint32(ev.Pre[0])<<24|uint32(ev.Pre[1])<<16|uint32(ev.Pre[2])<<8|uint32(ev.Pre[3])) != len(ev.Data) {
				t.Fatalf("event %d: Pre %x for %d bytes", i, ev.Pre, len(ev.Data))
			}
		case CBOR:
			// Pre is self-described tags only; Data one well-formed item.
			if len(ev.Pre)%3 != 0 || !bytes.Equal(ev.Pre, bytes.Repeat([]byte(cborscan.SelfDescribed), len(ev.Pre)/3)) {
				t.Fatalf("event %d: Pre %x", i, ev.Pre)
			}
			if end, err := cborscan.Skip(ev.Data, 0); err != nil || end != len(ev.Data) {
				t.Fatalf("event %d: Data %x is not one CBOR item: %d, %v", i, ev.Data, end, err)
			}
		}
	}
	var fe *Error
	switch {
	case resyncOnErr || (r1.err == nil && opts.Resync) || errors.Is(r1.err, ErrTruncated):
		if total := sum + r1.skipped + int64(len(r1.tail)); total != int64(len(data)) {
			t.Fatalf("Σ(Pre+Data) %d + Skipped %d + tail %d = %d; want %d", sum, r1.skipped, len(r1.tail), total, len(data))
		}
	case r1.err == nil:
		if c := concat(r1); !bytes.Equal(c, data) {
			t.Fatalf("concat(Pre+Data...)+tail = %q; want %q", c, data)
		}
	case !errors.As(r1.err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)):
		t.Fatalf("error %v is not an *Error within the input", r1.err)
	}
}

func FuzzSplitJSON(f *testing.F) {
	f.Add([]byte("{\"type\":\"ADDED\",\"object\":{\"a\":\"}\\\"\"}}\n{}\n"), []byte{3, 0, 9}, uint8(0))
	f.Add([]byte("x\n{\"type\":\"ERROR\",\"object\":{}}\n"), []byte{1}, uint8(fuzzResyncStart))
	f.Fuzz(func(t *testing.T, data, cuts []byte, mode uint8) {
		fuzzSplit(t, JSON, data, cuts, mode)
	})
}

func FuzzSplitProtobuf(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x03abc\x00\x00\x00\x00"), []byte{1, 2}, uint8(fuzzResyncOnError))
	f.Fuzz(func(t *testing.T, data, cuts []byte, mode uint8) {
		fuzzSplit(t, Protobuf, data, cuts, mode)
	})
}

func FuzzSplitCBOR(f *testing.F) {
	f.Add([]byte("\xd9\xd9\xf7\xa1\x44type\x45ADDED\xbf\x5f\x41a\xff\x9f\xff\xff"), []byte{0, 4}, uint8(fuzzResyncOnError))
	f.Fuzz(func(t *testing.T, data, cuts []byte, mode uint8) {
		fuzzSplit(t, CBOR, data, cuts, mode)
	})
}

// FuzzCBOR runs everything that reads CBOR events and lists on any input:
// errors wrap ErrInvalid, nothing panics, what is built reads back.
func FuzzCBOR(f *testing.F) {
	f.Add([]byte("\xa2\x44type\x45ADDED\x46object\xd9\xd9\xf7\xa1\x44kind\x43Pod"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Peek(CBOR, data)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Peek error %v does not wrap ErrInvalid", err)
		}
		PeekType(CBOR, data)
		PeekType(Unknown, data)
		if av, kind, obj, err := EventObject(CBOR, data); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("EventObject error %v does not wrap ErrInvalid", err)
			}
		} else {
			ev := WatchEvent(CBOR, m.Type, av, kind, obj)
			av2, kind2, _, err := EventObject(CBOR, ev)
			if err != nil || av2 != av && av != "" || kind2 != kind && kind != "" {
				t.Fatalf("EventObject(WatchEvent(...)) = %q %q, %v; want %q %q", av2, kind2, err, av, kind)
			}
		}
		l, err := ListItems(CBOR, data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ListItems error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for i, item := range l.Items {
			if !within(item, data) {
				t.Fatalf("item %d does not alias the body", i)
			}
		}
		l2, err := ListItems(CBOR, BuildList(CBOR, l.APIVersion, l.Kind, l.ResourceVersion, l.Items))
		if err != nil || len(l2.Items) != len(l.Items) || l2.ResourceVersion != l.ResourceVersion {
			t.Fatalf("ListItems(BuildList(...)) = %d items rv %q, %v; want %d, %q", len(l2.Items), l2.ResourceVersion, err, len(l.Items), l.ResourceVersion)
		}
	})
}

func FuzzPeek(f *testing.F) {
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","code":410}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, proto bool) {
		fm := JSON
		if proto {
			fm = Protobuf
		}
		m, err := Peek(fm, data)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Peek error %v does not wrap ErrInvalid", err)
		}
		// PeekType never panics either (TestPeekFixtures checks that it
		// agrees with Peek on real events).
		PeekType(fm, data)
		PeekType(Unknown, data)
		pm, pobj, perr := PeekEvent(fm, data)
		if perr != nil && !errors.Is(perr, ErrInvalid) {
			t.Fatalf("PeekEvent error %v does not wrap ErrInvalid", perr)
		}
		av, kind, obj, err := EventObject(fm, data)
		if err == nil && perr == nil && json.Valid(data) {
			// Where both read the event, they read the same.
			if pm != m || pm.Kind != kind || pm.APIVersion != av || !bytes.Equal(pobj, obj) {
				t.Fatalf("PeekEvent = %+v %q; Peek %+v, EventObject %q %q %q", pm, pobj, m, av, kind, obj)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("EventObject error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// Rebuilding the event gives the same object back.
		ev := WatchEvent(fm, m.Type, av, kind, obj)
		av2, kind2, obj2, err := EventObject(fm, ev)
		if err != nil {
			t.Fatalf("EventObject(WatchEvent(...)) = %v", err)
		}
		if fm == Protobuf && (av2 != av || kind2 != kind || !bytes.Equal(obj2, obj)) {
			t.Fatalf("round trip: %q %q %x; want %q %q %x", av2, kind2, obj2, av, kind, obj)
		}
	})
}

func FuzzListItems(f *testing.F) {
	f.Add([]byte(`{"kind":"XList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"kind":"X","apiVersion":"v1"},{}]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, proto bool) {
		fm := JSON
		if proto {
			fm = Protobuf
		}
		l, err := ListItems(fm, body)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ListItems error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for i, item := range l.Items {
			if !within(item, body) {
				t.Fatalf("item %d does not alias the body", i)
			}
			// PeekObject reads what Peek reads of the item as an event.
			pm, perr := PeekObject(fm, l.APIVersion, "X", item)
			em, eerr := Peek(fm, WatchEvent(fm, "ADDED", l.APIVersion, "X", item))
			if perr != nil && !errors.Is(perr, ErrInvalid) {
				t.Fatalf("PeekObject error %v does not wrap ErrInvalid", perr)
			}
			if em.Type = ""; perr == nil && eerr == nil && json.Valid(item) && pm != em {
				t.Fatalf("item %d: PeekObject = %+v; Peek of its event %+v", i, pm, em)
			}
			if fm == JSON && (item[0] != '{' || item[len(item)-1] != '}') {
				t.Fatalf("item %d = %q", i, item)
			}
		}
		rebuilt := BuildList(fm, l.APIVersion, l.Kind, l.ResourceVersion, l.Items)
		l2, err := ListItems(fm, rebuilt)
		if err != nil {
			t.Fatalf("ListItems(BuildList(...)) = %v", err)
		}
		if len(l2.Items) != len(l.Items) {
			t.Fatalf("round trip: %d items; want %d", len(l2.Items), len(l.Items))
		}
		itemKind := l.Kind
		if n := len(itemKind) - len("List"); n >= 0 && itemKind[n:] == "List" {
			itemKind = itemKind[:n]
		}
		for i, item := range l.Items {
			want := item
			if fm == JSON {
				want = stripTypeMeta(item, l.APIVersion, itemKind)
			}
			if !bytes.Equal(l2.Items[i], want) {
				t.Fatalf("round trip item %d = %q; want %q", i, l2.Items[i], want)
			}
		}
	})
}

// TestGenSeeds writes the seed corpora from small pieces of the real
// fixtures when run with -update.
func TestGenSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	head := func(name string, events int) []byte {
		fx := fixtureNamed(t, name)
		body := fx.body(t)
		tr := truthFor(t, name)
		end := tr[min(events, len(tr))-1].BodyEnd
		if fx.format() == JSON && end < int64(len(body)) {
			end++ // the newline
		}
		return body[:end]
	}
	lastTwo := func(name string) []byte {
		fx := fixtureNamed(t, name)
		tr := truthFor(t, name)
		return fx.body(t)[tr[len(tr)-2].BodyOffset-1:]
	}
	pbWatch := head("protobuf-p1-watch", 3)
	jsWatch := head("basic-json-watch", 3)
	cbWatch := head("cbor-informer-secrets", 3)
	split := map[string][]struct {
		data, cuts []byte
		mode       uint8
	}{
		"FuzzSplitJSON": {
			{fixtureNamed(t, "gone-410-g1-error").body(t), []byte{5, 60}, 0},
			{fixtureNamed(t, "gone-410-g2-error").body(t), []byte{0}, fuzzResyncStart},
			{jsWatch, []byte{200, 13, 77}, 0},
			{jsWatch[700:], []byte{31}, fuzzResyncStart},
			{jsWatch, []byte{100}, fuzzSmallLimit | fuzzResyncOnError | 25<<3},
			{lastTwo("multi-watch-f-watch"), []byte{17, 3}, fuzzResyncStart | fuzzResyncOnError},
		},
		"FuzzSplitProtobuf": {
			{pbWatch, []byte{3, 250}, 0},
			{pbWatch[200:], []byte{7}, fuzzResyncStart},
			{pbWatch, []byte{90}, fuzzSmallLimit | fuzzResyncOnError | 12<<3},
			{lastTwo("protobuf-p1-watch"), []byte{0, 1}, fuzzResyncStart | fuzzResyncOnError},
		},
		"FuzzSplitCBOR": {
			{cbWatch, []byte{3, 250}, 0},
			{cbWatch[300:], []byte{7}, fuzzResyncStart},
			{cbWatch, []byte{90}, fuzzSmallLimit | fuzzResyncOnError | 31<<3},
			{lastTwo("cbor-informer-configmaps"), []byte{0, 1}, fuzzResyncStart | fuzzResyncOnError},
		},
	}
	var peek []struct {
		data  []byte
		proto bool
	}
	for _, name := range []string{"gone-410-g1-error", "gone-410-g2-error"} {
		peek = append(peek, struct {
			data  []byte
			proto bool
		}{bytes.TrimSpace(fixtureNamed(t, name).body(t)), false})
	}
	for _, f := range []Format{JSON, Protobuf} {
		name := map[Format]string{JSON: "multi-watch-f-watch", Protobuf: "protobuf-p1-watch"}[f]
		evs := splitAll(t, f, fixtureNamed(t, name).body(t))
		for _, ev := range [][]byte{evs[0], evs[len(evs)-1], Bookmark(f, "v1", "ConfigMap", "1", true)} {
			peek = append(peek, struct {
				data  []byte
				proto bool
			}{ev, f == Protobuf})
		}
	}
	write := func(target string, i int, content string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte("go test fuzz v1\n"+content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for target, seeds := range split {
		for i, s := range seeds {
			write(target, i, fmt.Sprintf("[]byte(%q)\n[]byte(%q)\nuint8(%d)\n", s.data, s.cuts, s.mode))
		}
	}
	for i, s := range peek {
		write("FuzzPeek", i, fmt.Sprintf("[]byte(%q)\nbool(%v)\n", s.data, s.proto))
	}
	var cbor [][]byte
	for _, name := range []string{"cbor-informer-secrets", "cbor-informer-configmaps"} {
		evs := splitAll(t, CBOR, fixtureNamed(t, name).body(t))
		cbor = append(cbor, evs[0], evs[1], evs[len(evs)-1])
	}
	cbor = append(cbor, Bookmark(CBOR, "v1", "ConfigMap", "1", true), fixtureNamed(t, "cbor-informer-list").body(t))
	for i, b := range cbor {
		write("FuzzCBOR", i, fmt.Sprintf("[]byte(%q)\n", b))
	}
	lists := []string{"basic-json-list", "multi-watch-f-list-continue", "protobuf-p1-list"}
	for i, name := range lists {
		fx := fixtureNamed(t, name)
		write("FuzzListItems", i, fmt.Sprintf("[]byte(%q)\nbool(%v)\n", fx.body(t), fx.format() == Protobuf))
	}
}
