package diff

import (
	"fmt"
	"strings"
	"testing"
)

// TestAligner: sequences of one-letter items (the letter is the key;
// a trailing ' marks an item whose content differs) and the operations
// the aligner finds.
func TestAligner(t *testing.T) {
	for _, tc := range []struct {
		a, b   string
		window int
		want   string
	}{
		{"abc", "abc", 0, "=a =b =c"},
		{"", "", 0, ""},
		{"abc", "", 0, "-a -b -c"},
		{"", "abc", 0, "+a +b +c"},
		{"abc", "ac", 0, "=a =c -b"},
		{"ac", "abc", 0, "=a =c +b"},
		{"abcd", "abdc", 0, "=a =b =c ~d"},
		{"xyz", "yzx", 0, "=y =z ~x"},
		{"abc", "xyz", 0, "-a -b -c +x +y +z"},
		{"abab", "abb", 0, "=a =b =b -a"},
		{"aaaa", "aaa", 0, "=a =a =a -a"},
		{"abcdefgh", "hgfedcba", 0, "=a ~b ~c ~d ~e ~f ~g ~h"},
		{"abcdef", "abXYZcdef", 0, "=a =b =c =d =e =f +X +Y +Z"},
		// A window (and limbo) of 2 cannot see past three extra items: c
		// and d leave the limbo as missing before their partners come,
		// and come again as extra; e and f still pair up, as reordered.
		{"abcdef", "abXYZcdef", 2, "=a =b -c -d +X +Y +Z ~e ~f +c +d"},
	} {
		t.Run(tc.a+"/"+tc.b, func(t *testing.T) {
			var got []string
			w := tc.window
			if w == 0 {
				w = 100
			}
			al := &aligner[string]{
				nextA:  sliceSource(strings.Split(tc.a, "")),
				nextB:  sliceSource(strings.Split(tc.b, "")),
				key:    func(s string) string { return s },
				size:   func(string) int64 { return 1 },
				window: w, limbo: w, budget: 1 << 20,
				emit: func(op opKind, a, b string) error {
					v := a
					if op == opExtra {
						v = b
					}
					got = append(got, fmt.Sprintf("%c%s", "=~-+"[op], v))
					return nil
				},
			}
			if tc.a == "" {
				al.nextA = sliceSource([]string{})
			}
			if tc.b == "" {
				al.nextB = sliceSource([]string{})
			}
			if err := al.run(); err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("align(%q, %q) = %q; want %q", tc.a, tc.b, g, tc.want)
			}
		})
	}
}

// TestAlignerBounded: two long sequences that share nothing keep at most
// the window and limbo of each side.
func TestAlignerBounded(t *testing.T) {
	const n, w = 100000, 50
	i, j := 0, 0
	maxHeld := 0
	var al *aligner[int]
	al = &aligner[int]{
		nextA:  func() (int, bool, error) { i++; return 2 * i, i <= n, nil },
		nextB:  func() (int, bool, error) { j++; return 2*j + 1, j <= n, nil },
		key:    func(v int) string { return fmt.Sprint(v) },
		size:   func(int) int64 { return 1 },
		window: w, limbo: w, budget: 1 << 20,
		emit: func(op opKind, a, b int) error {
			if h := al.qa.len() + al.qb.len() + al.la.len() + al.lb.len(); h > maxHeld {
				maxHeld = h
			}
			return nil
		},
	}
	if err := al.run(); err != nil {
		t.Fatal(err)
	}
	if maxHeld > 4*w+2 {
		t.Errorf("held %d items at most; want at most %d", maxHeld, 4*w+2)
	}
}
