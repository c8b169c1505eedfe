package diff

import (
	"fmt"
	"strings"
)

// Limits of a unified diff: the edit distance searched for a minimal diff
// (Myers' algorithm keeps O(D²) state; beyond it the differing middle is
// shown as replaced whole), the lines of context, and the lines shown.
const (
	maxEditDistance = 1000
	diffContext     = 3
	maxDiffLines    = 400
)

// edit is one line of a line diff.
type edit struct {
	op   byte // ' ', '-', '+'
	a, b int  // line numbers (0-based) in a and b; for '-' b is where it would go, for '+' a likewise
}

// unified returns a unified diff (context diffContext) of texts a and b
// with the given file headers, or "" if they are equal. It shows at most
// maxDiffLines lines, then says how many it left out.
func unified(a, b []byte, nameA, nameB string) string {
	la, lb := splitLines(string(a)), splitLines(string(b))
	edits := lineDiff(la, lb)
	changed := false
	for _, e := range edits {
		if e.op != ' ' {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	lines, omitted := 0, 0
	emit := func(s string) {
		if lines < maxDiffLines {
			out.WriteString(s)
			lines++
		} else {
			omitted++
		}
	}
	for i := 0; i < len(edits); {
		// Find the next change, and the hunk around it: changes closer
		// than 2×context lines apart share a hunk.
		for i < len(edits) && edits[i].op == ' ' {
			i++
		}
		if i == len(edits) {
			break
		}
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(edits); j++ {
			if edits[j].op != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		end = min(end+diffContext, len(edits))
		var na, nb int
		for _, e := range edits[start:end] {
			if e.op != '+' {
				na++
			}
			if e.op != '-' {
				nb++
			}
		}
		emit(fmt.Sprintf("@@ -%s +%s @@\n", hunkRange(edits[start].a, na), hunkRange(edits[start].b, nb)))
		for _, e := range edits[start:end] {
			switch e.op {
			case '+':
				emit("+" + lb[e.b] + "\n")
			default:
				emit(string(e.op) + la[e.a] + "\n")
			}
		}
		i = end
	}
	if omitted > 0 {
		fmt.Fprintf(&out, "… %d more diff lines\n", omitted)
	}
	return out.String()
}

// hunkRange formats a hunk's line range ("3,7", "3" for one line, "2,0"
// for none, after line 2), as diff -u does.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineDiff returns the edit script turning a into b: the common prefix
// and suffix, and Myers' shortest edit script for the middle (replaced
// whole when more than maxEditDistance edits apart).
func lineDiff(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for i := 0; i < pre; i++ {
		out = append(out, edit{' ', i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb)
	if !ok {
		mid = mid[:0]
		for i := range ma {
			mid = append(mid, edit{'-', i, 0})
		}
		for j := range mb {
			mid = append(mid, edit{'+', len(ma), j})
		}
	}
	for _, e := range mid {
		out = append(out, edit{e.op, e.a + pre, e.b + pre})
	}
	for i := 0; i < suf; i++ {
		out = append(out, edit{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return out
}

// myers is Myers' O(ND) greedy algorithm ("An O(ND) Difference Algorithm
// and Its Variations", 1986) with the V array of every D kept for the
// walk back. ok is false beyond maxEditDistance.
func myers(a, b []string) ([]edit, bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	maxD := min(n+m, maxEditDistance)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: an insertion
			} else {
				x = v[off+k-1] + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, v, off, d, n, m), true
			}
		}
	}
	return nil, false
}

func backtrack(trace [][]int, last []int, off, d, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for ; d > 0; d-- {
		v := trace[d] // V as it was before step d
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[off+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, edit{' ', x, y})
		}
		if x == px {
			y--
			rev = append(rev, edit{'+', x, y})
		} else {
			x--
			rev = append(rev, edit{'-', x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{' ', x, y})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}
