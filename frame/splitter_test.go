package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// checkEvents compares split events with the truth of a fixture whose first
// byte is at body offset base.
func checkEvents(t *testing.T, f Format, body []byte, base int64, evs []got, truth []truthEvent) {
	t.Helper()
	if len(evs) != len(truth) {
		t.Fatalf("got %d events, want %d", len(evs), len(truth))
	}
	for i, ev := range evs {
		w := truth[i]
		if s := sha(ev.Data); s != w.EventSHA256 || len(ev.Data) != w.EventLen {
			t.Fatalf("event %d: %d bytes sha256 %s; want %d bytes %s", i, len(ev.Data), s, w.EventLen, w.EventSHA256)
		}
		start := ev.Offset + int64(len(ev.Pre)) // JSON: body_offset is the '{'
		switch f {
		case Protobuf:
			start = ev.Offset // protobuf: body_offset includes the prefix
			if len(ev.Pre) != 4 {
				t.Fatalf("event %d: Pre = %x; want a 4-byte length", i, ev.Pre)
			}
		case CBOR:
			start = ev.Offset // CBOR: body_offset includes the self-described tag
			if string(ev.Pre) != "\xd9\xd9\xf7" {
				t.Fatalf("event %d: Pre = %x; want the self-described tag d9d9f7", i, ev.Pre)
			}
		}
		end := ev.Offset + int64(len(ev.Pre)+len(ev.Data))
		if start != w.BodyOffset || end != w.BodyEnd {
			t.Fatalf("event %d: offsets [%d,%d); want [%d,%d)", i, start, end, w.BodyOffset, w.BodyEnd)
		}
		if got := body[ev.Offset-base : end-base]; !bytes.Equal(got, append(append([]byte(nil), ev.Pre...), ev.Data...)) {
			t.Fatalf("event %d: Pre+Data differ from the body at its offset", i)
		}
	}
}

func concat(r result) []byte {
	var b []byte
	for _, ev := range r.events {
		b = append(b, ev.Pre...)
		b = append(b, ev.Data...)
	}
	return append(b, r.tail...)
}

func TestSplitFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.Kind != "watch" {
			continue
		}
		body := fx.body(t)
		truth := truthFor(t, fx.Name)
		f := fx.format()
		for _, pc := range piecers {
			t.Run(fx.Name+"/"+pc.name, func(t *testing.T) {
				r := split(NewSplitter(f, Options{}), pc.cut(body), false)
				if r.err != nil {
					t.Fatalf("split: %v", r.err)
				}
				checkEvents(t, f, body, 0, r.events, truth)
				if c := concat(r); !bytes.Equal(c, body) {
					t.Fatalf("concat(Pre+Data...)+tail differs from the body (%d vs %d bytes)", len(c), len(body))
				}
				if r.skipped != 0 {
					t.Errorf("Skipped() = %d; want 0", r.skipped)
				}
			})
		}
	}
}

// TestMidstreamCapture splits the real midstream capture (M1: the capture
// began inside an event) in resync mode.
func TestMidstreamCapture(t *testing.T) {
	fx := fixtureNamed(t, "midstream-m1")
	body := fx.body(t)
	var truth []truthEvent
	for _, e := range truthFor(t, fx.Name) {
		if e.InCapture != nil && *e.InCapture {
			truth = append(truth, e)
		}
	}
	if len(truth) == 0 {
		t.Fatal("no in-capture truth events")
	}
	if Sniff(body) != JSON {
		t.Errorf("Sniff(midstream body) = %v; want json", Sniff(body))
	}
	for _, pc := range piecers {
		t.Run(pc.name, func(t *testing.T) {
			s := NewSplitter(JSON, Options{Resync: true})
			s.SetOffset(fx.BodyOffset)
			r := split(s, pc.cut(body), false)
			if r.err != nil {
				t.Fatalf("split: %v", r.err)
			}
			checkEvents(t, JSON, body, fx.BodyOffset, r.events, truth)
			if want := truth[0].BodyOffset - fx.BodyOffset; r.skipped != want {
				t.Errorf("Skipped() = %d; want %d", r.skipped, want)
			}
			if !bytes.Equal(append(body[:r.skipped:r.skipped], concat(r)...), body) {
				t.Errorf("skipped + concat(Pre+Data...) + tail differs from the body")
			}
		})
	}
}

// TestResyncDrop drops the first N bytes of real watch bodies (mid-event,
// at an event start, at its newline, inside a length prefix) and checks that
// resync mode finds exactly the events that start at or after N.
func TestResyncDrop(t *testing.T) {
	for _, name := range []string{"basic-json-watch", "multi-watch-a-watchlist", "gone-410-g1-watch", "protobuf-p1-watch"} {
		fx := fixtureNamed(t, name)
		body := fx.body(t)
		truth := truthFor(t, name)
		f := fx.format()
		cuts := map[int64]bool{1: true, 2: true, int64(len(body)) - 1: true}
		for _, k := range []int{1, 2, 7, len(truth) / 2, len(truth) - 1} {
			e := truth[k]
			for _, d := range []int64{-2, -1, 0, 1, 2, 3, 5, 9, (e.BodyEnd - e.BodyOffset) / 2} {
				if n := e.BodyOffset + d; n > 0 && n < int64(len(body)) {
					cuts[n] = true
				}
			}
		}
		for n := range cuts {
			var want []truthEvent
			for _, e := range truth {
				if e.BodyOffset >= n {
					want = append(want, e)
				}
			}
			for _, pc := range []struct {
				name string
				cut  piecer
			}{{"one-shot", oneShot}, {"byte-at-a-time", fixed(1)}, {"random", random(uint64(n), 40)}} {
				t.Run(fmt.Sprintf("%s/drop-%d/%s", name, n, pc.name), func(t *testing.T) {
					in, want := body[n:], want
					if pc.name != "one-shot" && len(want) > 3 {
						// Small pieces: a few events suffice (and keep the test fast).
						want = want[:3]
						in = body[n:want[2].BodyEnd]
					}
					s := NewSplitter(f, Options{Resync: true})
					s.SetOffset(n)
					r := split(s, pc.cut(in), false)
					if r.err != nil {
						t.Fatalf("split: %v", r.err)
					}
					checkEvents(t, f, in, n, r.events, want)
					if sn := Sniff(in); len(want) > 0 && sn != f {
						t.Errorf("Sniff = %v; want %v", sn, f)
					}
				})
			}
		}
	}
}

// TestResyncAfterError inserts garbage between events and gaps inside them,
// and checks that Resync recovers at the next event, with Skipped counting
// exactly what was discarded.
func TestResyncAfterError(t *testing.T) {
	type tc struct {
		name    string
		f       Format
		body    []byte
		wantErr error
		events  int // events recovered in total
	}
	jsonEv := []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","annotations":{"x":"{\"type\":\"ADDED\"}"}}}}`)
	var tcs []tc
	j := append(append(append([]byte{}, jsonEv...), "\ngarbage {\"type\":\"ADDED\"}\n"...), jsonEv...)
	j = append(append(j, '\n'), jsonEv...)
	tcs = append(tcs, tc{"json-garbage", JSON, j, ErrSyntax, 3})
	pb := fixtureNamed(t, "protobuf-p1-watch").body(t)[:2000]
	frames := truthFor(t, "protobuf-p1-watch")
	var cut int
	for _, e := range frames {
		if e.BodyEnd <= 2000 {
			cut = int(e.BodyEnd)
		}
	}
	p := append(append([]byte{}, pb[:cut]...), 0xff, 0xff, 0xff, 0xff, 1, 2, 3)
	p = append(p, pb[:cut]...)
	n := 0
	for _, e := range frames {
		if e.BodyEnd <= int64(cut) {
			n++
		}
	}
	tcs = append(tcs, tc{"protobuf-too-large", Protobuf, p, ErrTooLarge, 2 * n})
	z := append(append(append([]byte{}, pb[:cut]...), 0, 0, 0, 0), pb[:cut]...)
	tcs = append(tcs, tc{"protobuf-zero-length", Protobuf, z, ErrSyntax, 2 * n})
	for _, c := range tcs {
		for _, pc := range piecers[:5] {
			t.Run(c.name+"/"+pc.name, func(t *testing.T) {
				r := split(NewSplitter(c.f, Options{}), pc.cut(c.body), true)
				if !errors.Is(r.err, c.wantErr) {
					t.Fatalf("first error = %v; want %v", r.err, c.wantErr)
				}
				if len(r.events) != c.events {
					t.Fatalf("got %d events; want %d", len(r.events), c.events)
				}
				var sum int64
				for _, ev := range r.events {
					sum += int64(len(ev.Pre) + len(ev.Data))
				}
				if total := sum + r.skipped + int64(len(r.tail)); total != int64(len(c.body)) {
					t.Errorf("Σ(Pre+Data) %d + Skipped %d + tail %d = %d; want %d", sum, r.skipped, len(r.tail), total, len(c.body))
				}
				for i, ev := range r.events {
					if !bytes.Equal(c.body[ev.Offset:ev.Offset+int64(len(ev.Pre)+len(ev.Data))], append(ev.Pre, ev.Data...)) {
						t.Errorf("event %d at offset %d: bytes differ from the body", i, ev.Offset)
					}
				}
			})
		}
	}
}

// TestResyncGap removes bytes from the middle of a real body and tells the
// splitter (SetOffset + Resync) so that offsets stay body offsets.
func TestResyncGap(t *testing.T) {
	for _, name := range []string{"basic-json-watch", "protobuf-p1-watch"} {
		fx := fixtureNamed(t, name)
		body := fx.body(t)
		truth := truthFor(t, name)
		f := fx.format()
		a, b := truth[10].BodyOffset+30, truth[20].BodyOffset+7
		var want []truthEvent
		for _, e := range truth {
			if e.BodyEnd <= a || e.BodyOffset >= b {
				want = append(want, e)
			}
		}
		t.Run(name, func(t *testing.T) {
			s := NewSplitter(f, Options{})
			r1 := split(s, random(5, 500)(body[:a]), false)
			if r1.err == nil || !errors.Is(r1.err, ErrTruncated) {
				t.Fatalf("End before the gap = %v; want ErrTruncated", r1.err)
			}
			s.SetOffset(b)
			s.Resync()
			r2 := split(s, random(6, 500)(body[b:]), false)
			if r2.err != nil {
				t.Fatal(r2.err)
			}
			evs := append(r1.events, r2.events...)
			if len(evs) != len(want) {
				t.Fatalf("got %d events; want %d", len(evs), len(want))
			}
			for i, ev := range evs {
				if sha(ev.Data) != want[i].EventSHA256 {
					t.Fatalf("event %d differs", i)
				}
				if ev.Offset+int64(len(ev.Pre)+len(ev.Data)) != want[i].BodyEnd {
					t.Fatalf("event %d ends at %d; want %d", i, ev.Offset+int64(len(ev.Pre)+len(ev.Data)), want[i].BodyEnd)
				}
			}
		})
	}
}

func TestSplitJSON(t *testing.T) {
	big := `{"a":"` + strings.Repeat("x", 100) + `"}`
	tests := []struct {
		name    string
		in      string
		limit   int
		want    []string // Data of each event
		pre     []string // Pre of each event (nil: all empty)
		tail    string
		err     error
		errOff  int64
		wantErr string
	}{
		{name: "empty", in: "", want: nil},
		{name: "one", in: `{"a":1}`, want: []string{`{"a":1}`}},
		{name: "newlines", in: "{\"a\":1}\n{\"b\":2}\n", want: []string{`{"a":1}`, `{"b":2}`}, pre: []string{"", "\n"}, tail: "\n"},
		{name: "whitespace", in: " \t\r\n{}\r\n {} ", want: []string{`{}`, `{}`}, pre: []string{" \t\r\n", "\r\n "}, tail: " "},
		{name: "no separator", in: `{}{}{"x":[{}]}`, want: []string{`{}`, `{}`, `{"x":[{}]}`}},
		{name: "braces in strings", in: `{"a":"}}{{"}{"b":"{"}`, want: []string{`{"a":"}}{{"}`, `{"b":"{"}`}},
		{name: "escaped quote", in: `{"a":"\"}"}` + "\n" + `{"b":1}`, want: []string{`{"a":"\"}"}`, `{"b":1}`}, pre: []string{"", "\n"}},
		{name: "escaped backslash", in: `{"a":"\\"}{"b":"\\\"}\\"}`, want: []string{`{"a":"\\"}`, `{"b":"\\\"}\\"}`}},
		{name: "unicode escape", in: `{"a":"\u007d\u0022"}`, want: []string{`{"a":"\u007d\u0022"}`}},
		{name: "nested", in: `{"a":{"b":{"c":{}}},"d":[{"e":"}"}]}`, want: []string{`{"a":{"b":{"c":{}}},"d":[{"e":"}"}]}`}},
		{name: "whitespace only", in: " \n\n", tail: " \n\n"},
		{name: "truncated", in: "\n{\"a\":\"}", tail: "\n{\"a\":\"}", err: ErrTruncated, errOff: 1},
		{name: "truncated in escape", in: `{"a":"\`, tail: `{"a":"\`, err: ErrTruncated, errOff: 0},
		{name: "garbage", in: "{}\n x{}", want: []string{`{}`}, err: ErrSyntax, errOff: 4, wantErr: `frame: offset 4: bad event framing: 'x' between events (want '{' or whitespace)`},
		{name: "top-level array", in: `[{}]`, err: ErrSyntax, errOff: 0},
		{name: "top-level string", in: `"{}"`, err: ErrSyntax, errOff: 0},
		{name: "stray close", in: `{}}`, want: []string{`{}`}, err: ErrSyntax, errOff: 2},
		{name: "exactly the limit", in: big + big, limit: len(big), want: []string{big, big}},
		{name: "over the limit", in: "{}\n" + big, limit: len(big) - 1, want: []string{`{}`}, err: ErrTooLarge, errOff: 3,
			wantErr: fmt.Sprintf("frame: offset 3: event too large: JSON event longer than %d bytes", len(big)-1)},
		{name: "over the limit unterminated", in: big[:len(big)-1] + "xx", limit: len(big) - 1, err: ErrTooLarge, errOff: 0},
		{name: "too much whitespace", in: "{}" + strings.Repeat(" ", maxWhitespace+1) + "{}", want: []string{`{}`}, err: ErrSyntax, errOff: 2 + maxWhitespace},
		{name: "whitespace at the bound", in: "{}" + strings.Repeat(" ", maxWhitespace) + "{}", want: []string{`{}`, `{}`}, pre: []string{"", strings.Repeat(" ", maxWhitespace)}},
	}
	for _, tt := range tests {
		for _, pc := range piecers[:5] {
			t.Run(tt.name+"/"+pc.name, func(t *testing.T) {
				s := NewSplitter(JSON, Options{MaxEventSize: tt.limit})
				r := split(s, pc.cut([]byte(tt.in)), false)
				var data, pre []string
				for _, ev := range r.events {
					data = append(data, string(ev.Data))
					pre = append(pre, string(ev.Pre))
				}
				if fmt.Sprint(data) != fmt.Sprint(tt.want) {
					t.Errorf("Split(%q) events = %q; want %q", tt.in, data, tt.want)
				}
				if tt.pre != nil && fmt.Sprint(pre) != fmt.Sprint(tt.pre) {
					t.Errorf("Split(%q) Pre = %q; want %q", tt.in, pre, tt.pre)
				}
				if tt.err == nil {
					if r.err != nil {
						t.Fatalf("Split(%q) error = %v; want nil", tt.in, r.err)
					}
					if string(r.tail) != tt.tail {
						t.Errorf("Split(%q) tail = %q; want %q", tt.in, r.tail, tt.tail)
					}
					if c := concat(r); string(c) != tt.in {
						t.Errorf("concat = %q; want %q", c, tt.in)
					}
					return
				}
				var fe *Error
				if !errors.As(r.err, &fe) || !errors.Is(r.err, tt.err) || fe.Offset != tt.errOff {
					t.Fatalf("Split(%q) error = %v; want *Error at offset %d wrapping %v", tt.in, r.err, tt.errOff, tt.err)
				}
				if tt.wantErr != "" && r.err.Error() != tt.wantErr {
					t.Errorf("error text = %q; want %q", r.err, tt.wantErr)
				}
				if tt.err == ErrTruncated && string(r.tail) != tt.tail {
					t.Errorf("tail = %q; want %q", r.tail, tt.tail)
				}
				if tt.err != ErrTruncated {
					// Sticky until Resync.
					if n, _, ok, err := s.Next([]byte("{}")); n != 0 || ok || err != r.err {
						t.Errorf("Next after error = %d, %v, %v; want 0, false, %v", n, ok, err, r.err)
					}
					if _, err := s.End(); err != r.err {
						t.Errorf("End after error = %v; want %v", err, r.err)
					}
				}
			})
		}
	}
}

// TestSplitJSONNeverBuffersPastLimit feeds an endless event one byte at a
// time and checks what the splitter holds.
func TestSplitJSONNeverBuffersPastLimit(t *testing.T) {
	const limit = 1000
	s := NewSplitter(JSON, Options{MaxEventSize: limit})
	in := []byte(`{"a":"` + strings.Repeat("y", 5000))
	for i := range in {
		_, _, _, err := s.Next(in[i : i+1])
		if len(s.buf) > limit {
			t.Fatalf("after %d bytes the splitter buffers %d > %d", i+1, len(s.buf), limit)
		}
		if err != nil {
			if !errors.Is(err, ErrTooLarge) || i != limit {
				t.Fatalf("Next(byte %d) = %v; want ErrTooLarge at byte %d", i, err, limit)
			}
			return
		}
	}
	t.Fatal("no error")
}

func TestSplitProtobuf(t *testing.T) {
	frame := func(payload string) string {
		l := len(payload)
		return string([]byte{byte(l >> 24), byte(l >> 16), byte(l >> 8), byte(l)}) + payload
	}
	tests := []struct {
		name   string
		in     string
		limit  int
		want   []string
		tail   string
		err    error
		errOff int64
	}{
		{name: "empty", in: ""},
		{name: "one", in: frame("abc"), want: []string{"abc"}},
		{name: "three", in: frame("a") + frame("bc") + frame(strings.Repeat("z", 300)), want: []string{"a", "bc", strings.Repeat("z", 300)}},
		{name: "zero length", in: frame("a") + frame(""), want: []string{"a"}, err: ErrSyntax, errOff: 5},
		{name: "too large", in: frame("a") + frame("0123456789"), limit: 9, want: []string{"a"}, err: ErrTooLarge, errOff: 5},
		{name: "too large without payload", in: "\x00\x00\x00\x0b", limit: 10, err: ErrTooLarge, errOff: 0},
		{name: "4 GiB", in: "\xff\xff\xff\xff", err: ErrTooLarge, errOff: 0},
		{name: "exactly the limit", in: frame("0123456789"), limit: 10, want: []string{"0123456789"}},
		{name: "truncated prefix", in: frame("a") + "\x00\x00", want: []string{"a"}, tail: "\x00\x00", err: ErrTruncated, errOff: 5},
		{name: "truncated payload", in: frame("a") + frame("bcd")[:6], want: []string{"a"}, tail: frame("bcd")[:6], err: ErrTruncated, errOff: 5},
	}
	for _, tt := range tests {
		for _, pc := range piecers[:5] {
			t.Run(tt.name+"/"+pc.name, func(t *testing.T) {
				s := NewSplitter(Protobuf, Options{MaxEventSize: tt.limit})
				r := split(s, pc.cut([]byte(tt.in)), false)
				var data []string
				for _, ev := range r.events {
					data = append(data, string(ev.Data))
					if len(ev.Pre) != 4 {
						t.Errorf("Pre = %x; want 4 bytes", ev.Pre)
					}
				}
				if fmt.Sprint(data) != fmt.Sprint(tt.want) {
					t.Errorf("Split(%q) events = %q; want %q", tt.in, data, tt.want)
				}
				if tt.err == nil {
					if r.err != nil {
						t.Fatalf("Split(%q) error = %v", tt.in, r.err)
					}
					if c := concat(r); string(c) != tt.in {
						t.Errorf("concat = %q; want %q", c, tt.in)
					}
					return
				}
				var fe *Error
				if !errors.As(r.err, &fe) || !errors.Is(r.err, tt.err) || fe.Offset != tt.errOff {
					t.Fatalf("Split(%q) error = %v; want *Error at offset %d wrapping %v", tt.in, r.err, tt.errOff, tt.err)
				}
				if string(r.tail) != tt.tail {
					t.Errorf("tail = %q; want %q", r.tail, tt.tail)
				}
				if len(s.buf) != 0 && tt.err == ErrTooLarge {
					t.Errorf("buffered %d bytes of a frame over the limit", len(s.buf))
				}
			})
		}
	}
}

// within reports whether sub lies inside p's memory.
func within(sub, p []byte) bool {
	if len(sub) == 0 {
		return true
	}
	a, b := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&sub[0]))
	return b >= a && b+uintptr(len(sub)) <= a+uintptr(len(p))
}

// TestZeroCopy checks that events lying in one input alias it, and that
// events spanning inputs come from the splitter's buffer.
func TestZeroCopy(t *testing.T) {
	for _, name := range []string{"basic-json-watch", "protobuf-p1-watch", "cbor-informer-secrets"} {
		fx := fixtureNamed(t, name)
		body := fx.body(t)
		t.Run(name, func(t *testing.T) {
			s := NewSplitter(fx.format(), Options{})
			p := body
			for len(p) > 0 {
				n, ev, ok, err := s.Next(p)
				if err != nil {
					t.Fatal(err)
				}
				if ok && (!within(ev.Data, p) || !within(ev.Pre, p)) {
					t.Fatalf("one-shot event at %d does not alias the input", ev.Offset)
				}
				p = p[n:]
			}
			// Two pieces cut inside the first event's data.
			s = NewSplitter(fx.format(), Options{})
			a, b := body[:100], body[100:]
			if n, _, ok, err := s.Next(a); n != 100 || ok || err != nil {
				t.Fatalf("Next(first 100 bytes) = %d, %v, %v", n, ok, err)
			}
			_, ev, ok, err := s.Next(b)
			if !ok || err != nil || within(ev.Data, b) {
				t.Fatalf("event spanning two inputs: ok %v err %v aliases input %v; want a copy", ok, err, within(ev.Data, b))
			}
		})
	}
}

// TestSplitAllocs pins the steady state: splitting, including events that
// span pieces, allocates nothing once the buffer has grown.
func TestSplitAllocs(t *testing.T) {
	for _, name := range []string{"basic-json-watch", "protobuf-p1-watch", "cbor-informer-secrets"} {
		fx := fixtureNamed(t, name)
		body := fx.body(t)
		for _, pc := range []struct {
			name string
			cut  piecer
		}{{"one-shot", oneShot}, {"fixed-1448", fixed(1448)}, {"byte-at-a-time", fixed(1)}} {
			in := body
			if pc.name == "byte-at-a-time" {
				// Enough to cross many events, ending at an event's end.
				for _, e := range truthFor(t, name) {
					if e.BodyEnd <= 20000 {
						in = body[:e.BodyEnd]
					}
				}
			}
			pieces := pc.cut(in)
			s := NewSplitter(fx.format(), Options{})
			run := func() {
				for _, p := range pieces {
					for len(p) > 0 {
						n, _, _, err := s.Next(p)
						if err != nil {
							panic(err)
						}
						p = p[n:]
					}
				}
			}
			run() // grow the buffer
			if a := testing.AllocsPerRun(5, run); a != 0 {
				t.Errorf("%s/%s: %v allocations per body; want 0", name, pc.name, a)
			}
		}
	}
}

func TestNotAFormat(t *testing.T) {
	for _, f := range []Format{Unknown, Format(9)} {
		s := NewSplitter(f, Options{})
		if _, _, _, err := s.Next([]byte("{}")); !errors.Is(err, ErrSyntax) {
			t.Errorf("NewSplitter(%v).Next = %v; want ErrSyntax", f, err)
		}
	}
}

func TestOffsets(t *testing.T) {
	s := NewSplitter(JSON, Options{})
	s.SetOffset(1000)
	n, ev, ok, err := s.Next([]byte("\n {}x"))
	if n != 4 || !ok || err != nil || ev.Offset != 1000 || string(ev.Pre) != "\n " {
		t.Fatalf("Next = %d, %+v, %v, %v", n, ev, ok, err)
	}
	if s.Offset() != 1004 {
		t.Errorf("Offset() = %d; want 1004", s.Offset())
	}
}

// TestQuoteOrBackslash holds the eight-at-a-time search of scanJSON to a
// byte by byte one: on every word made of '"', '\\' and bytes around them
// (the borrow of the zero-byte test crosses bytes), the first such byte
// is the one found.
func TestQuoteOrBackslash(t *testing.T) {
	alphabet := []byte{'"', '\\', 0, 1, '!', '#', '[', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	rng := rand.New(rand.NewPCG(7, 8))
	var w [8]byte
	for n := range 2_000_000 {
		for i := range w {
			if n < 1<<16 {
				// Every pair of the first bytes, the rest random.
				w[i] = alphabet[(n>>(4*min(i, 3)))%len(alphabet)]
			} else {
				w[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		want := bytes.IndexAny(w[:], "\"\\")
		m := quoteOrBackslash(binary.LittleEndian.Uint64(w[:]))
		got := -1
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("quoteOrBackslash(% x) finds byte %d; want %d", w, got, want)
		}
	}
}
