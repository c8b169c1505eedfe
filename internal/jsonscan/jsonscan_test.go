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
