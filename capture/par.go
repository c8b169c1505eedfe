package capture

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wtrace/wtrace/formats"
)

// Parsing connections in parallel (Options.Workers).
//
// The Recorder's goroutine decodes packets and reassembles TCP as always;
// what reassembly delivers to a connection (bytes, a gap, a FIN, the end)
// becomes an op in a batch instead of a call, its bytes copied into the
// batch. A full batch is handed to the workers: each takes a connection
// with ops in the batch, runs them in order — the same detection, TLS,
// HTTP, event splitting and redaction as without workers — and keeps the
// records they write, copied, with the op that wrote them. While the
// workers parse one batch the Recorder's goroutine fills the next, then
// merges the parsed one: it walks its ops in order and hands their
// records to the Sink. That is the order one goroutine writes them in,
// since records only ever come from ops, and each op's records in the
// order its connection wrote them.
//
// What the connections share is done by the merge. Each connection has a
// session of its own, numbering its own connection (0) and its exchanges
// (0, 1, …); the merge gives each Conn record the session's next
// connection ID and each Request record its next exchange ID, in merge
// order, and rewrites the IDs of every later record of that connection
// (mergeState). It also counts what Stats counts of records (Conns,
// Exchanges, Events, Anomalies, Redactions); counts that no record states
// (TLS connections) come as countRecords. The redaction key (one
// redact.Secrets, safe for concurrent use) and the key log are shared: a
// pcapng's Decryption Secrets Block waits until every packet before it is
// parsed (Recorder.drain).
//
// Memory: two batches (the one filled, the one parsed or merged), each at
// most batchBytes of delivered bytes (plus one delivery) and batchOps
// ops, and the records their parsing wrote, copied.

// Limits of a batch (variables so that tests can make batches tiny).
var (
	// batchBytes is the delivered bytes at which a batch is handed to the
	// workers: enough for every worker to find several connections in it
	// (a 500 MB capture of 100 watch connections is ~500 batches), small
	// enough that the two batches held at once cost a few MiB.
	batchBytes = 1 << 20
	// batchOps bounds the ops of a batch (deliveries without bytes:
	// gaps, ends; or bytes a few at a time).
	batchOps = 8192
)

type opKind uint8

const (
	opData   opKind = iota // bytes: data
	opGap                  // n bytes lost
	opFin                  // the direction's FIN
	opFinish               // the connection ends: reason, status
	opRecord               // a record of the TCP side (st is nil): rec
)

// op is one delivery to a connection, or one record of the TCP side.
type op struct {
	st     *tcpStream
	rec    formats.Record // opRecord
	data   []byte         // opData: in the batch's arena
	t      int64
	n      int64 // opGap
	last   int64 // the stream's last packet time when delivered (tcpStream.snap)
	next   int32 // the next op of the same stream in the batch, or -1
	out    int32 // its records: outs[w].ents[out:end]
	end    int32
	w      int16
	kind   opKind
	dir    uint8
	syn    bool
	reason formats.ConnEndReason
	status formats.EndStatus
}

// task is one stream's ops in a batch: the first and the last, linked by
// op.next.
type task struct {
	st          *tcpStream
	first, last int32
}

// batch is a run of ops, in the order the TCP side delivered them.
type batch struct {
	gen   uint32
	ops   []op
	tasks []task
	arena []byte // the delivered bytes
	next  atomic.Int32
	wg    sync.WaitGroup
	outs  []*outBuf // by worker; the last is the Recorder's goroutine's
}

// par is a Recorder's workers and its two batches.
type par struct {
	r        *Recorder
	maxBytes int // batchBytes and batchOps when the par was made
	maxOps   int
	workers  []chan *batch
	scr      []*scratch // by worker (the last: the Recorder's goroutine)
	stats    []*Stats   // by worker: what connections count (the merge counts it again)
	cur      *batch     // being filled
	inflight *batch     // parsed by the workers, or parsed and not merged
	gen      uint32
	stopped  bool

	nextConn     uint64
	nextExchange int64
}

// mergeState is what the merge knows of a connection parsed on workers:
// the IDs it gave it (read and written by the merge only).
type mergeState struct {
	announced bool
	id        uint64  // its Conn ID
	ex        []int64 // the exchange IDs, by the connection's own number
}

func newPar(r *Recorder, n int) *par {
	p := &par{r: r, workers: make([]chan *batch, n), maxBytes: batchBytes, maxOps: batchOps}
	for range n + 1 {
		p.scr = append(p.scr, new(scratch))
		p.stats = append(p.stats, new(Stats))
	}
	for i := range p.workers {
		ch := make(chan *batch, 1)
		p.workers[i] = ch
		go p.run(i, ch)
	}
	p.cur = p.newBatch()
	return p
}

func (p *par) newBatch() *batch {
	p.gen++
	b := &batch{gen: p.gen, outs: make([]*outBuf, len(p.workers)+1)}
	for i := range b.outs {
		b.outs[i] = new(outBuf)
	}
	return b
}

// add appends an op for st (nil for opRecord) to the batch being filled,
// with a copy of data, and hands the batch on when it is full.
func (p *par) add(st *tcpStream, o op, data []byte) {
	b := p.cur
	o.st = st
	if st != nil {
		o.syn, o.last = st.syn, st.last
	}
	if len(data) > 0 {
		if cap(b.arena)-len(b.arena) < len(data) {
			// The earlier ops keep the array they point into.
			b.arena = make([]byte, 0, max(p.maxBytes+p.maxBytes/4, len(data)))
		}
		at := len(b.arena)
		b.arena = append(b.arena, data...)
		o.data = b.arena[at:len(b.arena):len(b.arena)]
	}
	i := int32(len(b.ops))
	o.next = -1
	b.ops = append(b.ops, o)
	if st != nil {
		if st.pgen != b.gen {
			st.pgen, st.ptask = b.gen, int32(len(b.tasks))
			b.tasks = append(b.tasks, task{st: st, first: i, last: i})
		} else {
			tk := &b.tasks[st.ptask]
			b.ops[tk.last].next = i
			tk.last = i
		}
	}
	if len(b.ops) >= p.maxOps || len(b.arena) >= p.maxBytes {
		p.cut()
	}
}

// cut hands the batch being filled to the workers (after the one they
// parse is done) and merges the one they parsed.
func (p *par) cut() {
	b := p.cur
	if len(b.ops) == 0 || p.stopped {
		return
	}
	old := p.inflight
	if old != nil {
		p.wait(old)
	}
	p.dispatch(b)
	p.inflight = b
	if old != nil {
		p.merge(old)
		p.reset(old)
		p.cur = old
	} else {
		p.cur = p.newBatch()
	}
}

// drain parses and merges everything delivered so far.
func (p *par) drain() {
	p.cut()
	if b := p.inflight; b != nil {
		p.wait(b)
		p.inflight = nil
		p.merge(b)
		p.reset(b)
	}
}

// stop drains, then ends the workers. Records are not merged once the
// Sink failed.
func (p *par) stop() {
	if p.stopped {
		return
	}
	p.drain()
	p.stopped = true
	for _, ch := range p.workers {
		close(ch)
	}
}

func (p *par) reset(b *batch) {
	p.gen++
	b.gen = p.gen
	clear(b.ops) // let go of streams and records
	b.ops = b.ops[:0]
	clear(b.tasks)
	b.tasks = b.tasks[:0]
	b.arena = b.arena[:0]
	b.next.Store(0)
	for _, o := range b.outs {
		o.reset()
	}
}

func (p *par) dispatch(b *batch) {
	b.wg.Add(len(p.workers))
	for _, ch := range p.workers {
		ch <- b
	}
}

// wait parses what is left of b on the Recorder's goroutine, then waits
// for the workers to finish it.
func (p *par) wait(b *batch) {
	p.parse(b, len(p.workers))
	b.wg.Wait()
}

// run is worker i.
func (p *par) run(i int, ch chan *batch) {
	for b := range ch {
		p.parse(b, i)
		b.wg.Done()
	}
}

// parse runs the ops of the tasks of b it takes, as worker w.
func (p *par) parse(b *batch, w int) {
	out, scr, stats := b.outs[w], p.scr[w], p.stats[w]
	for {
		k := int(b.next.Add(1)) - 1
		if k >= len(b.tasks) {
			return
		}
		st := b.tasks[k].st
		if st.c.s == nil {
			st.c.s = &session{secrets: p.r.s.secrets, counts: true}
		}
		st.c.s.sink, st.c.s.scr, st.c.s.stats = out, scr, stats
		for i := b.tasks[k].first; i >= 0; i = b.ops[i].next {
			o := &b.ops[i]
			o.w, o.out = int16(w), int32(len(out.ents))
			st.c.syn, st.c.last = o.syn, o.last
			switch o.kind {
			case opData:
				st.connData(int(o.dir), o.data, o.t)
			case opGap:
				st.connGap(int(o.dir), o.n, o.t)
			case opFin:
				st.connFin(int(o.dir), o.t)
			case opFinish:
				st.connFinish(o.reason, o.status, o.t)
			}
			o.end = int32(len(out.ents))
		}
	}
}

// merge hands the records of b's ops to the Recorder's session, in op
// order, with the IDs one session would have given them.
func (p *par) merge(b *batch) {
	s := p.r.s
	for i := range b.ops {
		o := &b.ops[i]
		if o.kind == opRecord {
			p.emit(nil, o.rec)
			continue
		}
		out := b.outs[o.w]
		for e := o.out; e < o.end && s.err == nil; e++ {
			p.emit(&o.st.c.m, out.record(e))
		}
	}
}

// emit renumbers r, a record of the connection whose merge state is *m
// (m nil: of the TCP side), counts it, and writes it.
func (p *par) emit(m **mergeState, r formats.Record) {
	s := p.r.s
	if s.err != nil {
		return
	}
	st := s.stats
	if m != nil {
		if err := p.renumber(m, r); err != nil {
			s.err = err
			return
		}
	}
	switch r := r.(type) {
	case *countRecord:
		st.TLSConns += r.tlsConns
		st.TLSUndecrypted += r.tlsUndecrypted
		return
	case *formats.Conn:
		st.Conns++
	case *formats.Request:
		st.Exchanges++
	case *formats.Frame:
		st.Events++
	case *formats.Anomaly:
		st.Anomalies++
	}
	s.emit(r)
}

// renumber gives r the session's IDs of its connection and exchange.
func (p *par) renumber(mp **mergeState, r formats.Record) error {
	if *mp == nil {
		*mp = new(mergeState)
	}
	m := *mp
	ex := func(x *int64) error {
		if *x == formats.NoExchange {
			return nil
		}
		if *x < 0 || *x >= int64(len(m.ex)) {
			return fmt.Errorf("capture: internal error: a %s record names exchange %d of a connection that began %d", r.Type(), *x, len(m.ex))
		}
		*x = m.ex[*x]
		return nil
	}
	conn := func(c *uint64) {
		if m.announced {
			*c = m.id
		}
	}
	switch r := r.(type) {
	case *formats.Conn:
		m.announced, m.id = true, p.nextConn
		p.nextConn++
		r.ID = m.id
	case *formats.TLS:
		conn(&r.Conn)
	case *formats.Request:
		if r.Exchange != int64(len(m.ex)) {
			return fmt.Errorf("capture: internal error: exchange %d of a connection begins after %d", r.Exchange, len(m.ex))
		}
		m.ex = append(m.ex, p.nextExchange)
		p.nextExchange++
		r.Exchange = m.ex[len(m.ex)-1]
		conn(&r.Conn)
	case *formats.Response:
		return ex(&r.Exchange)
	case *formats.Frame:
		return ex(&r.Exchange)
	case *formats.Body:
		return ex(&r.Exchange)
	case *formats.Chunk:
		return ex(&r.Exchange)
	case *formats.End:
		return ex(&r.Exchange)
	case *formats.ConnEnd:
		conn(&r.Conn)
	case *formats.Anomaly:
		conn(&r.Conn)
		return ex(&r.Exchange)
	}
	return nil
}

// countRecord carries, from a connection parsed on a worker, counts of
// Stats that no record states, to be added in merge order. It never
// reaches a Sink.
type countRecord struct{ tlsConns, tlsUndecrypted int64 }

func (*countRecord) Type() formats.Type { return 0 }

// outBuf keeps the records one worker's ops wrote in a batch, copied (a
// Sink's records are valid only during Write): the many Frames, Chunks
// and Bodies in slabs and their bytes in an arena, reused batch after
// batch; the few others each copied on its own.
type outBuf struct {
	ents   []outEnt
	frames []formats.Frame
	chunks []formats.Chunk
	bodies []formats.Body
	bytes  []byte
	ints   []int
}

// outEnt is one record: of a slab (kind, i), or rec.
type outEnt struct {
	rec  formats.Record
	i    int32
	kind formats.Type
}

func (o *outBuf) reset() {
	clear(o.ents) // the records copied one by one
	o.ents = o.ents[:0]
	o.frames, o.chunks, o.bodies = o.frames[:0], o.chunks[:0], o.bodies[:0]
	o.bytes, o.ints = o.bytes[:0], o.ints[:0]
}

// record returns record e.
func (o *outBuf) record(e int32) formats.Record {
	en := &o.ents[e]
	switch en.kind {
	case formats.TypeFrame:
		return &o.frames[en.i]
	case formats.TypeChunk:
		return &o.chunks[en.i]
	case formats.TypeBody:
		return &o.bodies[en.i]
	}
	return en.rec
}

// copyBytes returns a copy of b in the arena (nil for nil). The arena
// grows by a new array when full: what points into the old one keeps it.
func (o *outBuf) copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	if cap(o.bytes)-len(o.bytes) < len(b) {
		o.bytes = make([]byte, 0, max(2*cap(o.bytes), len(b), 64<<10))
	}
	at := len(o.bytes)
	o.bytes = append(o.bytes, b...)
	return o.bytes[at:len(o.bytes):len(o.bytes)]
}

func (o *outBuf) copyInts(v []int) []int {
	if v == nil {
		return nil
	}
	if cap(o.ints)-len(o.ints) < len(v) {
		o.ints = make([]int, 0, max(2*cap(o.ints), len(v), 1024))
	}
	at := len(o.ints)
	o.ints = append(o.ints, v...)
	return o.ints[at:len(o.ints):len(o.ints)]
}

// Write implements Sink: it keeps a copy of r.
func (o *outBuf) Write(r formats.Record) error {
	switch v := r.(type) {
	case *formats.Frame:
		f := *v
		f.Pre, f.Data, f.Redacted = o.copyBytes(v.Pre), o.copyBytes(v.Data), o.copyInts(v.Redacted)
		o.frames = append(o.frames, f)
		o.ents = append(o.ents, outEnt{kind: formats.TypeFrame, i: int32(len(o.frames) - 1)})
		return nil
	case *formats.Chunk:
		o.chunks = append(o.chunks, *v)
		o.ents = append(o.ents, outEnt{kind: formats.TypeChunk, i: int32(len(o.chunks) - 1)})
		return nil
	case *formats.Body:
		b := *v
		b.Data = o.copyBytes(v.Data)
		o.bodies = append(o.bodies, b)
		o.ents = append(o.ents, outEnt{kind: formats.TypeBody, i: int32(len(o.bodies) - 1)})
		return nil
	case *formats.Request:
		c := *v
		c.Header = slices.Clone(v.Header)
		r = &c
	case *formats.Response:
		c := *v
		c.Header = slices.Clone(v.Header)
		r = &c
	case *formats.End:
		c := *v
		c.Tail = slices.Clone(v.Tail)
		c.Trailer = slices.Clone(v.Trailer)
		c.Redactions = slices.Clone(v.Redactions)
		r = &c
	case *formats.Conn:
		c := *v
		r = &c
	case *formats.TLS:
		c := *v
		r = &c
	case *formats.ConnEnd:
		c := *v
		r = &c
	case *formats.Anomaly:
		c := *v
		r = &c
	case *countRecord:
		c := *v
		r = &c
	default:
		return fmt.Errorf("capture: internal error: a connection wrote a %T record", r)
	}
	o.ents = append(o.ents, outEnt{rec: r})
	return nil
}
