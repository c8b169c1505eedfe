package tlsdec

import (
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Record layer limits.
const (
	// MaxPlaintext bounds a record's plaintext, 2^14 bytes (RFC 8446 §5.1,
	// RFC 5246 §6.2.1); a decrypted TLS 1.3 record may add its one-byte
	// content type.
	MaxPlaintext = 1 << 14
	// MaxCiphertext13 bounds a TLS 1.3 record: 2^14 + 256 (RFC 8446 §5.2).
	MaxCiphertext13 = 1<<14 + 256
	// MaxCiphertext12 bounds a TLS 1.2 record: 2^14 + 2048 (RFC 5246
	// §6.2.3). It is also the bound while the version is not yet known.
	MaxCiphertext12 = 1<<14 + 2048
	// DefaultMaxPending is Options.MaxPending's default: enough for a
	// client's whole first flight, 0-RTT data included, which is what can
	// arrive before the server's hello when the caller feeds one direction
	// ahead of the other.
	DefaultMaxPending = 256 << 10
	// DefaultMaxKeyWait is Options.MaxKeyWait's default: what one
	// direction holds while the key log does not have its secrets yet.
	// Clients log their secrets while the handshake runs, so what arrives
	// before a reader of the key log sees them is the rest of the
	// handshake and the first requests and responses: far less than this.
	// Over every connection the caller bounds the total (capture: the
	// connections waiting at once, Options.MaxConns).
	DefaultMaxKeyWait = 1 << 20

	// maxAlerts bounds the alerts Info keeps; all are counted.
	maxAlerts = 16
	// maxNotes bounds the distinct notes kept.
	maxNotes = 8
)

// Direction is one direction of a TCP connection.
type Direction uint8

const (
	ClientToServer Direction = 0 // from the side that sent the ClientHello
	ServerToClient Direction = 1
)

func (d Direction) String() string {
	switch d {
	case ClientToServer:
		return "client->server"
	case ServerToClient:
		return "server->client"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Sink receives decrypted application data.
type Sink interface {
	// Data receives the application data of one record of direction dir,
	// in stream order per direction. p is valid only during the call: copy
	// what you keep. t is the capture time of the piece (the Feed call)
	// whose bytes completed the record that carried p. Data may be called
	// for either direction from Feed or Gap of either direction (records
	// held while waiting for the other direction are released then). Data
	// must not call back into the Conn.
	Data(dir Direction, p []byte, t int64)
}

// A LossSink is a Sink that also learns where a direction's application
// data has a hole no Gap call announced: records damaged in place (bytes
// garbled, none missing) fail to authenticate, and decryption
// resynchronizes after them as after a gap (see Conn.Feed).
type LossSink interface {
	Sink
	// Lost reports that the application data of l.Dir delivered after
	// this call does not follow the data delivered before it: the records
	// l describes were skipped. It is called once per damaged region,
	// before the data that follows it, from Feed or Gap; it must not call
	// back into the Conn.
	Lost(l Loss)
}

// Loss describes a region of one direction whose records did not
// authenticate although no bytes were missing: damage in place.
type Loss struct {
	Dir    Direction
	Record int64  // number of the first record that did not authenticate
	Offset int64  // its stream offset
	Why    string // what was wrong with it ("authentication failed", "content type 178", …)
	// Records is the number of records lost (from the sequence numbers;
	// -1 if decryption did not resume); Skipped the bytes skipped from
	// Offset to where it resumed (or was given up); Plaintext an estimate
	// of the application data lost (the records' overhead taken off;
	// TLS 1.3 padding, which is rare, is counted as data).
	Records, Skipped, Plaintext int64
	// Resumed is the stream offset of the record that authenticated next,
	// -1 if the direction was given up.
	Resumed int64
	Time    int64 // capture time of the piece that ended the region
}

func (l Loss) String() string {
	s := fmt.Sprintf("%s record %d at offset %d did not authenticate (%s; bytes damaged in place)", l.Dir, l.Record, l.Offset, l.Why)
	if l.Resumed < 0 {
		return s + fmt.Sprintf("; no record authenticated in the %d bytes after it; later records not decrypted", l.Skipped)
	}
	return s + fmt.Sprintf("; resynchronized at offset %d: skipped %d bytes, %d %s lost (about %d bytes of data)",
		l.Resumed, l.Skipped, l.Records, plural(l.Records, "record"), l.Plaintext)
}

// Options configure a Conn. The zero value is ready to use.
type Options struct {
	// MaxPending bounds the bytes one direction may hold while it waits for
	// the other direction's hello: the client's records after a
	// ClientHello until the ServerHello is seen, the server's records
	// until the ClientHello is seen. Beyond it the direction is given up
	// (Info.Note says so). Zero means DefaultMaxPending.
	MaxPending int
	// KeyWait: when the key log does not have a direction's secrets yet,
	// hold its encrypted records (and what follows them) instead of
	// counting them as not decrypted, for a key log that clients are
	// still writing. Retry (after the key log grew) decrypts what the
	// secrets now open; StopWaiting gives up (then the held records are
	// handled as without KeyWait). More than MaxKeyWait bytes held in a
	// direction gives up too, with a note.
	KeyWait bool
	// MaxKeyWait bounds the bytes one direction holds waiting for its
	// secrets; zero means DefaultMaxKeyWait.
	MaxKeyWait int
}

// Info describes a connection as seen so far.
type Info struct {
	Version      uint16   // negotiated, e.g. 0x0304 for TLS 1.3; 0 before the ServerHello
	VersionName  string   // "TLS 1.3"; "" if Version is 0
	Cipher       uint16   // negotiated cipher suite; 0 before the ServerHello
	CipherName   string   // IANA name, e.g. "TLS_AES_128_GCM_SHA256"
	SNI          string   // server_name of the ClientHello
	ALPN         string   // negotiated protocol; for TLS 1.3 known only once EncryptedExtensions is decrypted
	OfferedALPN  []string // protocols the client offered
	ClientRandom string   // hex, the key log's index; "" before the ClientHello
	HelloRetry   bool     // the server sent a HelloRetryRequest
	Resumed      bool     // session resumption (TLS 1.2 session ID echo or TLS 1.3 PSK)
	EarlyData    bool     // the client offered 0-RTT data

	// Decrypted is true when every encrypted record seen so far in both
	// directions was decrypted (at least one was) and no bytes were lost:
	// the application data delivered is complete. Otherwise Note says why.
	Decrypted bool
	Note      string

	Alerts []Alert // the first 16 alerts, plaintext or decrypted
	Dir    [2]DirInfo
}

// DirInfo counts one direction.
type DirInfo struct {
	Bytes         int64 // TCP payload bytes fed, Gap bytes included
	Lost          int64 // bytes reported lost by Gap, plus ResyncSkipped
	Records       int64 // complete records parsed
	Decrypted     int64 // records decrypted
	Undecryptable int64 // encrypted records not decrypted (no keys, after a failure or a limit)
	Pending       int64 // records held waiting for the other direction
	Partial       int   // bytes of an incomplete record at the end of what was fed (a truncated tail if the stream ended); while resynchronising, the bytes not yet scanned
	AppData       int64 // application data bytes delivered to the Sink
	KeyUpdates    int   // TLS 1.3 KeyUpdate messages applied, and KeyUpdates lost in a gap that a resync inferred
	CloseNotify   bool  // a close_notify alert was seen
	Err           error // the first error of this direction, as returned by Feed

	// Resynchronisation after gaps (see Conn.Gap).
	Resyncs       int   // times decryption resumed after a gap or damaged records
	ResyncSkipped int64 // bytes fed after gaps, or of damaged records, that were skipped while looking for a record (also in Lost)
	LostRecords   int64 // records lost in gaps or damaged, from the sequence numbers a resync skipped (a lower bound when a KeyUpdate was lost)
	Resyncing     bool  // looking for a record after a gap or damaged records at the end of what was fed
	Damaged       int   // regions of records damaged in place (they did not authenticate) that a resync was started after

	// Stopped: nothing after some point of this direction is decrypted: a
	// gap that was not resynchronised (before the application keys, or the
	// resync failed), an error, or a limit. Note says why. A direction that
	// is neither Stopped nor Resyncing, with no Undecryptable or Pending
	// records, delivered every record that was captured.
	Stopped bool
}

// Alert is a TLS alert (RFC 8446 §6).
type Alert struct {
	Dir         Direction
	Level       uint8 // 1 warning, 2 fatal
	Description uint8
	Time        int64 // capture time of the record that carried it
}

var alertNames = map[uint8]string{
	0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
	40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
	44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown",
	47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied", 50: "decode_error",
	51: "decrypt_error", 70: "protocol_version", 71: "insufficient_security",
	80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
	100: "no_renegotiation", 109: "missing_extension", 110: "unsupported_extension",
	112: "unrecognized_name", 113: "bad_certificate_status_response",
	115: "unknown_psk_identity", 116: "certificate_required", 120: "no_application_protocol",
}

func (a Alert) String() string {
	if n, ok := alertNames[a.Description]; ok {
		return n
	}
	return fmt.Sprintf("alert(%d)", a.Description)
}

// Content types (RFC 8446 §5.1).
const (
	typeCCS       = 20
	typeAlert     = 21
	typeHandshake = 22
	typeAppData   = 23
	typeHeartbeat = 24 // RFC 6520
)

// TLS 1.3 key phases of one direction.
type phase uint8

const (
	phaseNone  phase = iota // before the ServerHello (or TLS 1.2)
	phaseEarly              // client, 0-RTT possible: early or handshake keys
	phaseHS                 // handshake traffic keys
	phaseApp                // application traffic keys
)

// pendRec is a complete record held in half.pend.
type pendRec struct {
	hdr        [5]byte
	start, end int // body in half.pend
	no, off, t int64
}

// rec is a complete record being processed.
type rec struct {
	hdr [5]byte
	no  int64 // index in this direction
	off int64 // stream offset of the header
	t   int64
}

// recBuf holds a record body, or a whole record with its header.
type recBuf [5 + MaxCiphertext12]byte

// bufPool holds record-sized buffers: one is borrowed while a record is
// split across Feed calls or a direction resynchronises after a gap, and
// one for each decryption, so an idle Conn holds none.
var bufPool = sync.Pool{New: func() any { return new(recBuf) }}

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

// parse cuts p, the next bytes of h, into records and processes them.
func (c *Conn) parse(h *half, p []byte, t int64) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for !h.lost {
		if h.hdrN < 5 {
			if len(p) == 0 {
				break
			}
			if h.hdrN == 0 {
				h.recOff = h.off
			}
			n := copy(h.hdr[h.hdrN:], p)
			h.hdrN += n
			h.off += int64(n)
			p = p[n:]
			if h.hdrN < 5 {
				break
			}
			if err := c.checkHeader(h); err != nil {
				keep(err)
				break
			}
			if h.bad != "" {
				hdr := h.hdr
				keep(c.resyncInPlace(h, h.recNo, h.recOff, [][]byte{hdr[:], p}, t))
				return first
			}
		}
		var body []byte
		if h.bodyN == 0 && len(p) >= h.need {
			// The whole body is in p: no copy.
			body, p = p[:h.need], p[h.need:]
			h.off += int64(h.need)
		} else {
			if len(p) == 0 {
				break
			}
			if h.body == nil {
				h.body = bufPool.Get().(*recBuf)
			}
			n := copy(h.body[h.bodyN:h.need], p)
			h.bodyN += n
			h.off += int64(n)
			p = p[n:]
			if h.bodyN < h.need {
				break
			}
			body = h.body[:h.need]
		}
		r := rec{hdr: h.hdr, no: h.recNo, off: h.recOff, t: t}
		h.recNo++
		h.stats.Records++
		h.hdrN, h.bodyN = 0, 0
		keep(c.onRecord(h, &r, body))
		if h.bad != "" {
			keep(c.resyncRecord(h, r, body, p, t))
			return first
		}
		if h.body != nil {
			bufPool.Put(h.body)
			h.body = nil
		}
	}
	if h.lost {
		// Count what was not parsed.
		h.off += int64(len(p))
	}
	return first
}

// checkHeader validates a complete record header (RFC 8446 §5.1, RFC 5246
// §6.2.1) before anything is buffered.
func (c *Conn) checkHeader(h *half) error {
	typ, ver := h.hdr[0], binary.BigEndian.Uint16(h.hdr[1:3])
	n := int(binary.BigEndian.Uint16(h.hdr[3:5]))
	if !h.started {
		// The first record must carry the hello (or, from a server, an
		// alert); anything else is not the start of a TLS stream.
		if (typ != typeHandshake && typ != typeAlert) || ver>>8 != 3 || ver&0xff > 4 || n == 0 {
			return c.lose(h, ErrNotTLS, fmt.Sprintf("% x", h.hdr[:]))
		}
		h.started = true
	}
	limit := MaxCiphertext12
	if c.version == versionTLS13 {
		limit = MaxCiphertext13
	}
	var bad string
	switch {
	case typ < typeCCS || typ > typeHeartbeat:
		bad = fmt.Sprintf("content type %d", typ)
	case ver>>8 != 3 || ver&0xff > 4:
		bad = fmt.Sprintf("record version %#04x", ver)
	case n > limit:
		bad = fmt.Sprintf("record length %d exceeds %d", n, limit)
	}
	if bad != "" {
		if c.damagedInPlace(h, bad) {
			return nil
		}
		return c.lose(h, ErrMalformed, bad)
	}
	h.need = n
	return nil
}

// damagedInPlace reports whether the record of h being parsed, which is
// wrong (why), is taken for one damaged in place, to resynchronize from
// (h.bad is set): h uses its application keys and records have
// authenticated under them (else the keys, not the record, may be what is
// wrong: h fails as before).
func (c *Conn) damagedInPlace(h *half, why string) bool {
	if k := c.resyncKeys(h); k == nil || k.seq == 0 {
		return false
	}
	h.bad = why
	return true
}

// lose ends parsing of h: record boundaries are unknown from here on.
func (c *Conn) lose(h *half, sentinel error, detail string) error {
	var err error = &Error{Dir: h.dir, Record: h.recNo, Offset: h.recOff, Err: fmt.Errorf("%w: %s", sentinel, detail)}
	if errors.Is(sentinel, ErrNotTLS) {
		c.note("%s does not start with a TLS record (not TLS, or the capture began mid-connection)", h.dir)
	} else {
		c.note("%s record %d at offset %d: %s; rest not parsed", h.dir, h.recNo, h.recOff, detail)
	}
	h.lost = true
	h.hdrN = 0
	if h.err == nil {
		h.err = err
	} else {
		err = nil // this direction already reported its error
	}
	c.releaseBufs(h)
	if p := c.pump(); p != nil {
		return errors.Join(err, p)
	}
	return err
}

// fail ends decryption of h after an error at record r; later records are
// counted as undecryptable. It returns the error, or nil if h already
// reported one (a held record may fail after its direction was lost).
func (c *Conn) fail(h *half, r *rec, sentinel error, detail string) error {
	err := &Error{Dir: h.dir, Record: r.no, Offset: r.off, Err: fmt.Errorf("%w: %s", sentinel, detail)}
	c.note("%s record %d at offset %d: %s; later records not decrypted", h.dir, r.no, r.off,
		strings.TrimPrefix(err.Err.Error(), "tlsdec: "))
	h.failed = true
	if h.err != nil {
		return nil // this direction already reported its error
	}
	h.err = err
	return err
}

func (c *Conn) releaseBufs(h *half) {
	if h.body != nil {
		bufPool.Put(h.body)
		h.body = nil
	}
	h.bodyN = 0
	h.hs.buf = nil
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

// blocked reports whether h must hold its records until the other
// direction's hello is seen: the client after a ClientHello until the
// ServerHello, the server until the ClientHello it answers. Once the other
// direction cannot progress (lost, failed) nothing is held.
func (c *Conn) blocked(h *half) bool {
	if c.finalSH {
		return false
	}
	o := &c.half[1-h.dir]
	if o.lost || o.failed {
		return false
	}
	if h.dir == ClientToServer {
		return c.chCount > c.shCount
	}
	return c.shCount >= c.chCount
}

// waitKeys reports whether h must hold a record of type typ until the key
// log has the secrets it needs (Options.KeyWait): the record is
// encrypted, and the secret of h's phase (TLS 1.3: the handshake secret,
// or with none the application one; then the application one) or the
// master secret (TLS 1.2) is not there yet. Once a phase's lookup was
// made, or nothing can be looked up (no ClientHello, an unsupported
// suite), nothing waits.
func (c *Conn) waitKeys(h *half, typ uint8) bool {
	if !c.opts.KeyWait || c.waitOver || c.keys == nil || !c.haveCR || c.suite == nil || h.failed || h.lost || !c.encrypted(h, typ) {
		return false
	}
	switch c.version {
	case versionTLS13:
		if h.looked {
			return false
		}
		lbl := secretLabels[h.dir]
		if h.phase == phaseApp {
			return c.keys.secret(&c.clientRandom, lbl[2]) == nil
		}
		return c.keys.secret(&c.clientRandom, lbl[1]) == nil && c.keys.secret(&c.clientRandom, lbl[2]) == nil
	case versionTLS12:
		return !c.looked12 && c.keys.secret(&c.clientRandom, labelMaster) == nil
	}
	return false
}

// WaitingKeys reports whether a direction holds records waiting for
// secrets the key log does not have yet (Options.KeyWait).
func (c *Conn) WaitingKeys() bool {
	for d := range c.half {
		h := &c.half[d]
		if len(h.pendRecs) > 0 && !c.blocked(h) && c.waitKeys(h, h.pendRecs[0].hdr[0]) {
			return true
		}
	}
	return false
}

// Retry processes the records held for secrets the key log now has (call
// it after the key log grew); errors are as Feed's.
func (c *Conn) Retry() error {
	return c.pump()
}

// StopWaiting ends Options.KeyWait for the connection: the records held
// for secrets are processed now (what the key log still lacks is noted
// and counted as not decrypted, as without KeyWait), and later ones are
// not held. Errors are as Feed's.
func (c *Conn) StopWaiting() error {
	if c.waitOver {
		return nil
	}
	if c.WaitingKeys() {
		c.note("key log still had no secrets for client random %s when the wait for them ended", c.crHex())
	}
	c.waitOver = true
	return c.pump()
}

// held reports whether h's next record (of type typ) must wait: for the
// other direction's hello, or for its secrets.
func (c *Conn) held(h *half, typ uint8) bool {
	return c.blocked(h) || c.waitKeys(h, typ)
}

// onRecord processes a complete record or holds it.
func (c *Conn) onRecord(h *half, r *rec, body []byte) error {
	if len(h.pendRecs) == 0 && !c.held(h, r.hdr[0]) {
		err := c.process(h, r, body)
		if len(c.half[1-h.dir].pendRecs) > 0 {
			// The record may have been the hello the other side waits for.
			if perr := c.pump(); err == nil {
				err = perr
			}
		}
		return err
	}
	if h.failed {
		h.stats.Undecryptable++
		return nil
	}
	if !c.blocked(h) && len(h.pend)+len(body) > c.opts.MaxKeyWait {
		// Holding for secrets, past the bound: give up waiting.
		c.note("%s: more than %d bytes held waiting for the key log's secrets of client random %s; the wait ended",
			h.dir, c.opts.MaxKeyWait, c.crHex())
		c.waitOver = true
		err := c.pump()
		if len(h.pendRecs) == 0 && !c.blocked(h) {
			if perr := c.process(h, r, body); err == nil {
				err = perr
			}
			return err
		}
	}
	if c.blocked(h) && len(h.pend)+len(body) > c.opts.MaxPending {
		peer := "server"
		if h.dir == ServerToClient {
			peer = "client"
		}
		c.note("%s: more than %d bytes held waiting for the %s's hello; not decrypted",
			h.dir, c.opts.MaxPending, peer)
		h.failed = true
		h.stats.Undecryptable += int64(len(h.pendRecs)) + 1
		h.stats.Pending = 0
		h.pend, h.pendRecs = nil, nil
		return nil
	}
	start := len(h.pend)
	h.pend = append(h.pend, body...)
	h.pendRecs = append(h.pendRecs, pendRec{hdr: r.hdr, start: start, end: len(h.pend), no: r.no, off: r.off, t: r.t})
	h.stats.Pending++
	return nil
}

// pump processes held records of directions that are no longer blocked.
func (c *Conn) pump() error {
	if c.pumping {
		return nil
	}
	c.pumping = true
	defer func() { c.pumping = false }()
	var first error
	for progress := true; progress; {
		progress = false
		for d := range c.half {
			h := &c.half[d]
			for len(h.pendRecs) > 0 && !c.held(h, h.pendRecs[0].hdr[0]) {
				p := h.pendRecs[0]
				h.pendRecs = h.pendRecs[1:]
				h.stats.Pending--
				r := rec{hdr: p.hdr, no: p.no, off: p.off, t: p.t}
				if err := c.process(h, &r, h.pend[p.start:p.end]); err != nil && first == nil {
					first = err
				}
				progress = true
			}
			if len(h.pendRecs) == 0 {
				h.pend, h.pendRecs = nil, nil
			}
		}
	}
	return first
}

// encrypted reports whether a record of type typ in h is protected.
func (c *Conn) encrypted(h *half, typ uint8) bool {
	if c.version == versionTLS13 || c.version == 0 {
		// TLS 1.3 protected records all have outer type application_data
		// (RFC 8446 §5.2); before the version is known, so would any.
		return typ == typeAppData
	}
	return h.ccs || typ == typeAppData
}

// process handles one complete record of h.
func (c *Conn) process(h *half, r *rec, body []byte) error {
	typ := r.hdr[0]
	if !c.encrypted(h, typ) {
		if h.failed {
			return nil
		}
		// RFC 8446 §5: after the handshake every record is protected; a
		// plaintext one is a protected one whose type byte was damaged.
		if c.version == versionTLS13 && h.phase == phaseApp &&
			c.damagedInPlace(h, fmt.Sprintf("plaintext content type %d after the handshake", typ)) {
			return nil
		}
		switch typ {
		case typeHandshake:
			return c.handshake(h, r, body, false)
		case typeAlert:
			c.alert(h, r, body)
		case typeCCS:
			return c.changeCipherSpec(h, r, body)
		}
		return nil
	}
	if h.failed {
		h.stats.Undecryptable++
		return nil
	}
	dst := bufPool.Get().(*recBuf)
	defer bufPool.Put(dst)
	pt, inner, err := c.decrypt(h, r, body, dst[:])
	if err != nil || pt == nil && inner == 0 {
		return err
	}
	h.stats.Decrypted++
	switch inner {
	case typeAppData:
		if h.phase == phaseHS {
			// RFC 8446 §5.1: no application data under handshake keys.
			return c.fail(h, r, ErrMalformed, "application data before Finished")
		}
		h.stats.AppData += int64(len(pt))
		if c.sink != nil && len(pt) > 0 {
			c.sink.Data(h.dir, pt, r.t)
		}
	case typeHandshake:
		return c.handshake(h, r, pt, true)
	case typeAlert:
		c.alert(h, r, pt)
	case typeCCS:
		// An encrypted ChangeCipherSpec is TLS 1.2 renegotiation.
		c.note("%s: TLS 1.2 renegotiation is not supported; later records not decrypted", h.dir)
		h.failed = true
	}
	return nil
}

// decrypt opens an encrypted record. It returns the plaintext and inner
// content type, or nil, 0 when the record is counted as undecryptable
// (missing keys, skipped 0-RTT data), or an error.
func (c *Conn) decrypt(h *half, r *rec, body, dst []byte) ([]byte, uint8, error) {
	if c.version != versionTLS13 {
		k := c.keys12(h)
		if k == nil {
			h.stats.Undecryptable++
			return nil, 0, nil
		}
		pt, err := k.open12(dst, &r.hdr, body)
		if err != nil {
			if c.damagedInPlace(h, err.Error()) {
				return nil, 0, nil
			}
			return nil, 0, c.fail(h, r, ErrDecrypt, err.Error())
		}
		if len(pt) > MaxPlaintext {
			return nil, 0, c.fail(h, r, ErrMalformed, fmt.Sprintf("plaintext of %d bytes exceeds %d", len(pt), MaxPlaintext))
		}
		return pt, r.hdr[0], nil
	}
	k := c.keys13(h)
	if h.phase == phaseEarly {
		// The client offered 0-RTT data (RFC 8446 §4.2.10): its records
		// are under the early keys until EndOfEarlyData, or, if the server
		// rejected them, skipped by the server and followed by records
		// under the handshake keys. Try both; skip what neither opens.
		if h.early != nil {
			if pt, err := h.early.open13(dst, &r.hdr, body); err == nil {
				return c.inner13(h, r, pt)
			}
		}
		if k != nil {
			if pt, err := k.open13(dst, &r.hdr, body); err == nil {
				h.phase, h.early = phaseHS, nil
				return c.inner13(h, r, pt)
			}
		}
		c.note("%s: 0-RTT early data not decrypted", h.dir)
		h.stats.Undecryptable++
		return nil, 0, nil
	}
	if k == nil {
		h.stats.Undecryptable++
		return nil, 0, nil
	}
	pt, err := k.open13(dst, &r.hdr, body)
	if err != nil {
		if h.trial {
			// Handshake secret missing: this is a handshake record.
			h.stats.Undecryptable++
			return nil, 0, nil
		}
		if c.damagedInPlace(h, err.Error()) {
			return nil, 0, nil
		}
		return nil, 0, c.fail(h, r, ErrDecrypt, err.Error())
	}
	if h.trial {
		h.trial, h.phase = false, phaseApp
	}
	return c.inner13(h, r, pt)
}

// inner13 strips a TLS 1.3 TLSInnerPlaintext: zero padding, then the
// content type is the last non-zero byte (RFC 8446 §5.4).
func (c *Conn) inner13(h *half, r *rec, pt []byte) ([]byte, uint8, error) {
	if len(pt) > MaxPlaintext+1 {
		return nil, 0, c.fail(h, r, ErrMalformed, fmt.Sprintf("plaintext of %d bytes exceeds %d", len(pt), MaxPlaintext+1))
	}
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 {
		return nil, 0, c.fail(h, r, ErrMalformed, "no content type in decrypted record")
	}
	typ := pt[i]
	if typ != typeHandshake && typ != typeAppData && typ != typeAlert {
		return nil, 0, c.fail(h, r, ErrMalformed, fmt.Sprintf("inner content type %d", typ))
	}
	return pt[:i], typ, nil
}

var secretLabels = [2][3]label{
	ClientToServer: {labelClientEarly, labelClientHS, labelClientApp},
	ServerToClient: {0, labelServerHS, labelServerApp},
}

// keys13 returns h's keys for its phase, looking secrets up at the first
// need (so that a key log loaded late is still used), or nil.
func (c *Conn) keys13(h *half) *keys {
	if h.looked {
		return h.cur
	}
	h.looked = true
	if !c.canLookUp() {
		return nil
	}
	lbl := secretLabels[h.dir]
	switch h.phase {
	case phaseEarly, phaseHS:
		if h.phase == phaseEarly {
			if s := c.keys.secret(&c.clientRandom, lbl[0]); s != nil {
				h.early = c.newKeys13(h, s)
			}
		}
		if s := c.keys.secret(&c.clientRandom, lbl[1]); s != nil {
			h.cur = c.newKeys13(h, s)
			return h.cur
		}
		if s := c.keys.secret(&c.clientRandom, lbl[2]); s != nil {
			c.note("key log has no %s for client random %s: %s handshake records not decrypted",
				lbl[1], c.crHex(), h.dir)
			h.cur, h.trial = c.newKeys13(h, s), true
			return h.cur
		}
		c.note("key log has no %s or %s for client random %s", lbl[1], lbl[2], c.crHex())
	case phaseApp:
		if s := c.keys.secret(&c.clientRandom, lbl[2]); s != nil {
			h.cur = c.newKeys13(h, s)
			return h.cur
		}
		c.note("key log has no %s for client random %s", lbl[2], c.crHex())
	}
	return nil
}

func (c *Conn) newKeys13(h *half, secret []byte) *keys {
	k, err := newKeys13(c.suite, secret)
	if err != nil {
		c.note("%s: %v", h.dir, err)
		return nil
	}
	return k
}

// canLookUp reports whether secrets can be looked up, noting why not.
func (c *Conn) canLookUp() bool {
	switch {
	case c.keys == nil:
		c.note("no key log")
	case !c.haveCR:
		c.note("no ClientHello seen: client random unknown")
	case c.suite == nil:
		// serverHello noted why.
	case !c.keys.has(&c.clientRandom):
		c.note("key log has no secrets for client random %s", c.crHex())
	default:
		return true
	}
	return false
}

// keys12 returns h's TLS 1.2 keys, deriving both directions' at the first
// need, or nil.
func (c *Conn) keys12(h *half) *keys {
	if c.version != versionTLS12 {
		if c.version == 0 {
			c.note("%s: encrypted records before the ServerHello", h.dir)
		}
		return nil
	}
	if !c.looked12 {
		c.looked12 = true
		if !c.canLookUp() {
			return nil
		}
		master := c.keys.secret(&c.clientRandom, labelMaster)
		if master == nil {
			c.note("key log has no %s for client random %s", labelMaster, c.crHex())
			return nil
		}
		var err error
		c.c12, c.s12, err = newKeys12(c.suite, master, &c.clientRandom, &c.serverRandom)
		if err != nil {
			c.note("%v", err)
		}
	}
	if h.dir == ClientToServer {
		return c.c12
	}
	return c.s12
}

// changeCipherSpec handles a plaintext ChangeCipherSpec record.
func (c *Conn) changeCipherSpec(h *half, r *rec, body []byte) error {
	if c.version == versionTLS13 || c.version == 0 {
		// RFC 8446 §5: a compatibility record, ignored.
		return nil
	}
	if len(body) != 1 || body[0] != 1 {
		return c.fail(h, r, ErrMalformed, "bad ChangeCipherSpec")
	}
	// RFC 5246 §7.1: the sender's records are protected from here on, with
	// sequence numbers from 0 (a fresh keys value starts at 0).
	h.ccs = true
	return nil
}

// alert records the alerts of a plaintext or decrypted alert record.
func (c *Conn) alert(h *half, r *rec, p []byte) {
	for ; len(p) >= 2; p = p[2:] {
		a := Alert{Dir: h.dir, Level: p[0], Description: p[1], Time: r.t}
		if a.Description == 0 {
			h.stats.CloseNotify = true
		}
		if len(c.alerts) < maxAlerts {
			c.alerts = append(c.alerts, a)
		}
	}
}

// suiteName returns the IANA name of a cipher suite, or its hex value.
func suiteName(id uint16) string {
	for _, s := range suites {
		if s.id == id {
			return s.name
		}
	}
	return tls.CipherSuiteName(id)
}

// Info returns what is known about the connection so far. The slices are
// copies.
func (c *Conn) Info() Info {
	in := Info{
		Version:     c.version,
		Cipher:      c.cipher,
		SNI:         c.sni,
		ALPN:        c.alpn,
		OfferedALPN: append([]string(nil), c.offeredALPN...),
		HelloRetry:  c.hrr,
		Resumed:     c.resumed,
		EarlyData:   c.offerEarly,
		Alerts:      append([]Alert(nil), c.alerts...),
	}
	if c.version != 0 {
		in.VersionName = tls.VersionName(c.version)
		in.CipherName = suiteName(c.cipher)
	}
	if c.haveCR {
		in.ClientRandom = c.crHex()
	}
	var dec, undec int64
	ok := true
	for d := range c.half {
		h := &c.half[d]
		in.Dir[d] = h.stats
		in.Dir[d].Err = h.err
		in.Dir[d].Resyncing = h.rs != nil
		in.Dir[d].Stopped = h.lost || h.failed
		switch {
		case h.rs != nil:
			in.Dir[d].Partial = h.rs.end - h.rs.start
		case !h.lost:
			in.Dir[d].Partial = h.hdrN + h.bodyN
		}
		dec += h.stats.Decrypted
		undec += h.stats.Undecryptable
		if h.lost || h.failed || h.gapped || h.stats.Damaged > 0 || h.stats.Pending > 0 {
			ok = false
		}
	}
	in.Decrypted = ok && undec == 0 && dec > 0
	notes := c.notes
	if !in.Decrypted && len(notes) == 0 {
		switch {
		case !c.haveCR:
			notes = []string{"no ClientHello seen"}
		case !c.finalSH:
			notes = []string{"no ServerHello seen"}
		case c.half[0].stats.Pending+c.half[1].stats.Pending > 0:
			notes = []string{"records held waiting for the other direction"}
		default:
			notes = []string{"no encrypted records seen"}
		}
	}
	in.Note = strings.Join(notes, "; ")
	return in
}
