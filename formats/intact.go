package formats

import (
	"errors"
	"iter"
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
		for r, err := range s.All() {
			var de *DamageError
			if err != nil && errors.As(err, &de) && !s.f.stop {
				if onDamage != nil {
					onDamage(de)
				}
				continue
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
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
