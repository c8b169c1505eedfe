package chunked

import "bytes"

// Resync finds where chunk framing resumes in p, for a stream captured from
// its middle or after a gap.
//
// Candidates are the positions where a chunk-size line may begin: p[0] (the
// first byte after the gap; also p[1] when p[0] is '\n', for a capture that
// began between CR and LF) and every position right after a CRLF. For each
// candidate Resync follows the chain of chunks as far as p reaches: a
// complete, valid size line, then size bytes of data, CRLF, and the next
// size line, and so on, until p ends (inside data, inside a CRLF or inside a
// size line that is valid so far) or the last-chunk's trailer section and
// final CRLF are complete. Any violation rejects the candidate. The chosen
// candidate is, in order of preference:
//
//  1. the first one whose chain holds at least two complete size lines or
//     reaches the end of the body (strong evidence);
//  2. else the first one with a complete size line whose data runs to the
//     end of p (weak evidence: only the size line itself vouches for it, so
//     callers should pass as much data as they have, e.g. a whole segment).
//
// A last-chunk ("0" line) is accepted only together with its complete
// trailer section, so that a capture starting inside "8000\r\n" does not
// read "000\r\n" as the end of the body.
//
// On success Resync returns the offset of the chosen size line in p and
// ok; the decoder is positioned at that line (any previous parse state and
// sticky error are discarded), Offset has advanced by skip, and BodyOffset
// is unchanged: bytes skipped are lost, not decoded. Next is then called
// with p[skip:].
//
// When ok is false, skip is how many leading bytes of p can be dropped:
// Offset advances by skip, and the caller calls Resync again with p[skip:]
// followed by the next contiguous bytes. len(p)-skip < MaxLineLength: what
// is kept is at most a candidate size line (or last-chunk with its
// trailers) that is not complete yet. The decoder remembers the two bytes
// before p[skip] so that the next call knows whether its p[0] follows a
// CRLF. A call to Next, or to Resync with an empty p (do that after a
// further gap), ends such a sequence.
//
// Weak evidence can be wrong; Next then fails at the first chunk boundary
// that does not fit, and the caller may Resync again from there.
//
// Resync allocates (it memoizes chains); it is meant for the rare moments
// a stream is joined, not for every segment.
func (d *Decoder) Resync(p []byte) (skip int, ok bool) {
	cont, tail := d.rsCont, d.rsTail
	d.state, d.err, d.rem, d.excess, d.lineN, d.chunk = stSize, nil, 0, 0, 0, Chunk{}
	if len(p) == 0 {
		d.rsCont = false
		return 0, false
	}

	r := resyncer{p: p}
	weak, pending := -1, -1
	chosen := -1
	consider := func(i int) bool {
		switch v := r.verdict(i); {
		case v == vStrong:
			chosen = i
			return true
		case v == vWeak && weak < 0:
			weak = i
		case v == vPending && pending < 0:
			pending = i
		}
		return false
	}
	done := false
	if !cont || tail == [2]byte{'\r', '\n'} {
		done = consider(0)
	}
	if !done && len(p) > 0 && p[0] == '\n' && (!cont || tail[1] == '\r') {
		done = consider(1)
	}
	for from := 0; !done; {
		k := bytes.Index(p[from:], crlf)
		if k < 0 {
			break
		}
		from += k + 2
		done = consider(from)
	}
	if chosen < 0 {
		chosen = weak
	}
	if chosen >= 0 {
		d.off += int64(chosen)
		d.rsCont = false
		return chosen, true
	}

	skip = len(p)
	if pending >= 0 {
		skip = pending
	}
	switch {
	case skip >= 2:
		d.rsTail = [2]byte{p[skip-2], p[skip-1]}
	case skip == 1 && !cont && p[0] == '\n':
		d.rsTail = [2]byte{'\r', '\n'} // the stream start counts as a CR
	case skip == 1:
		d.rsTail = [2]byte{tail[1], p[0]}
	default:
		return 0, false // nothing dropped: the next call starts where this one did
	}
	d.rsCont = true
	d.off += int64(skip)
	return skip, false
}

var crlf = []byte("\r\n")

type verdict uint8

const (
	vInvalid verdict = iota
	vPending
	vWeak
	vStrong
)

// term says how a chain ended.
type term uint8

const (
	tEnd     term = iota // p ended inside data, a CRLF or a size line
	tInvalid             // a rule was broken
	tDone                // the last-chunk, its trailers and the final CRLF
	tOpen                // the last-chunk, with its trailer section unfinished
)

// link is the memoized result of a chain starting at a size line: how many
// complete size lines it holds and how it ended.
type link struct {
	count int32
	term  term
}

type resyncer struct {
	p    []byte
	memo map[int]link
	path []int
}

func (r *resyncer) verdict(i int) verdict {
	l := r.chain(i)
	switch {
	case l.term == tInvalid:
		return vInvalid
	case l.term == tDone || l.count >= 2:
		return vStrong
	case l.count == 0:
		return vPending // an incomplete first line, shorter than MaxLineLength
	case l.term == tOpen:
		if len(r.p)-i < MaxLineLength {
			return vPending
		}
		return vInvalid
	default:
		return vWeak
	}
}

// chain evaluates the chain from the size line at i. Every size line on the
// way is memoized, so evaluating all candidates is linear in len(p).
func (r *resyncer) chain(i int) link {
	if r.memo == nil {
		r.memo = make(map[int]link)
	}
	r.path = r.path[:0]
	pos := i
	var res link
	for {
		if l, ok := r.memo[pos]; ok {
			res = l
			break
		}
		next, l, more := r.step(pos)
		if !more {
			r.memo[pos] = l
			res = l
			break
		}
		r.path = append(r.path, pos)
		pos = next
	}
	for k := len(r.path) - 1; k >= 0; k-- {
		if res.term != tInvalid {
			res.count++
		}
		r.memo[r.path[k]] = res
	}
	return r.memo[i]
}

// step checks the size line at pos, its data and the CRLF after it. It
// returns the position of the next size line and more, or the final link
// for pos.
func (r *resyncer) step(pos int) (next int, l link, more bool) {
	p := r.p
	rest := p[pos:]
	q := rest
	if len(q) > MaxLineLength {
		q = q[:MaxLineLength]
	}
	e := bytes.IndexByte(q, '\n')
	if e < 0 {
		if !validSizePrefix(rest) {
			return 0, link{term: tInvalid}, false
		}
		return 0, link{term: tEnd}, false
	}
	c, _, code := lineContent(rest[:e+1])
	if code != codeOK {
		return 0, link{term: tInvalid}, false
	}
	size, _, _, _, code := parseSizeLine(c)
	if code != codeOK {
		return 0, link{term: tInvalid}, false
	}
	lineEnd := pos + e + 1
	if size == 0 {
		return 0, link{count: 1, term: r.trailers(lineEnd)}, false
	}
	if uint64(len(p)-lineEnd) <= size {
		return 0, link{count: 1, term: tEnd}, false
	}
	de := lineEnd + int(size)
	if p[de] != '\r' || de+1 < len(p) && p[de+1] != '\n' {
		return 0, link{term: tInvalid}, false
	}
	if de+1 == len(p) {
		return 0, link{count: 1, term: tEnd}, false
	}
	return de + 2, link{}, true
}

// trailers checks the trailer section starting at pos.
func (r *resyncer) trailers(pos int) term {
	total := 0
	for {
		rest := r.p[pos:]
		q := rest
		if len(q) > MaxLineLength {
			q = q[:MaxLineLength]
		}
		e := bytes.IndexByte(q, '\n')
		if e < 0 {
			if len(q) == MaxLineLength {
				return tInvalid
			}
			return tOpen
		}
		c, _, code := lineContent(rest[:e+1])
		if code != codeOK {
			return tInvalid
		}
		if len(c) == 0 {
			return tDone
		}
		if _, _, _, _, code := parseField(c); code != codeOK {
			return tInvalid
		}
		total += e + 1
		if total > MaxOverhead {
			return tInvalid
		}
		pos += e + 1
	}
}
