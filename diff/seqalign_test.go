package diff

import (
	"fmt"
	"strings"
	"testing"
)

// w is a write for alignment tests: a verb, a body digest, a status.
func w(verb string, body uint64, status int) *exch {
	return &exch{req: request{method: verb, key: verb + " /x"}, status: status, reqDoc: digest{norm: body, normOK: true}}
}

func TestAlignWrites(t *testing.T) {
	put := func(b uint64) *exch { return w("PUT", b, 200) }
	del := w("DELETE", 0, 200)
	for _, tc := range []struct {
		name string
		a, b []*exch
		want string // ops: = match, ~ changed, r reordered, - missing, + extra
	}{
		{"same", []*exch{put(1), put(2), put(3)}, []*exch{put(1), put(2), put(3)}, "==="},
		{"one missing in the middle", []*exch{put(1), put(2), put(3), put(4)}, []*exch{put(1), put(3), put(4)}, "=-=="},
		{"one extra at the start", []*exch{put(2), put(3)}, []*exch{put(1), put(2), put(3)}, "+=="},
		{"one changed", []*exch{put(1), put(2), put(3)}, []*exch{put(1), put(9), put(3)}, "=~="},
		{"another status", []*exch{put(1), put(2)}, []*exch{put(1), w("PUT", 2, 201)}, "=~"},
		{"another verb", []*exch{put(1), put(2)}, []*exch{put(1), del}, "=-+"},
		{"reordered", []*exch{put(1), del, put(2)}, []*exch{put(1), put(2), del}, "=r="},
		{"all missing", []*exch{put(1), put(2)}, nil, "--"},
		{"all extra", nil, []*exch{put(1)}, "+"},
		{"both empty", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got strings.Builder
			for _, st := range alignWrites(tc.a, tc.b, 100) {
				got.WriteString(map[writeOp]string{wMatch: "=", wChanged: "~", wReordered: "r", wMissing: "-", wExtra: "+"}[st.op])
			}
			if got.String() != tc.want {
				t.Errorf("alignWrites = %q; want %q", got.String(), tc.want)
			}
		})
	}
}

// TestAlignWritesLong: sequences longer than the table bounds pair by
// position, and a long common run costs one pass.
func TestAlignWritesLong(t *testing.T) {
	n := 3000
	a, b := make([]*exch, n), make([]*exch, n)
	for i := range a {
		a[i], b[i] = w("PUT", uint64(i), 200), w("PUT", uint64(i+n), 200)
	}
	steps := alignWrites(a, b, 10)
	if len(steps) != n || steps[0].op != wChanged || steps[n-1].op != wChanged {
		t.Fatalf("%d steps, first %v", len(steps), steps[0])
	}
	same := alignWrites(a, a, 10)
	if len(same) != n || fmt.Sprint(same[n-1]) != fmt.Sprint(wstep{wMatch, n - 1, n - 1}) {
		t.Fatalf("same: %d steps, last %v", len(same), same[n-1])
	}
}
