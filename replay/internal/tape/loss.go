package tape

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// Loss is what a damaged session file lost of one recorded exchange: body
// bytes (watch events, or part of an opaque body) that were recorded but
// cannot be read back. A stream that crosses a loss is served without
// those bytes, logged with a warning when it reaches them, and always ends
// as a cut stream (the connection closed without the terminating chunk,
// or RST_STREAM), never as a clean, complete one.
type Loss struct {
	Exchange int64
	Request  string // method and request-target as recorded
	// Damage is the damaged region of the file the loss lies in.
	Damage *formats.DamageError
	// After is the number (Frame.Seq) of the last event read before the
	// loss; -1 if none was, or for an opaque body.
	After int64
	// Events is how many events were lost; -1 if unknown (an index rebuilt
	// from a damaged file cannot say how many it never saw); 0 for an
	// opaque body.
	Events int64
	// Offset is the body offset where the lost bytes begin; Bytes how many
	// were lost (-1: unknown).
	Offset, Bytes int64
	// From and To are the capture times (ns) of the last bytes read before
	// the loss and of the first after it (0: none).
	From, To int64
}

func (l *Loss) String() string {
	what := fmt.Sprintf("%d body bytes lost at body offset %d", l.Bytes, l.Offset)
	switch {
	case l.Events > 0:
		what = fmt.Sprintf("%d %s lost", l.Events, plural(l.Events, "event", "events"))
	case l.Events < 0:
		what = "events may be lost"
	case l.Bytes < 0:
		what = fmt.Sprintf("body bytes lost from body offset %d", l.Offset)
	}
	switch {
	case l.Events != 0 && l.After >= 0:
		what += fmt.Sprintf(" after event %d", l.After)
	case l.Events != 0:
		what += " before the first event read"
	}
	if l.From != 0 || l.To != 0 {
		what += " (capture time " + clockTime(l.From) + " to " + clockTime(l.To) + ")"
	}
	return fmt.Sprintf("exchange %d %s: %s: %v", l.Exchange, l.Request, what, l.Damage)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func clockTime(t int64) string {
	if t == 0 {
		return "?"
	}
	return time.Unix(0, t).UTC().Format("15:04:05.000")
}

// findLosses checks every block of session f (CheckBlocks: damage an
// intact index hides) and, for each exchange of m a damaged region may hold
// records of, reads its records to say what the damage lost of it: the
// losses by exchange, then body offset (none for a sound file).
func FindLosses(f *formats.File, m *Matcher) ([]*Loss, error) {
	checked, err := f.CheckBlocks()
	if err != nil {
		return nil, err
	}
	idx := f.Index()
	bad := map[int]bool{}
	for _, d := range checked {
		bad[d.Block] = true
	}
	// Damage found while rebuilding the index: its blocks are not in the
	// index, so any exchange whose records straddle it may have lost some.
	var rebuilt []*formats.DamageError
	for _, p := range f.Problems() {
		var d *formats.DamageError
		if errors.As(p, &d) && d.Block >= 0 {
			rebuilt = append(rebuilt, d)
		}
	}
	if len(bad) == 0 && len(rebuilt) == 0 {
		return nil, nil
	}
	var losses []*Loss
	for _, x := range m.All {
		touched := false
		for _, b := range x.Info.Blocks {
			touched = touched || bad[b]
		}
		if !touched && len(rebuilt) > 0 && len(x.Info.Blocks) > 0 {
			first := idx.Blocks[x.Info.Blocks[0]].Offset
			lb := idx.Blocks[x.Info.Blocks[len(x.Info.Blocks)-1]]
			last := lb.Offset + lb.Size
			if x.Info.End == nil {
				last = 1<<63 - 1
			}
			for _, d := range rebuilt {
				touched = touched || d.Offset >= first && d.Offset < last
			}
		}
		if !touched {
			continue
		}
		ls, err := exchangeLosses(f, x)
		if err != nil {
			return nil, err
		}
		losses = append(losses, ls...)
	}
	sort.SliceStable(losses, func(i, j int) bool {
		a, b := losses[i], losses[j]
		if a.Exchange != b.Exchange {
			return a.Exchange < b.Exchange
		}
		return a.Offset < b.Offset
	})
	return losses, nil
}

// exchangeLosses reads the records of exchange x and returns its losses.
func exchangeLosses(f *formats.File, x *Exchange) ([]*Loss, error) {
	sc := f.ExchangeRecords(x.ID)
	lt := newLossTracker(f, x)
	var out []*Loss
	add := func(l *Loss) {
		if l != nil {
			out = append(out, l)
		}
	}
	for {
		rec, err := sc.NextIntact(lt.damage)
		if err == io.EOF {
			add(lt.finish(0))
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch r := rec.(type) {
		case *formats.Frame:
			add(lt.piece(r.Offset, int64(len(r.Pre)+len(r.Data)), r.Seq, r.Time))
		case *formats.Body:
			if r.Dir == formats.ServerToClient {
				add(lt.piece(r.Offset, int64(len(r.Data)), -1, r.Time))
			}
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				add(lt.finish(int64(len(r.Tail))))
				return out, nil
			}
		}
	}
}

// lossTracker follows the body pieces of one exchange as they are read
// and says, after each damaged region, whether it lost any: a jump in the
// events' numbers or in body offsets across it, or, after the last piece,
// fewer events or bytes read than the index counts.
type lossTracker struct {
	x       *Exchange
	rebuilt bool // the index was rebuilt: its counts are of what was read
	pending *formats.DamageError
	seq     int64 // last event number read; -1 none
	end     int64 // body offset after the last piece read; -1 none
	t       int64 // capture time of the last piece read
	frames  int64
	bytes   int64
}

func newLossTracker(f *formats.File, x *Exchange) *lossTracker {
	lt := &lossTracker{x: x, seq: -1, end: -1}
	for _, p := range f.Problems() {
		lt.rebuilt = lt.rebuilt || errors.Is(p, formats.ErrNoIndex)
	}
	return lt
}

// damage notes a damaged region met while reading the exchange.
func (lt *lossTracker) damage(d *formats.DamageError) {
	if lt.pending == nil {
		lt.pending = d
	}
}

func (lt *lossTracker) loss() *Loss {
	return &Loss{Exchange: lt.x.ID, Request: lt.x.Q.Method + " " + lt.x.target, Damage: lt.pending,
		After: lt.seq, Offset: max(lt.end, 0), Bytes: -1, From: lt.t}
}

// piece notes a body piece of n bytes at body offset off, captured at t;
// seq is its event number, -1 for a piece of an opaque body. It returns
// the loss the damage before it caused, if any.
func (lt *lossTracker) piece(off, n, seq, t int64) *Loss {
	var l *Loss
	if lt.pending != nil {
		events := int64(0)
		if seq >= 0 {
			events = seq - lt.seq - 1
		}
		var bytes int64
		switch {
		case lt.end >= 0:
			bytes = off - lt.end
		case seq < 0 && !lt.x.Info.Response.Midstream:
			bytes = off
		}
		if events > 0 || bytes > 0 {
			l = lt.loss()
			l.Events, l.Bytes, l.To = max(events, 0), max(bytes, 0), t
			if l.Events > 0 && l.Bytes == 0 {
				l.Bytes = -1
			}
		}
		lt.pending = nil
	}
	if seq >= 0 {
		lt.seq = seq
		lt.frames++
	}
	lt.end, lt.t = off+n, t
	lt.bytes += n
	return l
}

// finish is called at the end of the exchange's records (tail: the bytes
// of its End's Tail, still to come). It returns the loss of a damaged
// region after the last piece, if any.
func (lt *lossTracker) finish(tail int64) *Loss {
	if lt.pending == nil {
		return nil
	}
	events := lt.x.Info.Frames - lt.frames
	bytes := lt.x.Info.BodyBytes - lt.bytes - tail
	var l *Loss
	switch {
	case events > 0 || bytes > 0:
		l = lt.loss()
		l.Events, l.Bytes = max(events, 0), max(bytes, 0)
		if lt.x.Format == 0 {
			l.Events = 0
		}
	case lt.rebuilt:
		// The counts are of what survived: nothing says whether the
		// region held more of this exchange.
		l = lt.loss()
		if lt.x.Format != 0 {
			l.Events = -1
		}
	}
	lt.pending = nil
	return l
}
