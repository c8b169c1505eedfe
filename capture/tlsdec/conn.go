package tlsdec

import (
	"encoding/hex"
	"fmt"
)

// TLS 1.3 key phases of one direction.
type phase uint8

const (
	phaseNone  phase = iota // before the ServerHello (or TLS 1.2)
	phaseEarly              // client, 0-RTT possible: early or handshake keys
	phaseHS                 // handshake traffic keys
	phaseApp                // application traffic keys
)

// half is the state of one direction.
type half struct {
	dir Direction

	off    int64 // stream offset of the next byte fed
	hdr    [5]byte
	hdrN   int
	need   int     // record body length, once hdrN == 5
	body   *recBuf // partial record body
	bodyN  int
	recOff int64 // offset of the current record's header
	recNo  int64 // records completed

	started bool  // the first record header was accepted
	lost    bool  // no more parsing: bytes lost or the stream is not TLS
	failed  bool  // no more decryption: an error or a limit
	err     error // first error
	ccs     bool  // TLS 1.2: ChangeCipherSpec seen, records are encrypted

	phase  phase
	cur    *keys // keys of the phase; nil if not looked up or missing
	looked bool  // the lookup for the phase was done
	early  *keys // phaseEarly: 0-RTT keys, if logged
	trial  bool  // handshake secret missing: cur holds application keys, tried on each record

	hs hsReader

	gapped bool    // Gap was called: the plaintext is incomplete
	rs     *resync // looking for a record after a gap; nil otherwise
	// bad is why the record being processed is taken for damaged in place
	// ("" if it is not): the caller resynchronizes from its start.
	bad    string
	credit int64 // trial decryption work resyncs may still spend (see maxResyncCredit)
	// recAvg8 is eight times a moving average of the direction's latest
	// record lengths (header included; each new one weighs 1/8): what
	// the records just before a loss are like, for Conn.estimate.
	recAvg8 int64

	pend     []byte
	pendRecs []pendRec

	stats DirInfo
}

// Conn decrypts the two directions of one TLS connection. Feed each
// direction's TCP payload in order; decrypted application data goes to the
// Sink. A Conn is not safe for concurrent use: one goroutine feeds both
// directions. Use one Conn per TCP connection.
type Conn struct {
	keys *KeyLog
	sink Sink
	opts Options
	half [2]half

	chCount, shCount int
	finalSH          bool // a ServerHello that is not a HelloRetryRequest was seen

	clientRandom [32]byte
	haveCR       bool
	serverRandom [32]byte
	sessionID    []byte // of the ClientHello, for TLS 1.2 resumption

	version     uint16
	cipher      uint16
	suite       *suite // nil if unknown or unsupported
	c12, s12    *keys  // TLS 1.2 keys, derived at the first need
	looked12    bool
	sni         string
	alpn        string
	offeredALPN []string
	offerEarly  bool
	hrr         bool
	resumed     bool

	alerts   []Alert
	notes    []string
	pumping  bool
	waitOver bool // KeyWait given up: StopWaiting, or MaxKeyWait reached
}

// NewConn returns a Conn that looks its secrets up in keys, which may be nil
// (then only the handshake is parsed) and delivers to sink, which may be nil.
func NewConn(keys *KeyLog, sink Sink, opts Options) *Conn {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxKeyWait <= 0 {
		opts.MaxKeyWait = DefaultMaxKeyWait
	}
	c := &Conn{keys: keys, sink: sink, opts: opts}
	for d := range c.half {
		c.half[d].dir = Direction(d)
		c.half[d].credit = maxResyncWork
	}
	return c
}

// IsClientHello reports whether p, the first bytes of a TCP stream, start
// like a TLS ClientHello record: handshake content type, a 3.x record version
// and (if present) handshake type client_hello.
func IsClientHello(p []byte) bool {
	if len(p) < 3 || p[0] != typeHandshake || p[1] != 3 || p[2] > 4 {
		return false
	}
	return len(p) < 6 || p[5] == 1
}

func (c *Conn) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	for _, old := range c.notes {
		if old == n {
			return
		}
	}
	if len(c.notes) < maxNotes {
		c.notes = append(c.notes, n)
	}
}

// setNote sets note i, an index setNote returned before, or adds a note if
// i < 0, so that a note can tell how a story ended. It returns the note's
// index, or -1 if it was not kept (the notes are full).
func (c *Conn) setNote(i int, format string, args ...any) int {
	if i >= 0 {
		c.notes[i] = fmt.Sprintf(format, args...)
		return i
	}
	n := len(c.notes)
	c.note(format, args...)
	if len(c.notes) > n {
		return n
	}
	return -1
}

func (c *Conn) crHex() string { return hex.EncodeToString(c.clientRandom[:]) }

// Feed consumes p, the next TCP payload bytes of direction dir, captured at
// time t (ns). p is not retained or modified after Feed returns. Records
// may span Feed calls, and one call may complete many records.
//
// Feed returns an error at most once per direction: the first failure that
// ends decryption of that direction (an *Error wrapping ErrNotTLS,
// ErrMalformed or ErrDecrypt, naming the direction, record and offset).
// Afterwards the direction accepts bytes and only counts them. Missing keys
// are not an error: records are counted as undecryptable and Info says
// which secret is missing. An error of the other direction may be returned
// too, when this call released records that direction held.
//
// After a Gap, Feed scans for the direction's next record (see Gap): bytes
// are buffered until one authenticates, then it and the rest are processed
// as usual.
func (c *Conn) Feed(dir Direction, p []byte, t int64) error {
	if dir > ServerToClient {
		return fmt.Errorf("tlsdec: invalid direction %d", dir)
	}
	h := &c.half[dir]
	h.stats.Bytes += int64(len(p))
	h.credit = min(h.credit+resyncCreditPerByte*int64(len(p)), maxResyncCredit)
	if h.rs != nil {
		return c.feedResync(h, p, t)
	}
	return c.parse(h, p, t)
}

// Gap records that n bytes of direction dir were lost (capture loss); n < 0
// means an unknown number of bytes. The record in progress is dropped, the
// direction's offsets advance by n, and Info.Decrypted is false from here
// on. Records completed before the gap and held for the other direction
// are still processed.
//
// Before the direction uses its application keys, nothing after the gap is
// decrypted; bytes fed later are counted. After that (TLS 1.3 once its
// Finished is decrypted, TLS 1.2 after its ChangeCipherSpec), Feed scans
// the bytes after the gap for a record header and trial-decrypts each
// candidate with the sequence numbers that can follow the last record
// before the gap: as many as fit in n bytes plus those skipped (at most
// 65536), for TLS 1.3 also under the next keys from 0, in case a KeyUpdate
// was lost. Only a record that authenticates ends the scan: it and what
// follows are delivered as usual, and a note says where the direction
// resynchronised, how many bytes were skipped (counted in Lost and
// ResyncSkipped) and how many records were lost (LostRecords). If nothing
// authenticates within about 72 KiB after the gap (a bound for gaps, not
// for records damaged in place: see the package documentation), or the trial
// decryptions exceed 32 MiB of work for the gap or the direction's credit
// (earned by the bytes fed), the direction is given up with a note, as
// before its application keys (DirInfo.Stopped). A gap while
// resynchronising adds to the one before; a gap after a resync starts
// another.
func (c *Conn) Gap(dir Direction, n int) {
	if dir > ServerToClient {
		return
	}
	h := &c.half[dir]
	if n > 0 {
		h.stats.Bytes += int64(n)
		h.stats.Lost += int64(n)
	}
	h.gapped = true
	switch {
	case h.lost:
	case h.rs != nil:
		c.gapAgain(h, n)
	default:
		if k := c.resyncKeys(h); k != nil {
			c.startResync(h, k, n)
			break
		}
		if n >= 0 {
			c.note("%s: %d bytes lost at offset %d; later records not decrypted", dir, n, h.off)
		} else {
			c.note("%s: bytes lost at offset %d; later records not decrypted", dir, h.off)
		}
		h.lost = true
		h.hdrN = 0
		c.releaseBufs(h)
	}
	if n > 0 {
		h.off += int64(n)
	}
	if h.rs != nil {
		h.rs.from = h.off
	}
	c.pump() // errors are kept in their direction's Info
}
