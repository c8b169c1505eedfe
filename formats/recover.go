package formats

import (
	"errors"
	"fmt"
	"io"
)

// Recover copies every intact record of the damaged or unclosed file src into
// a new file written to dst, with a fresh index and footer. It returns what
// was lost.
//
// It reads every block (it does not trust the index), so it also finds
// damage an index would hide, and checks the blocks' numbers: a block
// repeated in src (a byte range copied twice) is copied once, and missing
// or out-of-order blocks are among the problems. Records keep their order;
// blocks are cut afresh. If the Meta record was lost, the Meta of src's index (or, without
// one, a Meta saying it was lost) is written first; if src has no Summary,
// Recover writes one counting what it copied. When anything was lost, the
// Summary's Note says so. A src whose header has the wrong magic is read
// anyway; if no block is found in it, Recover returns ErrNotSession.
func Recover(src io.ReaderAt, size int64, dst io.Writer) ([]error, error) {
	var problems []error
	notSession := false
	if err := checkHeaderAt(src, size); err != nil {
		var d *DamageError
		switch {
		case errors.Is(err, ErrVersion):
			return nil, err
		case errors.Is(err, ErrNotSession):
			notSession = true
			problems = append(problems, err)
		case errors.As(err, &d):
			problems = append(problems, err)
		default:
			return nil, err
		}
	}
	idx, _, ierr := readIndex(src, size)
	if ierr != nil {
		problems = append(problems, fmt.Errorf("%w: %v", ErrNoIndex, ierr))
		idx = nil
	}
	w, err := NewWriter(dst, WriterOptions{})
	if err != nil {
		return problems, err
	}
	var (
		blocks  int
		summary *Summary
		last    int64
	)
	writeMeta := func() error {
		if w.meta {
			return nil
		}
		m := &Meta{Tool: "wtrace", Description: "recovered session: its Meta record was lost"}
		if idx != nil && idx.Meta != nil {
			m = idx.Meta
		}
		return w.Write(m)
	}
	damage, err := scan(src, size, func(blk block, recs []Record) error {
		blocks++
		for _, r := range recs {
			if _, ok := r.(*Meta); !ok {
				if err := writeMeta(); err != nil {
					return err
				}
			}
			if s, ok := r.(*Summary); ok {
				summary = s
				continue // written last
			}
			if t, ok := recordTime(r); ok {
				last = max(last, t)
			}
			if err := w.Write(r); err != nil {
				return err
			}
		}
		return nil
	})
	problems = append(problems, damage...)
	if err != nil {
		return problems, err
	}
	if notSession && blocks == 0 {
		return problems, ErrNotSession
	}
	if err := writeMeta(); err != nil {
		return problems, err
	}
	if summary == nil && idx != nil && idx.Summary != nil {
		summary = idx.Summary
	}
	if summary == nil {
		x := w.idx
		summary = &Summary{
			Time:      last,
			Conns:     x.nConns,
			Exchanges: x.nExchanges,
			Events:    x.frames,
			Anomalies: int64(len(x.idx.Anomalies)),
			Note:      "written by formats.Recover: the session had no Summary",
		}
	}
	if len(problems) > 0 {
		s := *summary
		note := fmt.Sprintf("recovered: %d problems (%v)", len(problems), problems[0])
		if s.Note != "" {
			note = s.Note + "; " + note
		}
		s.Note = note
		summary = &s
	}
	if err := w.Write(summary); err != nil {
		return problems, err
	}
	return problems, w.Close()
}
