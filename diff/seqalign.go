package diff

// The write alignment: the successful writes of one object in A and B,
// aligned as a minimal edit script. Two writes are the same (no cost) when
// their verb, request (path and stable parameters), status and normalized
// body are; they may pair as one changed write (cost 1) when their verb
// is (they write the same object); any other write is missing from B or extra in B (cost
// 1). So one write missing in B is one difference, and the writes after
// it still pair with their like. A missing write and an extra one that
// are the same are one reordered write.
//
// The script is found by dynamic programming over the part of the two
// sequences between their common prefix and suffix (usually all of
// them are common: the cost is linear); when that part holds more than
// maxAlignCells pairs, its writes pair by position instead.

// maxAlignCells bounds the table of the dynamic programme (4 bytes a
// cell): 16 MiB.
const maxAlignCells = 4 << 20

type writeOp uint8

const (
	wMatch     writeOp = iota // the same write in both
	wChanged                  // the same verb, another request, body or status
	wReordered                // the same write, in another place
	wMissing                  // in A only
	wExtra                    // in B only
)

// wstep is one step of a write alignment: indexes into A and B, -1 where
// the step has no write of that side.
type wstep struct {
	op   writeOp
	i, j int
}

func sameWrite(x, y *exch) bool {
	return x.req.key == y.req.key && x.status == y.status && x.verb() == y.verb() && x.reqDoc.same(y.reqDoc)
}

func pairableWrite(x, y *exch) bool { return x.verb() == y.verb() }

// alignWrites aligns a and b (see above); limbo bounds how many missing
// and extra writes are searched for reordered pairs.
func alignWrites(a, b []*exch, limbo int) []wstep {
	steps := make([]wstep, 0, max(len(a), len(b)))
	p := 0
	for p < len(a) && p < len(b) && sameWrite(a[p], b[p]) {
		steps = append(steps, wstep{wMatch, p, p})
		p++
	}
	ea, eb := len(a), len(b)
	for ea > p && eb > p && sameWrite(a[ea-1], b[eb-1]) {
		ea--
		eb--
	}
	steps = append(steps, alignMiddle(a, b, p, ea, p, eb)...)
	for k := 0; k < len(a)-ea; k++ {
		steps = append(steps, wstep{wMatch, ea + k, eb + k})
	}
	return reorders(a, b, steps, limbo)
}

// alignMiddle aligns a[i0:i1] with b[j0:j1].
func alignMiddle(a, b []*exch, i0, i1, j0, j1 int) []wstep {
	n, m := i1-i0, j1-j0
	var out []wstep
	if n == 0 || m == 0 || (n+1)*(m+1) > maxAlignCells {
		k := 0
		for ; k < n && k < m; k++ {
			x, y := a[i0+k], b[j0+k]
			switch {
			case sameWrite(x, y):
				out = append(out, wstep{wMatch, i0 + k, j0 + k})
			case pairableWrite(x, y):
				out = append(out, wstep{wChanged, i0 + k, j0 + k})
			default:
				out = append(out, wstep{wMissing, i0 + k, -1}, wstep{wExtra, -1, j0 + k})
			}
		}
		for ; k < n; k++ {
			out = append(out, wstep{wMissing, i0 + k, -1})
		}
		for ; k < m; k++ {
			out = append(out, wstep{wExtra, -1, j0 + k})
		}
		return out
	}
	// cost[i][j]: the cheapest script for a[i0+i:i1] and b[j0+j:j1].
	w := m + 1
	cost := make([]int32, (n+1)*w)
	for i := n; i >= 0; i-- {
		for j := m; j >= 0; j-- {
			switch {
			case i == n:
				cost[i*w+j] = int32(m - j)
			case j == m:
				cost[i*w+j] = int32(n - i)
			default:
				best := cost[(i+1)*w+j] + 1 // missing
				if c := cost[i*w+j+1] + 1; c < best {
					best = c // extra
				}
				x, y := a[i0+i], b[j0+j]
				if sameWrite(x, y) {
					best = min(best, cost[(i+1)*w+j+1])
				} else if pairableWrite(x, y) {
					best = min(best, cost[(i+1)*w+j+1]+1)
				}
				cost[i*w+j] = best
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i == n:
			out = append(out, wstep{wExtra, -1, j0 + j})
			j++
			continue
		case j == m:
			out = append(out, wstep{wMissing, i0 + i, -1})
			i++
			continue
		}
		here := cost[i*w+j]
		x, y := a[i0+i], b[j0+j]
		switch {
		case sameWrite(x, y) && here == cost[(i+1)*w+j+1]:
			out = append(out, wstep{wMatch, i0 + i, j0 + j})
			i, j = i+1, j+1
		case !sameWrite(x, y) && pairableWrite(x, y) && here == cost[(i+1)*w+j+1]+1:
			out = append(out, wstep{wChanged, i0 + i, j0 + j})
			i, j = i+1, j+1
		case here == cost[(i+1)*w+j]+1:
			out = append(out, wstep{wMissing, i0 + i, -1})
			i++
		default:
			out = append(out, wstep{wExtra, -1, j0 + j})
			j++
		}
	}
	return out
}

// reorders turns a missing write and an extra one that are the same into
// one reordered step (at the missing one's place), among the first limbo
// of each.
func reorders(a, b []*exch, steps []wstep, limbo int) []wstep {
	var extras []int // indexes into steps
	for k, st := range steps {
		if st.op == wExtra && len(extras) < limbo {
			extras = append(extras, k)
		}
	}
	if len(extras) == 0 {
		return steps
	}
	drop := map[int]bool{}
	seen := 0
	for k := range steps {
		if steps[k].op != wMissing || seen >= limbo {
			continue
		}
		seen++
		for x, e := range extras {
			if e >= 0 && sameWrite(a[steps[k].i], b[steps[e].j]) {
				steps[k] = wstep{wReordered, steps[k].i, steps[e].j}
				drop[e], extras[x] = true, -1
				break
			}
		}
	}
	if len(drop) == 0 {
		return steps
	}
	out := steps[:0]
	for k, st := range steps {
		if !drop[k] {
			out = append(out, st)
		}
	}
	return out
}
