package tlsdec

import (
	"crypto/tls"
	"fmt"
)

// Protection: which records are encrypted, their decryption under the
// phase's keys (TLS 1.3 inner plaintext, TLS 1.2 ChangeCipherSpec), the
// keys looked up in the key log, alerts.

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
