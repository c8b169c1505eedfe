package cborscan

import (
	"bytes"
	"errors"
	"testing"
)

func TestSkip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		end  int
		err  int // offset of the error, -1 for none
	}{
		{"uint", "\x18\x2a", 2, -1},
		{"self-described map", "\xd9\xd9\xf7\xa1\x41a\x01", 7, -1},
		{"nested", "\x82\xa1\x41k\x80\x43abc", 9, -1},
		{"indefinite string", "\x5f\x41a\x42bc\xff", 7, -1},
		{"indefinite array and map", "\x9f\xbf\x41a\x01\xff\xff", 7, -1},
		{"float64", "\xfb\x3f\xf0\x00\x00\x00\x00\x00\x00", 9, -1},
		{"trailing bytes are not read", "\x01\x02", 1, -1},
		{"reserved", "\x1c", 0, 0},
		{"indefinite uint", "\x1f", 0, 0},
		{"break alone", "\xff", 0, 0},
		{"short string", "\x43ab", 0, 0},
		{"huge array", "\x9b\xff\xff\xff\xff\xff\xff\xff\xff", 0, 0},
		{"huge map", "\xbb\x80\x00\x00\x00\x00\x00\x00\x00\x01", 0, 0},
		{"counts past the end", "\x82\x82\x01", 0, 1},
		{"wrong chunk", "\x5f\x61a\xff", 0, 1},
		{"odd indefinite map", "\xbf\x01\xff", 0, 2},
		{"simple in two bytes", "\xf8\x10", 0, 0},
		{"cut head", "\x19\x01", 0, 0},
		{"unclosed", "\x9f\x01", 0, 2},
	}
	for _, tt := range tests {
		end, err := Skip([]byte(tt.in), 0)
		var se *SyntaxError
		switch {
		case tt.err < 0 && (err != nil || end != tt.end):
			t.Errorf("%s: Skip(%x) = %d, %v; want %d", tt.name, tt.in, end, err, tt.end)
		case tt.err >= 0 && (!errors.As(err, &se) || se.Offset != tt.err):
			t.Errorf("%s: Skip(%x) = %d, %v; want an error at %d", tt.name, tt.in, end, err, tt.err)
		}
	}
}

func TestWalk(t *testing.T) {
	m := []byte("\xd9\xd9\xf7\xa3\x44kind\x46Secret\x64data\xa1\x41k\xd6\x43v\x00w\x41n\xf6")
	var keys []string
	err := EachMember(m, func(k, v []byte, at int) bool {
		s, _ := String(k)
		keys = append(keys, string(s))
		if !bytes.Equal(m[at:at+len(v)], v) {
			t.Errorf("member %s: value not at its offset", s)
		}
		return true
	})
	if err != nil || len(keys) != 3 || !KeyIs(m[4:9], "kind") {
		t.Fatalf("EachMember = %q, %v", keys, err)
	}
	if s, ok := String([]byte("\xd6\x43v\x00w")); !ok || string(s) != "v\x00w" {
		t.Errorf("String(tag 22) = %q, %v", s, ok)
	}
	if s, ok := String([]byte("\x7f\x61a\x62bc\xff")); !ok || string(s) != "abc" {
		t.Errorf("String(indefinite) = %q, %v", s, ok)
	}
	if _, ok := String([]byte("\x01")); ok {
		t.Error("String(uint) ok")
	}
	if v, ok := Int([]byte("\x39\x01\x00")); !ok || v != -257 {
		t.Errorf("Int(-257) = %d, %v", v, ok)
	}
	var n int
	if err := EachElement([]byte("\x9f\x01\x02\xff"), func(e []byte, at int) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("EachElement(indefinite) = %d, %v", n, err)
	}
	if err := EachElement([]byte("\xf6"), func([]byte, int) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("EachElement(null) = %d, %v", n, err)
	}
	if err := EachMember([]byte("\xa1\x01\x02\x03"), func(k, v []byte, at int) bool { return true }); err == nil {
		t.Error("EachMember(map + trailing byte) = nil")
	}
	for _, v := range []uint64{0, 23, 24, 255, 256, 65535, 65536, 1 << 32, 1<<64 - 1} {
		b := AppendHead(nil, Uint, v)
		h, err := ParseHead(b, 0)
		if err != nil || h.Arg != v || h.Len != len(b) {
			t.Errorf("ParseHead(AppendHead(%d)) = %+v, %v", v, h, err)
		}
	}
}

// FuzzSkip: on any input Skip stays in bounds, never panics, and what it
// accepts the walkers accept too.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{"\xd9\xd9\xf7\xa2\x44type\x45ADDED\x46object\xbf\x41a\x5f\x41b\xff\xff", "\x9f\x9f\xff\xff", "\xfb\x00\x00\x00\x00\x00\x00\x00\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := Skip(b, 0)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(b) {
				t.Fatalf("Skip error %v out of bounds", err)
			}
			return
		}
		if end <= 0 || end > len(b) {
			t.Fatalf("Skip = %d for %d bytes", end, len(b))
		}
		item := b[:end]
		EachMember(item, func(k, v []byte, at int) bool { String(k); Int(v); return true })
		EachElement(item, func(e []byte, at int) error { String(e); return nil })
		String(item)
	})
}
