package formats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ReaderOptions configure reading. The zero value is ready to use.
type ReaderOptions struct {
	// StopOnDamage makes Next return the first DamageError stickily instead
	// of skipping to the next intact block.
	StopOnDamage bool
}

// Reader reads records in file order from a stream (no seeking needed).
// It holds one block at a time: memory is bounded by the largest block
// (MaxBlockSize). Not safe for concurrent use.
type Reader struct {
	br      *blockReader
	stop    bool
	recs    []Record
	pos     int
	pending error // damage of the file header, reported by the first Next
	err     error // sticky
}

// NewReader reads and checks the file header from r. A file too short to
// hold a header is a *DamageError wrapping io.ErrUnexpectedEOF (if what is
// there matches the magic) or ErrNotSession; a newer version is ErrVersion.
// A header whose checksum fails, or whose magic is damaged while the rest of
// the header or the first block's header checks out, is reported by the
// first Next, as damage at offset 0 (block -1); the blocks are read as
// the newest version (which reads every earlier one's).
func NewReader(r io.Reader, opts ReaderOptions) (*Reader, error) {
	hdr := make([]byte, fileHeaderSize)
	n, err := io.ReadFull(r, hdr)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("formats: read file header: %w", err)
	}
	var next []byte
	if n == fileHeaderSize && [8]byte(hdr[:8]) != fileMagic {
		// Is a damaged magic followed by a sound block?
		next = make([]byte, maxBlockHeaderSize)
		m, err := io.ReadFull(r, next)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("formats: read at offset %d: %w", fileHeaderSize, err)
		}
		next = next[:m]
		r = io.MultiReader(bytes.NewReader(next), r)
	}
	rd := &Reader{br: newBlockReader(r, fileHeaderSize, opts.StopOnDamage), stop: opts.StopOnDamage}
	if err := checkFileHeader(hdr[:n], next); err != nil {
		var d *DamageError
		if n < fileHeaderSize || !errors.As(err, &d) {
			return nil, err
		}
		rd.pending = d
	}
	return rd, nil
}

// Next returns the next record. At the end of the records (the index block,
// or a clean end of file) it returns io.EOF. A damaged or cut region yields a
// *DamageError; unless StopOnDamage, the following call resumes at the next
// intact block. Other errors (of the underlying reader) are sticky. The
// record is the caller's: it shares no memory with the Reader.
func (r *Reader) Next() (Record, error) {
	for {
		if r.pos < len(r.recs) {
			rec := r.recs[r.pos]
			r.recs[r.pos] = nil
			r.pos++
			return rec, nil
		}
		if r.pending != nil {
			err := r.pending
			r.pending = nil
			if r.stop {
				r.err = err
			}
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		blk, err := r.br.next()
		if err != nil {
			return nil, err
		}
		recs, err := blockRecords(blk, r.recs[:0], nil, false)
		r.recs, r.pos = recs, 0
		if err != nil {
			if r.stop {
				r.err = err
			}
			return nil, err
		}
	}
}

// blockRecords decodes the records of blk into dst; damage is a
// *DamageError naming the block. With alias, byte slices in the records
// alias blk.payload.
func blockRecords(blk block, dst []Record, filter recordFilter, alias bool) ([]Record, error) {
	recs, n, err := decodeRecords(blk.payload, dst, filter, alias, blk.hdr.typ == blockDelta)
	if err == nil && n != blk.hdr.records {
		err = fmt.Errorf("%w: %w: %d records, header says %d", errCorrupt, errBlockCount, n, blk.hdr.records)
	}
	if err != nil {
		clear(recs)
		return recs[:0], &DamageError{Offset: blk.off, Block: int(blk.hdr.seq), Err: err}
	}
	return recs, nil
}
