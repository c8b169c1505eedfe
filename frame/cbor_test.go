package frame

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/internal/cborscan"
)

// cb builds CBOR from hex-free pieces: heads via cborscan, strings as byte
// strings like Kubernetes.
type cb []byte

func (b cb) m(n int) cb    { return cborscan.AppendHead(b, cborscan.Map, uint64(n)) }
func (b cb) a(n int) cb    { return cborscan.AppendHead(b, cborscan.Array, uint64(n)) }
func (b cb) s(v string) cb { return cborscan.AppendString(b, v) }
func (b cb) t(v string) cb {
	return append(cborscan.AppendHead(b, cborscan.Text, uint64(len(v))), v...)
}
func (b cb) raw(v string) cb   { return append(b, v...) }
func (b cb) u(v uint64) cb     { return cborscan.AppendHead(b, cborscan.Uint, v) }
func (b cb) kv(k, v string) cb { return b.s(k).s(v) }
func (b cb) self() cb          { return append(b, cborscan.SelfDescribed...) }

// cborEvent is a watch event as the apiserver writes it (Pre included).
func cborEvent(typ, kind, ns, name, rv string) string {
	obj := cb{}.self().m(3).kv("kind", kind).kv("apiVersion", "v1").s("metadata").m(3).kv("name", name).kv("namespace", ns).kv("resourceVersion", rv)
	return string(cb{}.self().m(2).s("object").raw(string(obj)).kv("type", typ))
}

func TestSplitCBOR(t *testing.T) {
	e1 := cborEvent("ADDED", "ConfigMap", "ns", "a", "1")
	e2 := cborEvent("DELETED", "ConfigMap", "ns", "b", "2")
	indef := string(cb{}.self().raw("\xbf").s("type").raw("\x5f\x42AD\x43DED\xff").s("object").raw("\x9f\x01\x02\xff").raw("\xff"))
	noTag := string(cb{}.m(1).kv("type", "ADDED"))
	bigString := string(cb{}.self().m(1).s("x").raw("\x5a\x7f\xff\xff\xff"))
	tests := []struct {
		name   string
		in     string
		limit  int
		want   []string // Data
		tail   string
		err    error
		errOff int64
	}{
		{name: "empty", in: ""},
		{name: "two", in: e1 + e2, want: []string{e1[3:], e2[3:]}},
		{name: "indefinite lengths", in: indef + e1, want: []string{indef[3:], e1[3:]}},
		{name: "untagged", in: noTag + e1, want: []string{noTag, e1[3:]}},
		{name: "exactly the limit", in: e1, limit: len(e1), want: []string{e1[3:]}},
		{name: "one past the limit", in: e1, limit: len(e1) - 1, err: ErrTooLarge, errOff: 0},
		{name: "declared string past the limit", in: e1 + bigString, want: []string{e1[3:]}, err: ErrTooLarge, errOff: int64(len(e1))},
		{name: "declared map past the limit", in: "\xd9\xd9\xf7\xbb\x00\x00\x01\x00\x00\x00\x00\x00", err: ErrTooLarge, errOff: 0},
		{name: "not a map", in: e1 + "\x01", want: []string{e1[3:]}, err: ErrSyntax, errOff: int64(len(e1))},
		{name: "reserved byte", in: "\xa1\x1c", err: ErrSyntax, errOff: 1},
		{name: "stray break", in: "\xa1\x41a\xff", err: ErrSyntax, errOff: 3},
		{name: "bad chunk", in: "\xa1\x41a\x5f\x61b\xff", err: ErrSyntax, errOff: 4},
		{name: "odd indefinite map", in: "\xbf\x41a\xff", err: ErrSyntax, errOff: 3},
		{name: "truncated", in: e1 + e2[:40], want: []string{e1[3:]}, tail: e2[:40], err: ErrTruncated, errOff: int64(len(e1))},
		{name: "truncated head", in: e1 + "\xd9\xd9", want: []string{e1[3:]}, tail: "\xd9\xd9", err: ErrTruncated, errOff: int64(len(e1))},
	}
	for _, tt := range tests {
		for _, pc := range piecers[:5] {
			t.Run(tt.name+"/"+pc.name, func(t *testing.T) {
				s := NewSplitter(CBOR, Options{MaxEventSize: tt.limit})
				r := split(s, pc.cut([]byte(tt.in)), false)
				var data []string
				for _, ev := range r.events {
					data = append(data, string(ev.Data))
					if string(ev.Pre) != "\xd9\xd9\xf7" && !strings.HasPrefix(string(ev.Data), "\xa1\x44type") {
						t.Errorf("Pre = %x; want the self-described tag", ev.Pre)
					}
				}
				if fmt.Sprint(data) != fmt.Sprint(tt.want) {
					t.Errorf("Split(%x) events = %x; want %x", tt.in, data, tt.want)
				}
				if tt.err == nil {
					if r.err != nil {
						t.Fatalf("Split(%x) error = %v", tt.in, r.err)
					}
					if c := concat(r); string(c) != tt.in {
						t.Errorf("concat = %x; want %x", c, tt.in)
					}
					return
				}
				var fe *Error
				if !errors.As(r.err, &fe) || !errors.Is(r.err, tt.err) || fe.Offset != tt.errOff {
					t.Fatalf("Split(%x) error = %v; want *Error at offset %d wrapping %v", tt.in, r.err, tt.errOff, tt.err)
				}
				if string(r.tail) != tt.tail {
					t.Errorf("tail = %x; want %x", r.tail, tt.tail)
				}
				if tt.err == ErrTooLarge && len(s.buf) > len(tt.in) {
					t.Errorf("buffered %d bytes of an event over the limit", len(s.buf))
				}
			})
		}
	}
}

// TestSplitCBORNeverBuffersPastLimit feeds an event byte by byte with a
// small limit: the splitter fails as soon as the declared lengths exceed
// it, having buffered no more than the limit.
func TestSplitCBORNeverBuffersPastLimit(t *testing.T) {
	ev := cborEvent("ADDED", "ConfigMap", "ns", strings.Repeat("n", 200), "1")
	const limit = 64
	s := NewSplitter(CBOR, Options{MaxEventSize: limit})
	for i := range len(ev) {
		_, _, _, err := s.Next([]byte{ev[i]})
		if len(s.buf) > limit {
			t.Fatalf("after %d bytes the splitter buffers %d > %d", i+1, len(s.buf), limit)
		}
		if err != nil {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Next(byte %d) = %v; want ErrTooLarge", i, err)
			}
			return
		}
	}
	t.Fatal("no error")
}

func TestResyncCBOR(t *testing.T) {
	e1 := cborEvent("ADDED", "ConfigMap", "ns", "a", "1")
	e2 := cborEvent("MODIFIED", "ConfigMap", "ns", "b", "2")
	typeFirst := string(cb{}.self().m(2).kv("type", "BOOKMARK").s("object").self().m(0))
	for cut := 0; cut <= len(e1); cut++ {
		in := e1[cut:] + e2 + typeFirst
		want := []string{e2[3:], typeFirst[3:]}
		if cut == 0 {
			want = append([]string{e1[3:]}, want...)
		}
		for _, pc := range piecers[:5] {
			r := split(NewSplitter(CBOR, Options{Resync: true}), pc.cut([]byte(in)), false)
			var data []string
			for _, ev := range r.events {
				data = append(data, string(ev.Data))
			}
			if r.err != nil || fmt.Sprint(data) != fmt.Sprint(want) {
				t.Fatalf("cut %d/%s: events %x, %v; want %x", cut, pc.name, data, r.err, want)
			}
			if want := int64(len(e1) - cut); cut > 0 && r.skipped != want {
				t.Fatalf("cut %d/%s: skipped %d; want %d", cut, pc.name, r.skipped, want)
			}
		}
	}
	if Sniff([]byte(e1[5:]+e2)) != CBOR {
		t.Errorf("Sniff(CBOR events) = %v; want cbor", Sniff([]byte(e1[5:]+e2)))
	}
}

func TestPeekCBOR(t *testing.T) {
	status := string(cb{}.m(2).kv("type", "ERROR").s("object").self().m(5).kv("kind", "Status").kv("apiVersion", "v1").
		s("code").u(410).kv("reason", "Expired").kv("message", "too old"))
	row := func(name string) cb {
		return cb{}.m(2).s("cells").a(1).s(name).s("object").m(3).kv("kind", "PartialObjectMetadata").kv("apiVersion", "meta.k8s.io/v1").
			s("metadata").m(3).kv("name", name).kv("namespace", "ns").kv("resourceVersion", "7")
	}
	table := func(rows ...cb) string {
		b := cb{}.m(2).kv("type", "MODIFIED").s("object").m(4).kv("kind", "Table").kv("apiVersion", "meta.k8s.io/v1").
			s("metadata").m(1).kv("resourceVersion", "6").s("rows").a(len(rows))
		for _, r := range rows {
			b = append(b, r...)
		}
		return string(b)
	}
	textKeys := string(cb{}.m(2).t("type").t("ADDED").t("object").m(1).t("kind").t("Pod"))
	tests := []struct {
		name string
		in   string
		want Meta
		err  bool
	}{
		{"event", cborEvent("ADDED", "ConfigMap", "ns", "a", "1")[3:], Meta{Type: "ADDED", APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a", ResourceVersion: "1"}, false},
		{"status", status, Meta{Type: "ERROR", APIVersion: "v1", Kind: "Status", Code: 410, Reason: "Expired", Message: "too old"}, false},
		{"table row", table(row("x")), Meta{Type: "MODIFIED", APIVersion: "meta.k8s.io/v1", Kind: "Table", Namespace: "ns", Name: "x", ResourceVersion: "7"}, false},
		{"table of two rows", table(row("x"), row("y")), Meta{Type: "MODIFIED", APIVersion: "meta.k8s.io/v1", Kind: "Table", ResourceVersion: "6"}, false},
		{"text strings", textKeys, Meta{Type: "ADDED", Kind: "Pod"}, false},
		{"not a map", "\x01", Meta{}, true},
		{"cut", cborEvent("ADDED", "ConfigMap", "ns", "a", "1")[3:40], Meta{}, true},
		{"trailing bytes", textKeys + "\x00", Meta{}, true},
	}
	for _, tt := range tests {
		m, err := Peek(CBOR, []byte(tt.in))
		if (err != nil) != tt.err || err != nil && !errors.Is(err, ErrInvalid) || m != tt.want {
			t.Errorf("%s: Peek = %+v, %v; want %+v (error %v)", tt.name, m, err, tt.want, tt.err)
		}
		if typ, ok := PeekType(CBOR, []byte(tt.in)); !tt.err && (!ok || string(typ) != tt.want.Type) {
			t.Errorf("%s: PeekType = %q, %v; want %q", tt.name, typ, ok, tt.want.Type)
		}
	}
}
