package diff

// The aligner pairs two sequences read in order (the events of two watch
// streams, the writes of one object in two sessions) by an identity key,
// streaming: while the heads match it holds nothing; when they differ it
// reads ahead at most a window on each side, finds the nearest pair of
// items with the same key (the smallest i+j), and sets aside what comes
// before it. Items set aside wait, a bounded number, for a partner with
// the same key that comes later on the other side (then they were
// reordered); those that find none are missing (A) or extra (B).
//
// Memory: at most window items on each side read ahead, plus limbo items
// set aside, and their bytes at most budget per side (an item that alone
// is over budget is still read: progress needs it).

type opKind uint8

const (
	opMatch     opKind = iota // a and b: the same item in both
	opReordered               // a and b: the same item, in another order
	opMissing                 // a only
	opExtra                   // b only
)

type aligner[T any] struct {
	nextA, nextB func() (T, bool, error)
	key          func(T) string
	same         func(a, b T) bool // optional fast path: equal items match without their keys
	size         func(T) int64     // bytes an item holds
	emit         func(op opKind, a, b T) error
	window       int
	limbo        int
	budget       int64

	qa, qb     queue[T]
	la, lb     queue[T]
	ka, kb     map[string]int // keys set aside, with their counts
	eofA, eofB bool
}

// queue is a FIFO over a slice.
type queue[T any] struct {
	items []T
	head  int
	bytes int64
}

func (q *queue[T]) len() int   { return len(q.items) - q.head }
func (q *queue[T]) at(i int) T { return q.items[q.head+i] }
func (q *queue[T]) push(v T, n int64) {
	q.items = append(q.items, v)
	q.bytes += n
}
func (q *queue[T]) pop(n func(T) int64) T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	q.bytes -= n(v)
	if q.head > 64 && q.head*2 > len(q.items) {
		m := copy(q.items, q.items[q.head:])
		clear(q.items[m:])
		q.items = q.items[:m]
		q.head = 0
	}
	return v
}

// removeAt takes item i out of the queue.
func (q *queue[T]) removeAt(i int, n func(T) int64) T {
	var zero T
	v := q.items[q.head+i]
	copy(q.items[q.head+i:], q.items[q.head+i+1:])
	q.items[len(q.items)-1] = zero
	q.items = q.items[:len(q.items)-1]
	q.bytes -= n(v)
	return v
}

func (al *aligner[T]) fill(q *queue[T], next func() (T, bool, error), eof *bool, n int) error {
	for !*eof && q.len() < n && (q.len() == 0 || q.bytes < al.budget) {
		v, ok, err := next()
		if err != nil {
			return err
		}
		if !ok {
			*eof = true
			break
		}
		q.push(v, al.size(v))
	}
	return nil
}

// run aligns the two sequences to their ends.
func (al *aligner[T]) run() error {
	for {
		if err := al.fill(&al.qa, al.nextA, &al.eofA, 1); err != nil {
			return err
		}
		if err := al.fill(&al.qb, al.nextB, &al.eofB, 1); err != nil {
			return err
		}
		na, nb := al.qa.len(), al.qb.len()
		switch {
		case na == 0 && nb == 0:
			return al.flush()
		case na == 0:
			if err := al.setAsideB(al.qb.pop(al.size)); err != nil {
				return err
			}
			continue
		case nb == 0:
			if err := al.setAsideA(al.qa.pop(al.size)); err != nil {
				return err
			}
			continue
		}
		a, b := al.qa.at(0), al.qb.at(0)
		if (al.same != nil && al.same(a, b)) || al.key(a) == al.key(b) {
			al.qa.pop(al.size)
			al.qb.pop(al.size)
			if err := al.emit(opMatch, a, b); err != nil {
				return err
			}
			continue
		}
		// Look ahead in growing windows: most differences are resolved
		// within a few items, and the search costs the window's length.
		i, j := 0, 0
		for w := min(16, al.window); ; w = min(w*4, al.window) {
			if err := al.fill(&al.qa, al.nextA, &al.eofA, w); err != nil {
				return err
			}
			if err := al.fill(&al.qb, al.nextB, &al.eofB, w); err != nil {
				return err
			}
			var ok bool
			i, j, ok = al.anchor(w)
			if ok || w >= al.window || (al.qa.len() < w && al.qb.len() < w) {
				break
			}
		}
		for ; i > 0; i-- {
			if err := al.setAsideA(al.qa.pop(al.size)); err != nil {
				return err
			}
		}
		for ; j > 0; j-- {
			if err := al.setAsideB(al.qb.pop(al.size)); err != nil {
				return err
			}
		}
	}
}

// anchor returns the nearest pair (i, j) of items with the same key
// among the first w read ahead on each side, by i+j; without one, the
// number of items looked at on each side (all of them are set aside).
func (al *aligner[T]) anchor(w int) (int, int, bool) {
	na, nb := min(w, al.qa.len()), min(w, al.qb.len())
	first := make(map[string]int, nb)
	for j := 0; j < nb; j++ {
		k := al.key(al.qb.at(j))
		if _, ok := first[k]; !ok {
			first[k] = j
		}
	}
	bi, bj, best := na, nb, -1
	for i := 0; i < na && (best < 0 || i < best); i++ {
		if j, ok := first[al.key(al.qa.at(i))]; ok && (best < 0 || i+j < best) {
			bi, bj, best = i, j, i+j
		}
	}
	return bi, bj, best >= 0
}

// setAsideA sets aside an item of A that matched nothing at its place: a
// B item set aside with its key makes them a reordered pair.
func (al *aligner[T]) setAsideA(a T) error {
	return al.setAside(a, &al.la, &al.lb, &al.ka, al.kb, true)
}

func (al *aligner[T]) setAsideB(b T) error {
	return al.setAside(b, &al.lb, &al.la, &al.kb, al.ka, false)
}

// setAside puts v (of A if isA) among mine, unless theirs holds an item
// with its key: then the two were reordered.
func (al *aligner[T]) setAside(v T, mine, theirs *queue[T], myKeys *map[string]int, theirKeys map[string]int, isA bool) error {
	k := al.key(v)
	var zero T
	if theirKeys[k] > 0 {
		for i := 0; i < theirs.len(); i++ {
			if o := theirs.at(i); al.key(o) == k {
				theirs.removeAt(i, al.size)
				forget(theirKeys, k)
				if isA {
					return al.emit(opReordered, v, o)
				}
				return al.emit(opReordered, o, v)
			}
		}
	}
	if *myKeys == nil {
		*myKeys = map[string]int{}
	}
	mine.push(v, al.size(v))
	(*myKeys)[k]++
	for mine.len() > al.limbo || (mine.len() > 1 && mine.bytes > al.budget) {
		old := mine.pop(al.size)
		forget(*myKeys, al.key(old))
		var err error
		if isA {
			err = al.emit(opMissing, old, zero)
		} else {
			err = al.emit(opExtra, zero, old)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func forget(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// flush reports what is still set aside, in order.
func (al *aligner[T]) flush() error {
	var zero T
	for al.la.len() > 0 {
		if err := al.emit(opMissing, al.la.pop(al.size), zero); err != nil {
			return err
		}
	}
	for al.lb.len() > 0 {
		if err := al.emit(opExtra, zero, al.lb.pop(al.size)); err != nil {
			return err
		}
	}
	return nil
}
