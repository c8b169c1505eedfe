package tlsdec

import (
	"bytes"
	"crypto/tls"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// Handshake message limits. Only the messages this package reads are
// buffered; all others (certificates above all, whose contents are never
// kept) are skipped as they stream by, whatever their declared length.
const (
	// maxHelloLen bounds a ClientHello or ServerHello body: version 2 +
	// random 32 + session ID 1+32 + cipher suites 2+65534 + compression
	// methods 1+255 + extensions 2+65535 (RFC 8446 §4.1.2), the largest
	// the wire format can express.
	maxHelloLen = 2 + 32 + 1 + 32 + 2 + 65534 + 1 + 255 + 2 + 65535
	// maxEELen bounds EncryptedExtensions: a 2-byte length and the
	// extensions (RFC 8446 §4.3.1).
	maxEELen = 2 + 65535
)

// Handshake message types (RFC 8446 §4, RFC 5246 §7.4).
const (
	hsClientHello         = 1
	hsServerHello         = 2
	hsNewSessionTicket    = 4
	hsEndOfEarlyData      = 5
	hsEncryptedExtensions = 8
	hsFinished            = 20
	hsKeyUpdate           = 24
)

// Extension types (RFC 8446 §4.2, RFC 7301, RFC 6066, RFC 7366).
const (
	extServerName        = 0
	extALPN              = 16
	extEncryptThenMAC    = 22
	extPreSharedKey      = 41
	extEarlyData         = 42
	extSupportedVersions = 43

	maxOfferedALPN = 16  // protocols kept from a ClientHello; the rest are ignored
	maxSNILen      = 255 // a DNS name (RFC 1035 §2.3.4); longer names are ignored
)

// hrrRandom is the ServerHello.random of a HelloRetryRequest,
// SHA-256("HelloRetryRequest") (RFC 8446 §4.1.3).
var hrrRandom = [32]byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// hsReader reassembles handshake messages, which may span records and
// share them (RFC 8446 §5.1).
type hsReader struct {
	hdr  [4]byte
	hdrN int
	typ  uint8
	n    int // body length
	got  int
	keep bool
	buf  []byte
}

// keepLimit says whether a message type is buffered, and its bound.
func keepLimit(typ uint8) (int, bool) {
	switch typ {
	case hsClientHello, hsServerHello:
		return maxHelloLen, true
	case hsEncryptedExtensions:
		return maxEELen, true
	case hsKeyUpdate:
		return 1, true
	}
	return 0, false
}

// handshake consumes handshake-protocol bytes of h from record r.
func (c *Conn) handshake(h *half, r *rec, data []byte, encrypted bool) error {
	hr := &h.hs
	for {
		if hr.hdrN < 4 {
			if len(data) == 0 {
				return nil
			}
			n := copy(hr.hdr[hr.hdrN:], data)
			hr.hdrN += n
			data = data[n:]
			if hr.hdrN < 4 {
				return nil
			}
			hr.typ = hr.hdr[0]
			hr.n = int(hr.hdr[1])<<16 | int(hr.hdr[2])<<8 | int(hr.hdr[3])
			hr.got = 0
			limit, keep := keepLimit(hr.typ)
			if keep && hr.n > limit {
				hr.hdrN = 0
				return c.fail(h, r, ErrMalformed, fmt.Sprintf("handshake message type %d of %d bytes exceeds %d", hr.typ, hr.n, limit))
			}
			hr.keep = keep
			if keep {
				if cap(hr.buf) < hr.n {
					hr.buf = make([]byte, 0, hr.n)
				}
				hr.buf = hr.buf[:0]
			}
		}
		take := min(hr.n-hr.got, len(data))
		if hr.keep {
			hr.buf = append(hr.buf, data[:take]...)
		}
		hr.got += take
		data = data[take:]
		if hr.got < hr.n {
			return nil
		}
		hr.hdrN = 0
		var body []byte
		if hr.keep {
			body = hr.buf
		}
		if err := c.message(h, r, hr.typ, body, encrypted); err != nil {
			return err
		}
		if cap(hr.buf) > 1024 {
			hr.buf = nil // a hello's buffer is not kept for the connection's life
		}
		if h.failed {
			return nil
		}
	}
}

// message acts on one complete handshake message. body is nil for the
// types keepLimit does not buffer.
func (c *Conn) message(h *half, r *rec, typ uint8, body []byte, encrypted bool) error {
	switch typ {
	case hsClientHello:
		if h.dir != ClientToServer {
			return c.fail(h, r, ErrMalformed, "ClientHello from the server")
		}
		if encrypted {
			c.note("%s: TLS 1.2 renegotiation is not supported; later records not decrypted", h.dir)
			h.failed = true
			return nil
		}
		return c.clientHello(h, r, body)
	case hsServerHello:
		if h.dir != ServerToClient || encrypted {
			return c.fail(h, r, ErrMalformed, "unexpected ServerHello")
		}
		return c.serverHello(h, r, body)
	case hsEncryptedExtensions:
		if h.dir == ServerToClient && encrypted && c.version == versionTLS13 {
			return c.encryptedExtensions(h, r, body)
		}
	case hsFinished:
		if c.version == versionTLS13 && encrypted && h.phase == phaseHS {
			// RFC 8446 §7.2: records after Finished use the application
			// traffic secret.
			h.phase, h.cur, h.looked, h.early = phaseApp, nil, false, nil
		}
	case hsEndOfEarlyData:
		if h.phase == phaseEarly {
			h.phase, h.early = phaseHS, nil
		}
	case hsKeyUpdate:
		if c.version != versionTLS13 || !encrypted || h.cur == nil {
			return nil
		}
		if len(body) != 1 || body[0] > 1 {
			return c.fail(h, r, ErrMalformed, "bad KeyUpdate")
		}
		// RFC 8446 §4.6.3: the sender's later records use the next
		// secret. A request to update is answered by the peer's own
		// KeyUpdate in the other direction.
		k, err := h.cur.next()
		if err != nil {
			return c.fail(h, r, ErrMalformed, err.Error())
		}
		h.cur = k
		h.stats.KeyUpdates++
	}
	return nil
}

func (c *Conn) clientHello(h *half, r *rec, body []byte) error {
	s := cryptobyte.String(body)
	var (
		vers         uint16
		random, sid  []byte
		suites, comp cryptobyte.String
	)
	if !s.ReadUint16(&vers) || !s.ReadBytes(&random, 32) || !readU8Bytes(&s, &sid) || len(sid) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || !s.ReadUint8LengthPrefixed(&comp) {
		return c.fail(h, r, ErrMalformed, "bad ClientHello")
	}
	exts, ok := readExtensions(&s)
	if !ok {
		return c.fail(h, r, ErrMalformed, "bad ClientHello extensions")
	}
	c.chCount++
	copy(c.clientRandom[:], random)
	c.haveCR = true
	c.sessionID = append(c.sessionID[:0], sid...)
	c.sni, c.offeredALPN, c.offerEarly = "", nil, false
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			break
		}
		switch typ {
		case extServerName:
			// RFC 6066 §3: a list of (name_type, name); host_name is 0.
			var list cryptobyte.String
			if !data.ReadUint16LengthPrefixed(&list) {
				break
			}
			for !list.Empty() {
				var nt uint8
				var name cryptobyte.String
				if !list.ReadUint8(&nt) || !list.ReadUint16LengthPrefixed(&name) {
					break
				}
				if nt == 0 && c.sni == "" && len(name) <= maxSNILen {
					c.sni = string(name)
				}
			}
		case extALPN:
			for _, p := range readALPN(data) {
				if len(c.offeredALPN) < maxOfferedALPN {
					c.offeredALPN = append(c.offeredALPN, p)
				}
			}
		case extEarlyData:
			c.offerEarly = true
		}
	}
	return nil
}

func (c *Conn) serverHello(h *half, r *rec, body []byte) error {
	s := cryptobyte.String(body)
	var (
		vers, cs    uint16
		random, sid []byte
		comp        uint8
	)
	if !s.ReadUint16(&vers) || !s.ReadBytes(&random, 32) || !readU8Bytes(&s, &sid) || len(sid) > 32 ||
		!s.ReadUint16(&cs) || !s.ReadUint8(&comp) {
		return c.fail(h, r, ErrMalformed, "bad ServerHello")
	}
	exts, ok := readExtensions(&s)
	if !ok {
		return c.fail(h, r, ErrMalformed, "bad ServerHello extensions")
	}
	var (
		selected uint16
		alpn     string
		psk, etm bool
	)
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			break
		}
		switch typ {
		case extSupportedVersions:
			// RFC 8446 §4.2.1: the ServerHello carries the selected version.
			data.ReadUint16(&selected)
		case extALPN:
			if p := readALPN(data); len(p) == 1 {
				alpn = p[0]
			}
		case extPreSharedKey:
			psk = true
		case extEncryptThenMAC:
			etm = true
		}
	}
	version := vers
	if selected != 0 {
		version = selected
	}
	c.shCount++
	c.version, c.cipher = version, cs
	if [32]byte(random) == hrrRandom {
		// RFC 8446 §4.1.4: the client answers with a second ClientHello.
		c.hrr = true
		return nil
	}
	c.finalSH = true
	copy(c.serverRandom[:], random)
	switch version {
	case versionTLS13:
		c.suite = lookupSuite(cs, true)
		c.resumed = psk
		cl, sv := &c.half[ClientToServer], &c.half[ServerToClient]
		cl.phase, sv.phase = phaseHS, phaseHS
		if c.offerEarly && psk {
			cl.phase = phaseEarly
		}
		cl.looked, sv.looked = false, false
	case versionTLS12:
		c.suite = lookupSuite(cs, false)
		c.alpn = alpn
		c.resumed = len(sid) > 0 && bytes.Equal(sid, c.sessionID)
		if etm && c.suite != nil && c.suite.bulk == bulkAESCBC {
			c.note("encrypt_then_mac (RFC 7366) is not supported")
			c.suite = nil
			return nil
		}
	default:
		c.note("%s is not supported", tls.VersionName(version))
		return nil
	}
	if c.suite == nil {
		c.note("cipher suite %s (%#04x) is not supported", suiteName(cs), cs)
	}
	return nil
}

func (c *Conn) encryptedExtensions(h *half, r *rec, body []byte) error {
	s := cryptobyte.String(body)
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return c.fail(h, r, ErrMalformed, "bad EncryptedExtensions")
	}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return c.fail(h, r, ErrMalformed, "bad EncryptedExtensions")
		}
		if typ == extALPN {
			if p := readALPN(data); len(p) == 1 {
				c.alpn = p[0]
			}
		}
	}
	return nil
}

func readU8Bytes(s *cryptobyte.String, out *[]byte) bool {
	var v cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&v) {
		return false
	}
	*out = v
	return true
}

// readExtensions reads the optional extensions block that ends a hello
// (RFC 5246 §7.4.1.2: it may be absent).
func readExtensions(s *cryptobyte.String) (cryptobyte.String, bool) {
	var exts cryptobyte.String
	if s.Empty() {
		return exts, true
	}
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return nil, false
	}
	return exts, true
}

// readALPN reads a ProtocolNameList (RFC 7301 §3.1); nil if malformed.
func readALPN(data cryptobyte.String) []string {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) {
		return nil
	}
	var out []string
	for !list.Empty() {
		var p cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&p) || len(p) == 0 {
			return nil
		}
		out = append(out, string(p))
	}
	return out
}
