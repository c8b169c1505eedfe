package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestEachMember(t *testing.T) {
	doc := []byte(` {"kind":"Secret", "data":{"a":"YQ=="},"n":[1,{"x":"}"}],"e\"k":null} `)
	var got []string
	err := EachMember(doc, func(key, val []byte, at int) bool {
		if string(doc[at:at+len(val)]) != string(val) {
			t.Errorf("member %s: offset %d does not point at its value", key, at)
		}
		got = append(got, string(key)+"="+string(val))
		return true
	})
	want := []string{`kind="Secret"`, `data={"a":"YQ=="}`, `n=[1,{"x":"}"}]`, `e\"k=null`}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("EachMember = %q, %v; want %q", got, err, want)
	}
	if !KeyIs([]byte(`e\"k`), `e"k`) || KeyIs([]byte("kind"), "Kind") {
		t.Errorf("KeyIs does not unescape or is not exact")
	}
}

// TestWalkMembers: WalkMembers hands each value's offset to fn, which
// reads it itself (here a nested object, walked by WalkObjectAt in the
// same pass, which returns its end within the larger value); an error of
// fn ends the walk with it.
func TestWalkMembers(t *testing.T) {
	doc := []byte(`{"type":"ADDED", "object": {"kind":"Pod","spec":{"a":[1,"}"]}} ,"x":1}`)
	var got []string
	err := WalkMembers(doc, func(key []byte, vs int) (int, error) {
		if string(key) != "object" {
			got = append(got, string(key))
			return SkipValue(doc, vs)
		}
		end, err := WalkObjectAt(doc, vs, func(k []byte, at int) (int, error) {
			ve, err := SkipValue(doc, at)
			if err == nil {
				got = append(got, "object."+string(k)+"="+string(doc[at:ve]))
			}
			return ve, err
		})
		if err == nil && string(doc[vs:end]) != `{"kind":"Pod","spec":{"a":[1,"}"]}}` {
			t.Errorf("WalkObjectAt ends at %d: %q", end, doc[vs:end])
		}
		return end, err
	})
	want := `type object.kind="Pod" object.spec={"a":[1,"}"]} x`
	if err != nil || strings.Join(got, " ") != want {
		t.Errorf("WalkMembers: %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	if err := WalkMembers(doc, func([]byte, int) (int, error) { return 0, stop }); err != stop {
		t.Errorf("WalkMembers with fn failing = %v; want fn's error", err)
	}
	for _, in := range []string{`{"a":1} x`, `{"a":`, `{"a" 1}`, `[1]`, `{"a":1`} {
		var se *SyntaxError
		if err := WalkMembers([]byte(in), func(_ []byte, vs int) (int, error) { return SkipValue([]byte(in), vs) }); !errors.As(err, &se) {
			t.Errorf("WalkMembers(%q) = %v; want a SyntaxError", in, err)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"a":}`, `{"a":1,}`, `{"a":"x`, `{"a":[}`, `{"a":1} x`, `{"a":` + strings.Repeat("[", MaxDepth+1) + `}`} {
		err := EachMember([]byte(in), func([]byte, []byte, int) bool { return true })
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(in) {
			t.Errorf("EachMember(%.40q) = %v; want a SyntaxError with an offset in the input", in, err)
		}
	}
}

// FuzzSkipValue: on any input SkipValue stays in bounds, and on valid JSON
// it finds the end of the value.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]",{"b":null}]}`, `"x\"y"`, `[[[`, `123 `, `{"a":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := SkipValue(b, 0)
		if err != nil {
			return
		}
		if end < 0 || end > len(b) {
			t.Fatalf("SkipValue = %d for %d bytes", end, len(b))
		}
		if json.Valid(b) && strings.TrimSpace(string(b[end:])) != "" {
			t.Fatalf("SkipValue(%q) = %d: the value ends at the end", b, end)
		}
	})
}
