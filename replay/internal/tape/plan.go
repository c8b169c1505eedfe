package tape

import (
	"container/list"
	"io"
	"sync"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// write is one piece of a response body to send, then flush: a recorded
// chunk (or, in event mode or where chunks cannot be reproduced, a frame or
// a body piece). Its data is immutable and may be shared by many clients.
type Write struct {
	At   int64 // capture time (ns) at which the recorded server sent it
	Off  int64 // body offset of data[0]
	Data []byte

	// For the events of a watch body, when the replay keeps a world (see
	// replay's flow): the largest numeric resourceVersion among the events whose
	// data starts in this write (0: none), the first one's, and where that
	// first event may be cut out to be sent rewritten (JSON: its data;
	// protobuf: its length prefix); cut says the write ends inside an
	// event.
	RV, RV0 uint64
	EvOff   int64
	Cut     bool
	// event: data is one event's exact bytes (an eventSource), rewritten
	// and framed when it is sent.
	Event bool
	// events counts the watch events whose data ends in this write (for
	// the metrics).
	Events int32
	// lost, on a write without data, marks where the session's damage
	// lost body bytes (off: where they begin).
	Lost *Loss
	// ext: the recorded chunk's extensions, written after its size when
	// the replay frames the chunks itself (replay's conn.go).
	Ext string
}

// mark is one watch event of a planned exchange, for resuming after it.
type Mark struct {
	End        int64 // body offset just past the event's Data
	Time       int64
	RV         string
	InitialEnd bool // the initial-events-end bookmark
}

// plan is an exchange's body cut into timed writes, built once and shared
// (read-only) by every client that is served it.
type Plan struct {
	Writes []Write
	Size   int64 // bytes held, for the cache budget
}

// source yields an exchange's writes in order: from a cached plan or
// streamed from the file.
type Source interface {
	// next returns the next write; ok is false at the end.
	Next() (w Write, ok bool, err error)
}

type PlanSource struct {
	Plan *Plan
	i    int
}

func (s *PlanSource) Next() (Write, bool, error) {
	if s.i >= len(s.Plan.Writes) {
		return Write{}, false, nil
	}
	s.i++
	return s.Plan.Writes[s.i-1], true, nil
}

// eventSource yields the events of watch exchange x whose data starts at
// body offset from or later, one write each (event set), read from the
// file; what the session's damage lost is a write of its own (lost set),
// as from a producer.
type eventSource struct {
	sc   *formats.Scanner
	lt   *lossTracker
	from int64
	out  []Write
	done bool
}

// newEventSource reads the events of exchange x of f from body offset from.
func NewEventSource(f *formats.File, x *Exchange, from int64) Source {
	return &eventSource{sc: f.ExchangeRecords(x.ID), lt: newLossTracker(f, x), from: from}
}

func (e *eventSource) lost(l *Loss) {
	if l != nil {
		e.out = append(e.out, Write{At: l.From, Off: l.Offset, Lost: l})
	}
}

func (e *eventSource) Next() (Write, bool, error) {
	for len(e.out) == 0 {
		if e.done {
			return Write{}, false, nil
		}
		rec, err := e.sc.NextIntact(e.lt.damage)
		if err == io.EOF {
			e.lost(e.lt.finish(0))
			e.done = true
			continue
		}
		if err != nil {
			return Write{}, false, err
		}
		switch r := rec.(type) {
		case *formats.Frame:
			e.lost(e.lt.piece(r.Offset, int64(len(r.Pre)+len(r.Data)), r.Seq, r.Time))
			if ds := r.Offset + int64(len(r.Pre)); ds >= e.from {
				e.out = append(e.out, Write{At: r.Time, Off: ds, Data: append([]byte(nil), r.Data...), Event: true})
			}
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				e.lost(e.lt.finish(int64(len(r.Tail))))
				e.done = true
			}
		}
	}
	w := e.out[0]
	e.out = e.out[1:]
	return w, true, nil
}

// producer turns one exchange's records into writes, incrementally: it holds
// at most the bytes of the chunk being assembled (a chunk whose bytes are
// not all stored yet) plus one record.
type producer struct {
	sc     *formats.Scanner
	chunks bool // reproduce recorded chunk boundaries

	pend    []byte // contiguous body bytes not yet emitted, from pendOff
	pendOff int64
	lastT   int64
	queue   []formats.Chunk // chunk records whose bytes are not all here yet
	out     []Write
	ended   bool
	sawData bool
	nextOff int64 // body offset after the last segment (for the End's Tail)
	lt      *lossTracker

	// annotate: mark writes with their events (see write), format the
	// watch's; spans are the events not yet wholly emitted.
	annotate bool
	format   frame.Format
	spans    []span
}

// span is where one event lies in the body, and its resourceVersion.
type span struct {
	start, dataStart, dataEnd int64
	rv                        uint64
}

// newProducer reads exchange x. eventChunks asks for one write per event
// (and body piece) instead of the recorded chunks; annotate marks the
// writes of a watch with their events' resourceVersions (see write).
func NewProducer(f *formats.File, x *Exchange, eventChunks, annotate bool) Source {
	p := &producer{sc: f.ExchangeRecords(x.ID), lt: newLossTracker(f, x), format: x.Format, annotate: annotate && x.Format != frame.Unknown}
	r := x.Info.Response
	// Chunk offsets are in body bytes before content decoding; frames are
	// stored decoded, so a compressed event body cannot keep its chunks.
	p.chunks = !eventChunks && x.Info.Chunks > 0 &&
		(r.Framing == formats.FramingChunked || r.Framing == formats.FramingH2) &&
		(r.Events == frame.Unknown || r.Encoding == "")
	return p
}

func (p *producer) Next() (Write, bool, error) {
	for len(p.out) == 0 {
		if p.ended {
			return Write{}, false, nil
		}
		rec, err := p.sc.NextIntact(func(de *formats.DamageError) {
			// Records were lost: what follows cannot be matched with
			// chunk boundaries any more.
			p.lt.damage(de)
			p.segmentMode()
		})
		if err == io.EOF {
			p.lost(p.lt.finish(0))
			p.finish()
			continue
		}
		if err != nil {
			return Write{}, false, err
		}
		switch r := rec.(type) {
		case *formats.Frame:
			b := make([]byte, 0, len(r.Pre)+len(r.Data))
			b = append(append(b, r.Pre...), r.Data...)
			if p.format != frame.Unknown {
				ds := r.Offset + int64(len(r.Pre))
				sp := span{start: r.Offset, dataStart: ds, dataEnd: ds + int64(len(r.Data))}
				sp.rv, _ = RVNumber(PeekRV(p.format, r.Data))
				p.spans = append(p.spans, sp)
			}
			p.lost(p.lt.piece(r.Offset, int64(len(b)), r.Seq, r.Time))
			p.segment(r.Offset, b, r.Time)
		case *formats.Body:
			if r.Dir == formats.ServerToClient {
				p.lost(p.lt.piece(r.Offset, int64(len(r.Data)), -1, r.Time))
				p.segment(r.Offset, r.Data, r.Time)
			}
		case *formats.Chunk:
			if p.chunks {
				p.queue = append(p.queue, *r)
				p.drain()
			}
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				p.lost(p.lt.finish(int64(len(r.Tail))))
				if len(r.Tail) > 0 {
					p.segment(p.nextOff, r.Tail, r.Time)
				}
				p.finish()
			}
		}
	}
	w := p.out[0]
	p.out[0] = Write{}
	p.out = p.out[1:]
	return w, true, nil
}

// lost marks loss l (if not nil) where the stream has got to: after what
// was read before the damaged region.
func (p *producer) lost(l *Loss) {
	if l == nil {
		return
	}
	p.segmentMode()
	p.emit(Write{At: l.From, Off: l.Offset, Lost: l})
}

// segment takes stored body bytes b at body offset off, stored at time t.
func (p *producer) segment(off int64, b []byte, t int64) {
	if len(b) == 0 {
		return
	}
	p.sawData = true
	p.nextOff = off + int64(len(b))
	if !p.chunks {
		p.emit(Write{At: t, Off: off, Data: b})
		return
	}
	if len(p.pend) == 0 {
		p.pendOff = off
	} else if off != p.pendOff+int64(len(p.pend)) {
		// A gap or overlap: chunks no longer line up with what is stored.
		p.segmentMode()
		p.emit(Write{At: t, Off: off, Data: b})
		return
	}
	p.pend = append(p.pend, b...)
	p.lastT = t
	p.drain()
}

// drain emits every queued chunk whose bytes are all pending.
func (p *producer) drain() {
	for len(p.queue) > 0 && len(p.pend) > 0 {
		c := p.queue[0]
		end := c.Offset + c.Size
		if end <= p.pendOff {
			p.queue = p.queue[1:] // its bytes were not stored (midstream)
			continue
		}
		if end > p.pendOff+int64(len(p.pend)) {
			return
		}
		n := end - p.pendOff
		p.emit(Write{At: c.Time, Off: p.pendOff, Data: p.pend[:n:n], Ext: c.Ext})
		p.pend = p.pend[n:]
		p.pendOff = end
		p.queue = p.queue[1:]
	}
}

// segmentMode gives up on chunk boundaries: what is pending goes out as one
// write and later bytes as they were stored.
func (p *producer) segmentMode() {
	if len(p.pend) > 0 {
		p.emit(Write{At: p.lastT, Off: p.pendOff, Data: p.pend})
	}
	p.pend, p.queue, p.chunks = nil, nil, false
}

func (p *producer) finish() {
	p.segmentMode()
	p.ended = true
}

func (p *producer) emit(w Write) {
	if n := len(p.out); n > 0 && w.At < p.out[n-1].At {
		w.At = p.out[n-1].At // keep the schedule monotonic
	}
	if p.format != frame.Unknown {
		p.mark(&w)
	}
	p.out = append(p.out, w)
}

// mark sets w's event fields from the spans of the events seen so far
// (every event with bytes in w has been seen: its Frame record brought
// them).
func (p *producer) mark(w *Write) {
	end := w.Off + int64(len(w.Data))
	first := true
	for _, sp := range p.spans {
		if sp.dataStart >= w.Off && sp.dataStart < end {
			if first {
				w.RV0, w.EvOff, first = sp.rv, sp.dataStart, false
				if p.format == frame.Protobuf {
					w.EvOff = sp.start // its length prefix is sent again
				}
			}
			w.RV = max(w.RV, sp.rv)
		}
		if sp.dataEnd > w.Off && sp.dataEnd <= end {
			w.Events++
		}
		cutFrom := sp.dataStart
		if p.format == frame.Protobuf {
			cutFrom = sp.start
		}
		if cutFrom < end && end < sp.dataEnd {
			w.Cut = true
		}
	}
	i := 0
	for i < len(p.spans) && p.spans[i].dataEnd <= end {
		i++
	}
	p.spans = p.spans[i:]
}

// peekRV reads an event's resourceVersion ("" if it has none).
func PeekRV(f frame.Format, data []byte) string {
	m, err := frame.Peek(f, data)
	if err != nil {
		return ""
	}
	return m.ResourceVersion
}

// buildPlan reads exchange x whole into a plan.
func BuildPlan(f *formats.File, x *Exchange, eventChunks, annotate bool) (*Plan, error) {
	p := NewProducer(f, x, eventChunks, annotate)
	pl := &Plan{}
	for {
		w, ok, err := p.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		pl.Writes = append(pl.Writes, w)
		pl.Size += int64(len(w.Data)) + 48
	}
	return pl, nil
}

// marks reads the events of watch exchange x (type, resourceVersion, where
// each ends) without keeping their bytes.
func ReadMarks(f *formats.File, x *Exchange) ([]Mark, error) {
	sc := f.ExchangeRecords(x.ID)
	var ms []Mark
	for {
		rec, err := sc.NextIntact(nil)
		if err == io.EOF {
			return ms, nil
		}
		if err != nil {
			return ms, err
		}
		if fr, ok := rec.(*formats.Frame); ok {
			ms = append(ms, MarkOf(x, fr))
		}
	}
}

// markOf reads the mark of one event of watch exchange x.
func MarkOf(x *Exchange, fr *formats.Frame) Mark {
	m, _ := frame.Peek(x.Format, fr.Data)
	return Mark{
		End:        fr.Offset + int64(len(fr.Pre)) + int64(len(fr.Data)),
		Time:       fr.Time,
		RV:         m.ResourceVersion,
		InitialEnd: m.Type == "BOOKMARK" && m.InitialEventsEnd,
	}
}

// cache is a size-bounded LRU of values built once per key; concurrent
// getters of a key being built wait for the one build (no thundering herd
// when thousands of clients ask for the same exchange at once). Values in
// use by clients stay alive after eviction until those clients finish.
type Cache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *cacheEntry, most recent first
	byKey  map[string]*cacheEntry
}

type cacheEntry struct {
	key   string
	ready chan struct{}
	val   any
	size  int64
	err   error
	elem  *list.Element
}

func NewCache(budget int64) *Cache {
	return &Cache{budget: budget, lru: list.New(), byKey: map[string]*cacheEntry{}}
}

// get returns the value for key, building it with build (which returns the
// value and its size in bytes) if it is not cached. Errors are not cached.
func (c *Cache) Get(key string, build func() (any, int64, error)) (any, error) {
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
		}
		c.mu.Unlock()
		<-e.ready
		return e.val, e.err
	}
	e := &cacheEntry{key: key, ready: make(chan struct{})}
	c.byKey[key] = e
	c.mu.Unlock()

	v, size, err := build()

	c.mu.Lock()
	e.val, e.size, e.err = v, size, err
	if err != nil || size > c.budget {
		delete(c.byKey, key) // shared with current waiters only
	} else {
		e.elem = c.lru.PushFront(e)
		c.used += size
		for c.used > c.budget {
			old := c.lru.Back().Value.(*cacheEntry)
			c.lru.Remove(old.elem)
			delete(c.byKey, old.key)
			c.used -= old.size
		}
	}
	c.mu.Unlock()
	close(e.ready)
	return v, err
}
