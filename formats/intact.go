package formats

import (
	"errors"
	"io"
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
