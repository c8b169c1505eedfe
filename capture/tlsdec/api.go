package tlsdec

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// The types of the package's API: directions, sinks, losses, options,
// what Info reports.

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
