package formats

import (
	"bytes"
	"encoding/base64"
	"testing"
)

func TestPlaceholder(t *testing.T) {
	sum := []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xff}
	tag := AppendPlaceholderTag(nil, sum)
	if string(tag) != "redacted-0123456789abcdef" || len(tag) != PlaceholderTagLen {
		t.Fatalf("AppendPlaceholderTag = %q", tag)
	}
	repeat := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = tag[i%len(tag)]
		}
		return b
	}
	for _, tc := range []struct {
		s    []byte
		want bool
	}{
		{repeat(10), true}, {repeat(25), true}, {repeat(60), true},
		{[]byte(base64.StdEncoding.EncodeToString(repeat(30))), true},
		{repeat(9), false}, // the prefix alone: the same in every recording
		{[]byte("redacted-0123456789abcdeX"), false},
		{append(repeat(30)[:29], 'x'), false},
		{[]byte("a secret value"), false},
		{[]byte(base64.StdEncoding.EncodeToString([]byte("a secret value"))), false},
		{nil, false},
	} {
		if got := IsPlaceholder(tc.s); got != tc.want {
			t.Errorf("IsPlaceholder(%q) = %v; want %v", tc.s, got, tc.want)
		}
	}
	if !bytes.HasPrefix([]byte(placeholderPrefixB64), []byte(base64.StdEncoding.EncodeToString([]byte(PlaceholderPrefix)))) {
		t.Errorf("placeholderPrefixB64 %q is not the base64 of %q", placeholderPrefixB64, PlaceholderPrefix)
	}
}
