package capture

import (
	"bytes"
	"log/slog"
	"time"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/chunked"
	"github.com/wtrace/wtrace/formats"
)

// Sink receives the records of a session in order: a formats.FileSink (which
// writes session files, with their Meta and Summary), a formats.Writer, or
// a test's collector.
//
// Ownership: a record handed to Write, and every slice it holds (Frame
// data, headers, body bytes), is valid only during the call — it may alias
// the source's packet or reassembly buffers, which are reused. A Sink
// copies what it keeps (formats.Writer encodes the record; formats.FileSink copies
// the few records it remembers for rotation). An error from Write is
// sticky for the source: it stops recording and reports it.
type Sink interface {
	Write(formats.Record) error
}

// Packet is one captured packet, as a Recorder takes it.
type Packet struct {
	Time int64 // capture time, nanoseconds since the Unix epoch
	// LinkType is the framing of Data, a LINKTYPE_ value
	// (https://www.tcpdump.org/linktypes.html): 1 Ethernet, 113 and 276
	// Linux cooked v1/v2, 0 and 108 BSD loopback, 101, 228 and 229 raw IP
	// (pcapfile.LinkType names them).
	LinkType uint16
	Data     []byte // the captured bytes; the Recorder does not keep them past the call
	Length   int    // the packet's length on the wire (more than len(Data) when the capture cut it)
}

// Options configure a Recorder. The zero value records every TCP
// connection that carries HTTP, with the default limits below.
type Options struct {
	// Port, if set, is the server's TCP port: only connections to or from
	// it are recorded, and its side is the server even when the traffic
	// does not show it (a connection captured from its middle). 0 finds
	// the HTTP side from the traffic itself.
	Port int
	// MaxBuffered bounds the bytes held for out-of-order TCP segments,
	// over all connections. 0 means 256 MiB.
	MaxBuffered int
	// MaxBufferedPerConn bounds them per connection. 0 means 32 MiB.
	MaxBufferedPerConn int
	// MaxConns bounds the connections open at once. When a new
	// connection finds no room, one makes way for it: the oldest flow
	// that never carried data (a half-open connection of a SYN flood or a
	// port scan), else the connection half closed the longest, else the
	// one idle the longest, which ends as cut by the capture (what it
	// sends later is recorded as a connection captured from its middle).
	// Each kind is reported once, with a count. A connection that ended
	// frees its slot at once. 0 means DefaultMaxConns.
	MaxConns int
	// ReorderWindow is how long (in capture time) data after a missing
	// segment waits for it before the bytes are declared lost; the data
	// keeps the capture times of its own packets either way. 0 means 10s.
	ReorderWindow time.Duration
	// KeyLog holds TLS secrets (an NSS key log, SSLKEYLOGFILE) to decrypt
	// TLS connections; nil records them as not decrypted.
	KeyLog *tlsdec.KeyLog
	// KeyLogSource, when set, feeds KeyLog while recording (a key log
	// clients are still writing, tlsdec.KeyLogFile): a TLS connection
	// whose secrets are not there yet holds its records (at most
	// tlsdec.DefaultMaxKeyWait per direction) and the source is re-read
	// until they come, for at most KeyLogWait. See keywait.go.
	KeyLogSource KeyLogSource
	// KeyLogWait is how long (capture time) a TLS connection waits for its
	// secrets; 0 means DefaultKeyLogWait with a KeyLogSource, no wait
	// without. A KeyLog that grows another way (Load while recording) is
	// waited for with a KeyLogWait and no source.
	KeyLogWait time.Duration
	// KeepSecrets stores Secret values, TokenRequest and TokenReview
	// tokens and Secrets' last-applied-configuration as captured. By
	// default they are replaced, decided by the content of every event and
	// body (see capture/redact). Credentials in headers and in the
	// request-target's query are never stored either way.
	KeepSecrets bool
	// Workers is how many connections are parsed at once: with more than
	// one, the bytes reassembly delivers go, a batch at a time, to a pool
	// of that many goroutines (each connection's on one at a time: TLS,
	// HTTP, event splitting, redaction), and their records are merged back
	// into the order one goroutine writes them, with the same IDs (records
	// of the same recording are identical either way, which the tests
	// check). The Sink is still called by the goroutine that calls Packet
	// and Close, though a batch later. 0 or 1 parses every connection on
	// that goroutine; so does any value when TLS connections wait for
	// their secrets (KeyLogWait, KeyLogSource), which couples connections
	// through the key log's timing. RecordPcap's zero value means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
}

// Stats counts what a Recorder has seen so far.
type Stats struct {
	Packets        int64 // packets read
	Bytes          int64 // captured bytes read
	TCPPackets     int64
	Skipped        int64 // packets that are not TCP over IP, or IP fragments
	DecodeErrors   int64 // malformed packets
	Conns          int64 // connections recorded
	Exchanges      int64
	Events         int64
	Anomalies      int64
	LostBytes      int64 // TCP payload bytes never captured
	TLSConns       int64 // TLS connections seen
	TLSUndecrypted int64 // TLS connections not (fully) decrypted
	Evicted        int64 // flows that never carried data, dropped to make room (Options.MaxConns)
	Redactions     int64 // values redaction replaced (the Counts of formats.End.Redactions)
	First, Last    int64 // capture times of the first and last packet
}

// session writes records and hands out IDs; it is shared by every
// connection of a recording (and by the proxy) — except in a Recorder
// with Options.Workers, where each connection has one of its own, whose
// IDs the merge renumbers (par.go). Not safe for concurrent use.
type session struct {
	sink         Sink
	err          error
	nextConn     uint64
	nextExchange int64
	stats        *Stats
	secrets      *redact.Secrets // nil: keep Secret values
	keyWait      *keyWaiter      // TLS connections waiting for secrets (nil: none wait)
	scr          *scratch        // the reused records and buffers of the goroutine parsing
	// counts: the session of one connection parsed on a worker: counts
	// that no record states go to the sink as countRecords, for the
	// merge to add in order.
	counts bool
}

// scratch is what a parsing goroutine reuses from one record to the
// next: a Sink keeps nothing of a record past Write.
type scratch struct {
	frame    formats.Frame // the record of each event, reused
	chunk    formats.Chunk // the record of each chunk written at once, reused
	rep      redact.Report // the redaction report of each event, reused
	redacted []byte        // the redacted copy of each event, reused (up to maxReusedRedaction)
}

// sc returns the session's scratch.
func (s *session) sc() *scratch {
	if s.scr == nil {
		s.scr = new(scratch)
	}
	return s.scr
}

func newSession(sink Sink, keepSecrets bool) *session {
	s := &session{sink: sink, scr: new(scratch), stats: new(Stats)}
	if !keepSecrets {
		s.secrets = newSecrets()
	}
	return s
}

// newSecrets returns the redaction of a new session (a test may give two
// recordings the same key).
var newSecrets = redact.NewSecrets

// tlsSeen counts a TLS connection, and one not (fully) decrypted.
func (s *session) tlsSeen(conns, undecrypted int64) {
	s.stats.TLSConns += conns
	s.stats.TLSUndecrypted += undecrypted
	if s.counts {
		s.emit(&countRecord{tlsConns: conns, tlsUndecrypted: undecrypted})
	}
}

func (s *session) emit(r formats.Record) {
	if s.err != nil {
		return
	}
	if e, ok := r.(*formats.End); ok {
		s.stats.Redactions += redactionCount(e)
	}
	if err := s.sink.Write(r); err != nil {
		s.err = err
	}
}

// redactionCount is how many values an End's redactions replaced.
func redactionCount(e *formats.End) (n int64) {
	for _, r := range e.Redactions {
		n += max(r.Count, 1)
	}
	return n
}

func (s *session) anomaly(conn uint64, x int64, dir formats.Direction, t int64, kind formats.AnomalyKind, off, n int64, msg string) {
	s.stats.Anomalies++
	s.emit(&formats.Anomaly{Conn: conn, Exchange: x, Dir: dir, Time: t, Kind: kind, Offset: off, Bytes: n, Message: msg})
}

// protoHandler parses both directions of one connection's bytes (after
// TLS decryption, if any). Directions are the HTTP roles.
type protoHandler interface {
	data(dir formats.Direction, p []byte, t int64)
	gap(dir formats.Direction, n int64, t int64)
	// fin: no more bytes in this direction.
	fin(dir formats.Direction, t int64)
	// finish: the connection is over; st says how anything still open ends
	// (EndReset, EndTruncated).
	finish(st formats.EndStatus, t int64)
}

// Recorder turns packets into session records: TCP reassembly (tcp.go,
// driven by capture time), then HTTP. Feed it packets in capture order
// with Packet, then call Close. A Recorder is not safe for concurrent use.
//
// It writes the records of connections and exchanges, not the session's
// first (Meta) and last (Summary): those are the formats.FileSink's, which owns the
// session file for every source (RecordPcap, live.Record, proxy.Record).
type Recorder struct {
	s       *session
	par     *par // the workers (Options.Workers), or nil
	opts    Options
	log     *slog.Logger
	dec     decoder
	tcp     reassembler
	now     int64
	streams uint64 // streams started, for their order
	closed  bool
}

// NewRecorder returns a Recorder writing to sink.
func NewRecorder(sink Sink, opts Options) *Recorder {
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = 256 << 20
	}
	if opts.MaxBufferedPerConn <= 0 {
		opts.MaxBufferedPerConn = 32 << 20
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.ReorderWindow <= 0 {
		opts.ReorderWindow = 10 * time.Second
	}
	r := &Recorder{
		s:    newSession(sink, opts.KeepSecrets),
		opts: opts,
		log:  opts.Logger,
	}
	r.tcp.conns = map[connKey]*tcpStream{}
	r.tcp.tombs = map[connKey]int64{}
	r.tcp.deadline = 1<<63 - 1
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.s.keyWait = newKeyWaiter(opts)
	if opts.Workers > 1 && r.s.keyWait == nil {
		r.par = newPar(r, opts.Workers)
	}
	return r
}

// anomaly records an anomaly of the TCP side (not of one connection's
// parsing), after whatever the connections' parsing wrote before it.
func (r *Recorder) anomaly(conn uint64, x int64, dir formats.Direction, t int64, kind formats.AnomalyKind, off, n int64, msg string) {
	if r.par != nil {
		r.par.add(nil, op{kind: opRecord, rec: &formats.Anomaly{Conn: conn, Exchange: x, Dir: dir, Time: t, Kind: kind, Offset: off, Bytes: n, Message: msg}}, nil)
		return
	}
	r.s.anomaly(conn, x, dir, t, kind, off, n, msg)
}

// DefaultMaxConns is the Options.MaxConns a zero value means.
const DefaultMaxConns = 65536

// Stats returns what the Recorder has counted so far.
func (r *Recorder) Stats() Stats {
	st := *r.s.stats
	st.Evicted = r.tcp.evicted
	return st
}

// Packet feeds one captured packet. Packets that are not TCP are counted
// and skipped. It returns the Sink's error, if any (sticky).
func (r *Recorder) Packet(p Packet) error {
	if r.s.err != nil {
		return r.s.err
	}
	st := r.s.stats
	st.Packets++
	st.Bytes += int64(len(p.Data))
	if st.First == 0 || p.Time < st.First {
		st.First = p.Time
	}
	if p.Time > st.Last {
		st.Last = p.Time
	}
	sg, err := r.dec.decode(pcapfile.LinkType(p.LinkType), p.Data)
	if err != nil {
		if err == errNotTCP || err == errFragment {
			st.Skipped++
		} else {
			st.DecodeErrors++
			r.log.Debug("undecodable packet", "packet", st.Packets, "err", err)
		}
		return nil
	}
	st.TCPPackets++
	if r.opts.Port != 0 && int(sg.src.port) != r.opts.Port && int(sg.dst.port) != r.opts.Port {
		return nil
	}
	r.now = max(r.now, p.Time)
	r.segment(sg, p.Time)
	r.expire(r.now)
	r.s.keyWait.tick(r.now)
	if r.s.err != nil && r.par != nil {
		r.par.stop() // nothing more is recorded: end the workers
	}
	return r.s.err
}

// drain waits until every packet fed so far is parsed and its records
// written (with Options.Workers; without, they already are).
func (r *Recorder) drain() {
	if r.par != nil {
		r.par.drain()
	}
}

// Close ends every connection still open (missing bytes are given up, and
// open exchanges end as truncated by the capture) and returns the Sink's
// error, if any.
func (r *Recorder) Close() error {
	if !r.closed {
		r.closed = true
		r.s.keyWait.close(r.now) // what waits for secrets, before its bytes are given up
		r.closeAll()
		r.s.keyWait.close(r.now) // connections ended by closeAll while waiting
		if r.par != nil {
			r.par.stop()
		}
	}
	return r.s.err
}

// tcpStream is one TCP connection. Direction 0 is the direction of the
// first packet seen, which need not be the HTTP client's.
//
// Its fields are in two parts. The TCP side (reassembly, tcp.go, and the
// table of connections) is the Recorder's goroutine's. The connection
// side, c, is what parses the bytes reassembly delivers (protocol
// detection, TLS, HTTP, the connection's records): with Options.Workers
// it runs on a worker, handed each delivery as an op (par.go), and the
// two sides share only what does not change after the stream is created
// (key, src0, port, first, r).
type tcpStream struct {
	r     *Recorder
	key   connKey
	src0  endpointKey // sender of direction 0
	port  [2]uint16
	syn   bool
	rst   bool
	done  bool // finish was called
	seqNo uint64
	first int64
	last  int64

	// reassembly (tcp.go)
	half             [2]tcpHalf
	prev, nextInList *tcpStream // in reassembler.idle or .halfClosed
	hasData          bool       // a segment carried payload
	inHalf           bool       // listed in reassembler.halfClosed
	holding          bool       // listed in reassembler.holding

	// The stream's ops in the batch being filled (par.go): its task in
	// the batch numbered pgen.
	pgen  uint32
	ptask int32

	c connState
}

// connState is the connection side of a tcpStream.
type connState struct {
	s       *session
	decided bool
	known   bool       // a Conn record was written
	client  int8       // direction of the HTTP client
	pending *[2][]byte // by direction, the bytes seen before the protocol is decided
	proto   protoHandler
	id      uint64
	bytes   [2]int64
	lost    int64 // bytes lost, both directions
	// What the TCP side knew when it delivered what is being parsed: a
	// SYN was seen (the connection began in the capture), the time of
	// its last packet.
	syn  bool
	last int64

	m *mergeState // the merge's, not the worker's (par.go)
}

// pendingOf returns the bytes of direction dir seen before the protocol
// was decided.
func (st *tcpStream) pendingOf(dir int) []byte {
	if st.c.pending == nil {
		return nil
	}
	return st.c.pending[dir]
}

// maxDetect bounds the bytes a connection buffers before its protocol and
// roles are known. A response captured from its middle may need most of a
// 32 KiB chunk (the kubectl proxy's chunk size) before a chunk-size line
// shows up.
const maxDetect = 256 << 10

// addr returns the address of the sender of direction dir.
func (st *tcpStream) addr(dir int) string {
	e := st.src0
	if dir == 1 {
		e = st.key.lo
		if e == st.src0 {
			e = st.key.hi
		}
	}
	return e.String()
}

// role maps a direction to an HTTP direction.
func (st *tcpStream) role(dir int) formats.Direction {
	if dir == int(st.c.client) {
		return formats.ClientToServer
	}
	return formats.ServerToClient
}

// The TCP side's deliveries to the connection side: parsed at once, or
// queued as ops for a worker (Options.Workers).

// data delivers bytes of direction dir, completed by the packet of time t.
func (st *tcpStream) data(dir int, p []byte, t int64) {
	if q := st.r.par; q != nil {
		q.add(st, op{kind: opData, dir: uint8(dir), t: t}, p)
		return
	}
	st.snap()
	st.connData(dir, p, t)
}

// gap delivers n bytes of direction dir that were lost.
func (st *tcpStream) gap(dir int, n int64, t int64) {
	st.r.s.stats.LostBytes += n
	if q := st.r.par; q != nil {
		q.add(st, op{kind: opGap, dir: uint8(dir), t: t, n: n}, nil)
		return
	}
	st.snap()
	st.connGap(dir, n, t)
}

// end delivers the end of direction dir (its FIN, or a reset).
func (st *tcpStream) end(dir int, t int64) {
	if st.rst {
		st.finish(formats.ConnRST, formats.EndReset, t)
		return
	}
	if q := st.r.par; q != nil {
		q.add(st, op{kind: opFin, dir: uint8(dir), t: t}, nil)
		return
	}
	st.snap()
	st.connFin(dir, t)
}

// finish ends the connection once.
func (st *tcpStream) finish(reason formats.ConnEndReason, status formats.EndStatus, t int64) {
	if st.done {
		return
	}
	st.done = true
	if q := st.r.par; q != nil {
		q.add(st, op{kind: opFinish, t: t, reason: reason, status: status}, nil)
		return
	}
	st.snap()
	st.connFinish(reason, status, t)
}

// snap gives the connection side what the TCP side knows now.
func (st *tcpStream) snap() { st.c.syn, st.c.last = st.syn, st.last }

// The connection side.

func (st *tcpStream) connData(dir int, p []byte, t int64) {
	c := &st.c
	c.bytes[dir] += int64(len(p))
	if c.decided {
		if c.proto != nil {
			c.proto.data(st.role(dir), p, t)
		}
		return
	}
	if c.pending == nil {
		c.pending = new([2][]byte)
	}
	c.pending[dir] = append(c.pending[dir], p...)
	st.detect(dir, t)
}

func (st *tcpStream) connGap(dir int, n int64, t int64) {
	c := &st.c
	c.lost += n
	if c.decided {
		if c.proto != nil {
			c.proto.gap(st.role(dir), n, t)
		}
		return
	}
	// Before the protocol is known, a gap only means the buffered bytes
	// are not the start of anything.
	if c.pending != nil {
		c.pending[dir] = c.pending[dir][:0]
	}
}

func (st *tcpStream) connFin(dir int, t int64) {
	if !st.c.decided {
		st.decide(t, true)
	}
	if st.c.proto != nil {
		st.c.proto.fin(st.role(dir), t)
	}
}

var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// detect decides, from the first bytes of either direction, which side is
// the HTTP client and what protocol the connection carries.
func (st *tcpStream) detect(dir int, t int64) {
	b := st.pendingOf(dir)
	other := 1 - dir
	kind := ""
	client := -1
	switch {
	case looksLikeRequest(b):
		client, kind = dir, "http/1.1"
	case bytes.HasPrefix(b, h2Preface[:min(len(b), len(h2Preface))]) && len(b) >= 4:
		if len(b) < len(h2Preface) {
			return
		}
		client, kind = dir, "h2c"
	case looksLikeResponse(b):
		client, kind = other, "http/1.1"
	case isTLSHandshake(b, 1):
		client, kind = dir, "tls"
	case isTLSHandshake(b, 2):
		client, kind = other, "tls"
	case isTLSRecord(b):
		client, kind = st.guessClient(), "tls-midstream"
	case len(b) < 9 && couldBeHTTP(b):
		return // wait for more bytes
	}
	if client < 0 && st.r.opts.Port != 0 {
		client = 0
		if int(st.port[0]) == st.r.opts.Port {
			client = 1
		}
		kind = "http/1.1"
	}
	if client < 0 {
		// A connection captured from its middle: a response body is found
		// by its chunk framing.
		if chunkEvidence(b) {
			client, kind = other, "http/1.1"
		} else if len(b) < maxDetect {
			return
		}
	}
	c := &st.c
	if client < 0 {
		c.decided = true
		c.client = int8(st.guessClient())
		st.announce("unknown", t)
		c.s.anomaly(c.id, formats.NoExchange, st.role(dir), t, formats.AnomalyUnknown, 0, int64(len(b)),
			"traffic on this connection is neither HTTP/1.1, HTTP/2 nor TLS; not recorded")
		c.pending = nil
		return
	}
	c.client = int8(client)
	st.start(kind, t)
}

// chunkEvidence reports whether b, captured from the middle of a
// connection, holds chunked framing: a chunk-size line after which at least
// one complete chunk decodes. One size line alone is weak evidence (any
// stream may start with hex digits and a CRLF).
func chunkEvidence(b []byte) bool {
	d := chunked.NewDecoder()
	skip, ok := d.Resync(b)
	if !ok {
		return false
	}
	for p := b[skip:]; len(p) > 0; {
		n, tok, err := d.Next(p, 0)
		if err != nil {
			return false
		}
		if tok.Kind == chunked.ChunkEnd || tok.Kind == chunked.Done {
			return true
		}
		p = p[n:]
	}
	return false
}

// decide is called when a direction ends before detection finished.
func (st *tcpStream) decide(t int64, ended bool) {
	c := &st.c
	if c.decided {
		return
	}
	for dir := range 2 {
		if len(st.pendingOf(dir)) == 0 {
			continue
		}
		st.detect(dir, t)
		if c.decided {
			return
		}
	}
	if len(st.pendingOf(0))+len(st.pendingOf(1)) == 0 {
		// No payload at all: nothing to record.
		c.decided = true
		return
	}
	// Too little to tell: treat it as HTTP with the guessed roles.
	c.client = int8(st.guessClient())
	st.start("http/1.1", t)
}

// guessClient picks the client side from the ports: the side whose port
// is the higher (ephemeral) one.
func (st *tcpStream) guessClient() int {
	if st.r.opts.Port != 0 {
		if int(st.port[0]) == st.r.opts.Port {
			return 1
		}
		return 0
	}
	if st.port[0] < st.port[1] {
		return 1
	}
	return 0
}

func couldBeHTTP(b []byte) bool {
	for _, m := range knownMethods {
		if bytes.HasPrefix([]byte(m), b) {
			return true
		}
	}
	return bytes.HasPrefix([]byte("HTTP/1.1 "), b) || bytes.HasPrefix(h2Preface, b)
}

// isTLSHandshake reports whether b starts with a TLS handshake record
// (RFC 8446 §5.1) holding a message of type typ (1 ClientHello, 2 ServerHello).
func isTLSHandshake(b []byte, typ byte) bool {
	return len(b) >= 6 && b[0] == 22 && b[1] == 3 && b[2] <= 4 && b[5] == typ
}

// isTLSRecord reports whether b starts with a TLS record header of a
// connection whose handshake was not captured (application data, alert,
// change cipher spec).
func isTLSRecord(b []byte) bool {
	return len(b) >= 5 && b[0] >= 20 && b[0] <= 23 && b[1] == 3 && b[2] <= 4 &&
		int(b[3])<<8|int(b[4]) <= tlsdec.MaxCiphertext12
}

// start announces the connection and hands it the buffered bytes.
func (st *tcpStream) start(kind string, t int64) {
	c := &st.c
	c.decided = true
	st.announce(kind, t)
	cl, sv := int(c.client), 1-int(c.client)
	midstream := [2]bool{!c.syn, !c.syn}
	switch kind {
	case "http/1.1":
		c.proto = newH1Conn(c.s, c.id, midstream)
	default:
		c.proto = st.r.newOtherProto(st, kind, t)
	}
	pc, ps := st.pendingOf(cl), st.pendingOf(sv)
	c.pending = nil
	if c.proto == nil {
		return
	}
	if len(pc) > 0 {
		c.proto.data(formats.ClientToServer, pc, t)
	}
	if len(ps) > 0 {
		c.proto.data(formats.ServerToClient, ps, t)
	}
}

func (st *tcpStream) announce(kind string, t int64) {
	c := &st.c
	s := c.s
	c.id = s.nextConn
	c.known = true
	s.nextConn++
	s.stats.Conns++
	s.emit(&formats.Conn{ID: c.id, Time: st.first, Client: st.addr(int(c.client)), Server: st.addr(1 - int(c.client)),
		Proto: kind, Midstream: !c.syn})
}

// connFinish ends the connection: what is open ends with status, then
// its ConnEnd is written.
func (st *tcpStream) connFinish(reason formats.ConnEndReason, status formats.EndStatus, t int64) {
	c := &st.c
	if !c.decided {
		st.decide(t, true)
	}
	last := c.last
	end := func() {
		if c.known {
			c.s.emit(&formats.ConnEnd{Conn: c.id, Time: last, Reason: reason,
				ClientBytes: c.bytes[c.client], ServerBytes: c.bytes[1-c.client], LostBytes: c.lost})
		}
	}
	if ce, ok := c.proto.(connEnder); ok {
		ce.finishThen(status, t, end) // a TLS connection may wait for its secrets
		return
	}
	if c.proto != nil {
		c.proto.finish(status, t)
	}
	end()
}
