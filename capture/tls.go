package capture

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// tlsConn decrypts a TLS connection with the key log and hands the
// plaintext to the HTTP parser its ALPN names (HTTP/2 or HTTP/1.1): the
// seam between byte streams and HTTP messages.
type tlsConn struct {
	s        *session
	keys     *tlsdec.KeyLog
	id       uint64
	dec      *tlsdec.Conn
	inner    protoHandler
	reported [2]bool // a decryption error was recorded for the direction
	last     formats.TLS
	written  bool
	// ended: the connection is over but waits for its secrets; finish
	// runs (with endSt, endT), then endThen, once they came or the wait
	// ended.
	ended   bool
	endSt   formats.EndStatus
	endT    int64
	endThen func()
}

func newTLSConn(s *session, id uint64, keys *tlsdec.KeyLog) *tlsConn {
	c := &tlsConn{s: s, id: id, keys: keys}
	c.dec = tlsdec.NewConn(keys, c, tlsdec.Options{KeyWait: s.keyWait.enabled()})
	s.tlsSeen(1, 0)
	return c
}

// Data implements tlsdec.Sink: decrypted application data.
func (c *tlsConn) Data(dir tlsdec.Direction, p []byte, t int64) {
	if c.inner == nil {
		info := c.dec.Info()
		c.record(info, t)
		switch {
		case info.ALPN == "h2", info.ALPN == "" && dir == tlsdec.ClientToServer && bytes.HasPrefix(p, h2Preface[:min(len(p), len(h2Preface))]):
			c.inner = newH2Conn(c.s, c.id)
		default:
			c.inner = newH1Conn(c.s, c.id, [2]bool{})
		}
	}
	c.inner.data(formats.Direction(dir), p, t)
}

// Lost implements tlsdec.LossSink: records damaged in place (garbled, not
// missing) were skipped. It is reported where it happened, and the HTTP
// layer above learns of the hole as of a gap, so that it resynchronizes.
func (c *tlsConn) Lost(l tlsdec.Loss) {
	dir := formats.Direction(l.Dir)
	c.s.anomaly(c.id, formats.NoExchange, dir, l.Time, formats.AnomalyMalformed, l.Offset, l.Skipped, "TLS: "+l.String())
	if c.inner != nil {
		c.inner.gap(dir, max(l.Plaintext, 0), l.Time)
	}
}

func (c *tlsConn) data(dir formats.Direction, p []byte, t int64) {
	c.failed(c.dec.Feed(tlsdec.Direction(dir), p, t), t)
	if c.s.keyWait.enabled() && c.dec.WaitingKeys() {
		c.s.keyWait.add(c, t)
	}
}

// failed records a decryption error, once per direction.
func (c *tlsConn) failed(err error, t int64) {
	var te *tlsdec.Error
	if err == nil || !errors.As(err, &te) || c.reported[te.Dir] {
		return
	}
	dir := formats.Direction(te.Dir)
	c.reported[dir] = true
	c.s.anomaly(c.id, formats.NoExchange, dir, t, formats.AnomalyMalformed, 0, 0,
		fmt.Sprintf("TLS: %v; the rest of this direction is not decrypted", err))
}

// retry decrypts what the key log's new secrets open (records held since
// they came keep their own capture times).
func (c *tlsConn) retry(t int64) { c.failed(c.dec.Retry(), t) }

// stopWaiting gives up waiting for secrets (the wait's bound, or the end).
func (c *tlsConn) stopWaiting(t int64) { c.failed(c.dec.StopWaiting(), t) }

func (c *tlsConn) gap(dir formats.Direction, n int64, t int64) {
	c.dec.Gap(tlsdec.Direction(dir), int(n))
	if c.inner != nil {
		c.inner.gap(dir, n, t)
	}
}

func (c *tlsConn) fin(dir formats.Direction, t int64) {
	if c.inner != nil {
		c.inner.fin(dir, t)
	}
}

// finishThen implements connEnder: finish, then then (the connection's
// end record) — both later when the connection waits for its secrets
// (they come, or the wait ends).
func (c *tlsConn) finishThen(st formats.EndStatus, t int64, then func()) {
	if c.s.keyWait.defer_(c, st, t, then) {
		return
	}
	c.finish(st, t)
	then()
}

func (c *tlsConn) finish(st formats.EndStatus, t int64) {
	info := c.dec.Info()
	c.record(info, t)
	if !decrypted(info) {
		c.s.tlsSeen(0, 1)
		note := info.Note
		switch {
		case c.keys == nil || c.keys.Stats().Secrets == 0:
			note = "no key log was given (record with --keylog FILE, the NSS key log the client wrote via SSLKEYLOGFILE)"
		case note == "":
			note = "no encrypted records"
		}
		c.s.anomaly(c.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyNoKeys, 0,
			info.Dir[0].Bytes+info.Dir[1].Bytes, "TLS not (fully) decrypted: "+note)
	}
	if c.inner != nil {
		c.inner.finish(st, t)
	}
}

// record writes a TLS record when what is known about the handshake
// changed since the last one.
func (c *tlsConn) record(info tlsdec.Info, t int64) {
	r := formats.TLS{Conn: c.id, Time: t, Version: info.Version, Cipher: info.Cipher, ALPN: info.ALPN,
		SNI: info.SNI, Decrypted: decrypted(info), Note: info.Note}
	cmp := r
	cmp.Time = c.last.Time
	if c.written && cmp == c.last {
		return
	}
	c.written = true
	c.last = r
	c.s.emit(&r)
}

// decrypted reports whether the key log decrypted the connection: every
// record was (Info.Decrypted), or every record that was captured was and
// decryption resumed after each direction's gaps — the bytes lost to them
// are reported as gaps, not as a key problem.
func decrypted(info tlsdec.Info) bool {
	if info.Decrypted {
		return true
	}
	var dec int64
	for _, d := range info.Dir {
		if d.Stopped || d.Resyncing || d.Undecryptable > 0 || d.Err != nil || d.Pending > 0 {
			return false
		}
		dec += d.Decrypted
	}
	return dec > 0
}
