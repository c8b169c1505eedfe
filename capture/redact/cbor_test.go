package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/cborscan"
)

// cb builds CBOR the way Kubernetes writes it: strings and keys as byte
// strings, []byte values tagged 22.
type cb []byte

func (b cb) m(n int) cb        { return cborscan.AppendHead(b, cborscan.Map, uint64(n)) }
func (b cb) a(n int) cb        { return cborscan.AppendHead(b, cborscan.Array, uint64(n)) }
func (b cb) s(v string) cb     { return cborscan.AppendString(b, v) }
func (b cb) raw(v string) cb   { return append(b, v...) }
func (b cb) kv(k, v string) cb { return b.s(k).s(v) }
func (b cb) bytes22(v string) cb {
	return append(b, 0xd6).s(v)
}
func (b cb) self() cb { return append(b, cborscan.SelfDescribed...) }

// chunks writes v as an indefinite-length byte string of 3-byte chunks.
func (b cb) chunks(v string) cb {
	b = append(b, 0x5f)
	for len(v) > 0 {
		k := min(3, len(v))
		b = b.s(v[:k])
		v = v[k:]
	}
	return append(b, 0xff)
}

// cborShapes are CBOR documents holding value where it must be replaced.
func cborShapes(value string) []struct {
	name, ct string
	doc      []byte
	assume   bool
	event    bool
} {
	secret := func(kindLast bool) cb {
		b := cb{}.self().m(4)
		if !kindLast {
			b = b.kv("kind", "Secret")
		}
		b = b.kv("apiVersion", "v1").s("metadata").m(2).kv("name", "db").kv("namespace", "ns").s("data").m(2).s("password").bytes22(value).s("user").bytes22("admin")
		if kindLast {
			b = b.kv("kind", "Secret")
		}
		return b
	}
	la, _ := json.Marshal(map[string]any{"kind": "Secret", "stringData": map[string]string{"k": value}})
	return []struct {
		name, ct string
		doc      []byte
		assume   bool
		event    bool
	}{
		{"Secret", "application/cbor", secret(false), false, false},
		{"Secret, kind last (the apiserver's order)", "application/cbor", secret(true), false, false},
		{"stringData", "application/cbor", cb{}.self().m(2).kv("kind", "Secret").s("stringData").m(1).kv("k", value), false, false},
		{"indefinite-length value", "application/cbor", cb{}.self().m(2).kv("kind", "Secret").s("stringData").m(1).s("k").chunks(value), false, false},
		{"indefinite-length kind", "application/cbor", cb{}.self().m(2).s("kind").chunks("Secret").s("stringData").m(1).kv("k", value), false, false},
		{"SecretList", "application/cbor", cb{}.self().m(3).kv("kind", "SecretList").kv("apiVersion", "v1").s("items").a(1).m(1).s("data").m(1).s("k").bytes22(value), false, false},
		{"List of SecretList", "application/cbor", cb{}.self().m(2).kv("kind", "List").s("items").a(1).m(2).kv("kind", "SecretList").s("items").a(1).m(1).s("stringData").m(1).kv("k", value), false, false},
		{"Table row", "application/cbor", cb{}.self().m(2).kv("kind", "Table").s("rows").a(1).m(2).s("cells").a(0).s("object").raw(string(secret(true))), false, false},
		{"PartialObjectMetadata last-applied", "application/cbor", cb{}.self().m(2).kv("kind", "PartialObjectMetadata").s("metadata").m(1).s("annotations").m(1).kv(lastApplied, string(la)), false, false},
		{"TokenRequest", "application/cbor", cb{}.self().m(2).kv("kind", "TokenRequest").s("status").m(1).kv("token", value), false, false},
		{"TokenReview", "application/cbor", cb{}.self().m(2).kv("kind", "TokenReview").s("spec").m(1).kv("token", value), false, false},
		{"embedded anywhere", "application/cbor", cb{}.self().m(2).kv("kind", "Widget").s("spec").m(1).s("template").raw(string(secret(false))), false, false},
		{"to a Secret endpoint without kind", "application/apply-patch+cbor", cb{}.self().m(1).s("stringData").m(1).kv("k", value), true, false},
		{"watch event", "", cb{}.m(2).s("object").raw(string(secret(true))).kv("type", "MODIFIED"), false, true},
	}
}

func TestCBORShapes(t *testing.T) {
	const value = "wtrace-cbor-secret-value-17"
	s := NewSecrets()
	for _, sh := range cborShapes(value) {
		t.Run(sh.name, func(t *testing.T) {
			var rep Report
			var out []byte
			if sh.event {
				out = s.Event(frame.CBOR, sh.doc, &rep)
			} else {
				out = body(s, BodyOptions{ContentType: sh.ct, AssumeSecret: sh.assume}, sh.doc, 5, &rep)
			}
			if len(out) != len(sh.doc) {
				t.Fatalf("length %d → %d", len(sh.doc), len(out))
			}
			if bytes.Contains(out, []byte(value)) {
				t.Fatalf("value survived: %q", out)
			}
			if end, err := cborscan.Skip(out, 0); err != nil || end != len(out) {
				t.Fatalf("redacted CBOR is not one item: %d, %v", end, err)
			}
			if f, _ := rep.Failures(); len(f) != 0 {
				t.Errorf("failures: %+v", f)
			}
			if len(rep.Redactions()) == 0 {
				t.Error("no redaction reported")
			}
			// Everything else is kept: only bytes of the value changed.
			for i := range out {
				if out[i] != sh.doc[i] && !inValue(sh.doc, i, value) {
					t.Fatalf("byte %d changed outside the value: %x → %x", i, sh.doc[i], out[i])
				}
			}
		})
	}
}

// inValue reports whether byte i of doc lies in a copy of value, of a
// 3-byte chunk of it, or of the shapes' other data value, "admin".
func inValue(doc []byte, i int, value string) bool {
	vs := []string{value, "admin"}
	for k := 0; k < len(value); k += 3 {
		vs = append(vs, value[k:min(k+3, len(value))])
	}
	for _, v := range vs {
		for j := 0; ; {
			k := bytes.Index(doc[j:], []byte(v))
			if k < 0 {
				break
			}
			if i >= j+k && i < j+k+len(v) {
				return true
			}
			j += k + 1
		}
	}
	// The last-applied annotation is replaced whole.
	return bytes.Contains(doc, []byte("last-applied")) && i > bytes.LastIndex(doc, []byte("last-applied"))
}

func TestCBORKept(t *testing.T) {
	s := NewSecrets()
	for _, tt := range []struct {
		name string
		doc  []byte
	}{
		{"ConfigMap", cb{}.self().m(2).kv("kind", "ConfigMap").s("data").m(1).kv("password", "kept: not a credential store")},
		{"Secret without data", cb{}.self().m(2).kv("kind", "Secret").s("metadata").m(1).kv("name", "x")},
		{"no marker", cb{}.self().m(1).kv("a", "b")},
	} {
		var rep Report
		out := body(s, BodyOptions{ContentType: "application/cbor"}, tt.doc, 3, &rep)
		if !bytes.Equal(out, tt.doc) || !rep.Empty() {
			t.Errorf("%s: changed (%x → %x), report %+v", tt.name, tt.doc, out, rep.Redactions())
		}
	}
}

func TestCBORFailsClosed(t *testing.T) {
	s := NewSecrets()
	value := "wtrace-cbor-secret-value-99"
	good := cb{}.self().m(2).kv("kind", "Secret").s("stringData").m(1).kv("k", value)
	deep := cb{}.self()
	for range maxCBORDepth + 2 {
		deep = deep.m(1).s("x")
	}
	deep = append(deep, good[3:]...)
	for _, tt := range []struct {
		name     string
		doc      []byte
		complete bool
	}{
		{"cut", good[:len(good)-4], false},
		{"malformed", append(append(cb{}, good[:len(good)-len(value)-1]...), 0x1c), true},
		{"trailing bytes", append(append(cb{}, good...), 0x00), true},
		{"kind given twice", cb{}.self().m(3).kv("kind", "Secret").s("stringData").m(1).kv("k", value).kv("kind", "ConfigMap"), true},
		{"data not a map", cb{}.self().m(2).kv("kind", "Secret").s("data").a(1).s(value), true},
		{"nested too deep", deep, true},
	} {
		var rep Report
		var out []byte
		bd := s.NewBody(BodyOptions{ContentType: "application/cbor"}, &rep)
		bd.Write(tt.doc, func(p []byte) { out = append(out, p...) })
		bd.Close(tt.complete, func(p []byte) { out = append(out, p...) })
		if len(out) != len(tt.doc) || bytes.Contains(out, []byte(value)) {
			t.Errorf("%s: %d → %d bytes, value kept %v", tt.name, len(tt.doc), len(out), bytes.Contains(out, []byte(value)))
		}
		if f, _ := rep.Failures(); len(f) == 0 {
			t.Errorf("%s: no failure reported", tt.name)
		}
		var unparsed bool
		for _, r := range rep.Redactions() {
			unparsed = unparsed || r.Reason == formats.RedactUnparsed
		}
		if !unparsed {
			t.Errorf("%s: no unparsed redaction: %+v", tt.name, rep.Redactions())
		}
	}
	// A partial event at the end of a cut stream is replaced whole.
	var rep Report
	if out := s.Tail(frame.CBOR, good[:20], &rep); bytes.Equal(out, good[:20]) || len(out) != 20 {
		t.Errorf("Tail(partial CBOR event) = %x", out)
	}
}

// FuzzCBORBody: any bytes keep their length through a CBOR Body, Event and
// Tail; a value planted in any CBOR shape, fed in any pieces, does not
// come out, and the item stays one well-formed item.
func FuzzCBORBody(f *testing.F) {
	f.Add([]byte("\xd9\xd9\xf7\xa2\x44kind\x46Secret\x44data\xa1\x41k\xd6\x43abc"), "hunter2-hunter2", uint8(0), uint8(3))
	f.Add([]byte("\xbf\x5f\x42Se\x44cret\xff\xff"), "correct horse battery", uint8(7), uint8(1))
	s := NewSecrets()
	f.Fuzz(func(t *testing.T, data []byte, value string, shape, piece uint8) {
		n := int(piece%16) + 1
		var rep Report
		if out := body(s, BodyOptions{ContentType: "application/cbor", AssumeSecret: shape&1 == 1}, data, n, &rep); len(out) != len(data) {
			t.Fatalf("Body: length %d → %d", len(data), len(out))
		}
		if out := s.Event(frame.CBOR, data, &rep); len(out) != len(data) {
			t.Fatalf("Event: length %d → %d", len(data), len(out))
		}
		if out := s.Tail(frame.CBOR, data, &rep); len(out) != len(data) {
			t.Fatalf("Tail: length %d → %d", len(data), len(out))
		}
		if len(value) < 8 || strings.Contains("Secret", value) {
			return
		}
		shapes := cborShapes(value)
		sh := shapes[int(shape)%len(shapes)]
		var out []byte
		var rep2 Report
		if sh.event {
			out = s.Event(frame.CBOR, sh.doc, &rep2)
		} else {
			out = body(s, BodyOptions{ContentType: sh.ct, AssumeSecret: sh.assume}, sh.doc, n, &rep2)
		}
		if bytes.Contains(out, []byte(value)) {
			t.Fatalf("%s: %q survived in %x", sh.name, value, out)
		}
		if end, err := cborscan.Skip(out, 0); err != nil || end != len(out) {
			t.Fatalf("%s: redacted CBOR is not one item: %d, %v", sh.name, end, err)
		}
	})
}
