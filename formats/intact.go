package formats

import (
	"cmp"
	"errors"
	"io"
	"iter"
	"slices"
)

// Intact returns an iterator over the rest of the records that reads past
// damage: each damaged region is handed to onDamage (nil drops it), in its
// place among the records, and the iteration goes on at the next intact
// block. Any other error ends the iteration: it is yielded once, with a
// nil record, so that a range loop returns it. With
// ReaderOptions.StopOnDamage the first damage ends the iteration the same
// way. It is the loop of every reader of a session that skips what it
// cannot read.
//
//	for r, err := range f.Records().Intact(func(d *formats.DamageError) { lost = append(lost, d) }) {
//		if err != nil {
//			return err
//		}
//		…
//	}
func (s *Scanner) Intact(onDamage func(*DamageError)) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			r, err := s.NextIntact(onDamage)
			if err == io.EOF || !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// NextIntact is Next reading past damage, for readers that pull: it hands
// each damaged region to onDamage (nil drops it) and returns the next
// intact record, io.EOF at the end, or another error (with StopOnDamage,
// the first damage too).
func (s *Scanner) NextIntact(onDamage func(*DamageError)) (Record, error) {
	for {
		r, err := s.Next()
		var de *DamageError
		if err != nil && err != io.EOF && errors.As(err, &de) && !s.f.stop {
			if onDamage != nil {
				onDamage(de)
			}
			continue
		}
		return r, err
	}
}

// Verification is what Verify found in a session file.
type Verification struct {
	// Blocks is the number of data blocks of the index (read, or rebuilt
	// by reading the file); Records the records read intact.
	Blocks  int
	Records int64
	// Damage lists the damaged regions, in file order.
	Damage []*DamageError
	// Problems lists what opening found that is not damage: a missing or
	// damaged index (wrapping ErrNoIndex).
	Problems []error
	// Clean is true when the file was closed cleanly (index, footer and
	// Summary intact) and nothing is damaged.
	Clean bool
}

// Verify reads every record of f, checking every block, and says what is
// intact (`wtrace verify`). Its error is one of reading (not damage).
func (f *File) Verify() (Verification, error) {
	v := Verification{Blocks: len(f.idx.Blocks)}
	for _, err := range f.Records().Intact(func(d *DamageError) { v.Damage = append(v.Damage, d) }) {
		if err != nil {
			return v, err
		}
		v.Records++
	}
	for _, p := range f.problems {
		var de *DamageError
		if !errors.As(p, &de) { // damage is among the records, in order
			v.Problems = append(v.Problems, p)
		}
	}
	v.Clean = f.clean && len(v.Damage) == 0
	return v, nil
}

// Damages gathers the damaged regions a reader of f met, once per region
// (a DamageError's Offset): a reader that meets a region more than once
// (an exchange's records read again, the regions opening found) lists it
// once. The zero value is ready to use. Not safe for concurrent use.
type Damages struct {
	seen map[int64]bool
	list []*DamageError
}

// Add notes region d; false when it was noted before.
func (ds *Damages) Add(d *DamageError) bool {
	if ds.seen[d.Offset] {
		return false
	}
	if ds.seen == nil {
		ds.seen = map[int64]bool{}
	}
	ds.seen[d.Offset] = true
	ds.list = append(ds.list, d)
	return true
}

// AddFound notes the damage opening f found (its Problems) that the reads
// did not meet: a block no record is known to lie in, every block when
// none is intact.
func (ds *Damages) AddFound(f *File) {
	for _, p := range f.Problems() {
		var d *DamageError
		if errors.As(p, &d) {
			ds.Add(d)
		}
	}
}

// Errors returns the regions noted, in file order, as errors.
func (ds *Damages) Errors() []error {
	slices.SortStableFunc(ds.list, func(a, b *DamageError) int { return cmp.Compare(a.Offset, b.Offset) })
	out := make([]error, len(ds.list))
	for i, d := range ds.list {
		out[i] = d
	}
	return out
}
