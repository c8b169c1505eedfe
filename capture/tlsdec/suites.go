package tlsdec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// TLS versions (RFC 8446 §4.1.2, RFC 5246 §6.2.1).
const (
	versionTLS12 = 0x0303
	versionTLS13 = 0x0304
)

type bulk uint8

const (
	bulkAESGCM bulk = iota + 1
	bulkChaCha
	bulkAESCBC
)

// suite is a cipher suite this package can decrypt.
type suite struct {
	id      uint16
	v13     bool             // a TLS 1.3 suite (RFC 8446 §B.4)
	hash    func() hash.Hash // HKDF hash (1.3) or PRF hash (1.2)
	hashLen int
	bulk    bulk
	keyLen  int
	mac     func() hash.Hash // CBC suites: record MAC
	macLen  int
	name    string // IANA name
}

var suites = []*suite{
	// TLS 1.3, RFC 8446 §B.4.
	{id: 0x1301, v13: true, hash: sha256.New, hashLen: 32, bulk: bulkAESGCM, keyLen: 16, name: "TLS_AES_128_GCM_SHA256"},
	{id: 0x1302, v13: true, hash: sha512.New384, hashLen: 48, bulk: bulkAESGCM, keyLen: 32, name: "TLS_AES_256_GCM_SHA384"},
	{id: 0x1303, v13: true, hash: sha256.New, hashLen: 32, bulk: bulkChaCha, keyLen: 32, name: "TLS_CHACHA20_POLY1305_SHA256"},

	// TLS 1.2 AEAD suites (RFC 5288, RFC 5289, RFC 7905). The key exchange
	// does not matter: the key log gives the master secret.
	{id: 0xc02b, hash: sha256.New, bulk: bulkAESGCM, keyLen: 16, name: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
	{id: 0xc02f, hash: sha256.New, bulk: bulkAESGCM, keyLen: 16, name: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
	{id: 0xc02c, hash: sha512.New384, bulk: bulkAESGCM, keyLen: 32, name: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"},
	{id: 0xc030, hash: sha512.New384, bulk: bulkAESGCM, keyLen: 32, name: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
	{id: 0x009c, hash: sha256.New, bulk: bulkAESGCM, keyLen: 16, name: "TLS_RSA_WITH_AES_128_GCM_SHA256"},
	{id: 0x009d, hash: sha512.New384, bulk: bulkAESGCM, keyLen: 32, name: "TLS_RSA_WITH_AES_256_GCM_SHA384"},
	{id: 0x009e, hash: sha256.New, bulk: bulkAESGCM, keyLen: 16, name: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"},
	{id: 0x009f, hash: sha512.New384, bulk: bulkAESGCM, keyLen: 32, name: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384"},
	{id: 0xcca8, hash: sha256.New, bulk: bulkChaCha, keyLen: 32, name: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"},
	{id: 0xcca9, hash: sha256.New, bulk: bulkChaCha, keyLen: 32, name: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
	{id: 0xccaa, hash: sha256.New, bulk: bulkChaCha, keyLen: 32, name: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256"},

	// TLS 1.2 CBC suites (RFC 5246 §6.2.3.2, RFC 5289), MAC-then-encrypt.
	{id: 0xc009, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha1.New, macLen: 20, name: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"},
	{id: 0xc00a, hash: sha256.New, bulk: bulkAESCBC, keyLen: 32, mac: sha1.New, macLen: 20, name: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"},
	{id: 0xc013, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha1.New, macLen: 20, name: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"},
	{id: 0xc014, hash: sha256.New, bulk: bulkAESCBC, keyLen: 32, mac: sha1.New, macLen: 20, name: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"},
	{id: 0x002f, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha1.New, macLen: 20, name: "TLS_RSA_WITH_AES_128_CBC_SHA"},
	{id: 0x0035, hash: sha256.New, bulk: bulkAESCBC, keyLen: 32, mac: sha1.New, macLen: 20, name: "TLS_RSA_WITH_AES_256_CBC_SHA"},
	{id: 0x003c, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha256.New, macLen: 32, name: "TLS_RSA_WITH_AES_128_CBC_SHA256"},
	{id: 0x003d, hash: sha256.New, bulk: bulkAESCBC, keyLen: 32, mac: sha256.New, macLen: 32, name: "TLS_RSA_WITH_AES_256_CBC_SHA256"},
	{id: 0xc023, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha256.New, macLen: 32, name: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"},
	{id: 0xc027, hash: sha256.New, bulk: bulkAESCBC, keyLen: 16, mac: sha256.New, macLen: 32, name: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"},
	{id: 0xc024, hash: sha512.New384, bulk: bulkAESCBC, keyLen: 32, mac: sha512.New384, macLen: 48, name: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384"},
	{id: 0xc028, hash: sha512.New384, bulk: bulkAESCBC, keyLen: 32, mac: sha512.New384, macLen: 48, name: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384"},
}

func lookupSuite(id uint16, v13 bool) *suite {
	for _, s := range suites {
		if s.id == id && s.v13 == v13 {
			return s
		}
	}
	return nil
}

// ivLen is the length of the IV taken from the key schedule: 12 bytes for
// TLS 1.3 (RFC 8446 §5.3) and ChaCha20 in TLS 1.2 (RFC 7905 §2), the 4-byte
// implicit salt for AES-GCM in TLS 1.2 (RFC 5288 §3), none for CBC (RFC 5246
// §6.3: TLS 1.2 CBC records carry an explicit IV).
func (s *suite) ivLen() int {
	switch {
	case s.v13 || s.bulk == bulkChaCha:
		return 12
	case s.bulk == bulkAESGCM:
		return 4
	}
	return 0
}

// minCiphertext is the shortest record body the suite produces: the tag of
// an empty plaintext, with the inner content type in TLS 1.3 (RFC 8446
// §5.2) and the explicit nonce of TLS 1.2 AES-GCM (RFC 5288 §3); for CBC an
// IV and the MAC padded to whole blocks (RFC 5246 §6.2.3.2).
func (s *suite) minCiphertext() int {
	const tag = 16 // AES-GCM and ChaCha20-Poly1305
	switch {
	case s.v13:
		return 1 + tag
	case s.bulk == bulkAESGCM:
		return 8 + tag
	case s.bulk == bulkChaCha:
		return tag
	}
	return aes.BlockSize + (s.macLen/aes.BlockSize+1)*aes.BlockSize
}

// keys decrypts the records of one direction under one traffic key.
type keys struct {
	s      *suite
	aead   cipher.AEAD
	cbc    cipher.BlockMode // CBC suites; SetIV per record
	mac    hash.Hash        // CBC suites (HMAC)
	iv     [12]byte
	seq    uint64
	secret []byte // TLS 1.3 traffic secret, for KeyUpdate (RFC 8446 §7.2)
	// TLS 1.3, for plausible13: the AES block cipher under the key
	// (AES-GCM), or the key (ChaCha20-Poly1305).
	blk  cipher.Block
	ckey []byte

	// Scratch kept in the struct so that slicing them does not make the
	// AEAD's arguments escape and allocate per record.
	nonce  [12]byte
	aad    [13]byte
	macBuf [64]byte
}

func newAEAD(b bulk, key []byte) (cipher.AEAD, error) {
	if b == bulkChaCha {
		return chacha20poly1305.New(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// expandLabel is HKDF-Expand-Label with an empty context (RFC 8446 §7.1).
func expandLabel(h func() hash.Hash, secret []byte, lbl string, length int) ([]byte, error) {
	var info []byte
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(len("tls13 ")+len(lbl)))
	info = append(info, "tls13 "...)
	info = append(info, lbl...)
	info = append(info, 0) // empty context
	return hkdf.Expand(h, secret, string(info), length)
}

// newKeys13 derives the record keys of a TLS 1.3 traffic secret: key and iv
// by HKDF-Expand-Label (RFC 8446 §7.3).
func newKeys13(s *suite, secret []byte) (*keys, error) {
	if len(secret) != s.hashLen {
		return nil, fmt.Errorf("secret is %d bytes; %s needs %d", len(secret), suiteName(s.id), s.hashLen)
	}
	key, err := expandLabel(s.hash, secret, "key", s.keyLen)
	if err != nil {
		return nil, err
	}
	iv, err := expandLabel(s.hash, secret, "iv", 12)
	if err != nil {
		return nil, err
	}
	k := &keys{s: s, secret: secret}
	if s.bulk == bulkAESGCM {
		if k.blk, err = aes.NewCipher(key); err != nil {
			return nil, err
		}
		k.aead, err = cipher.NewGCM(k.blk)
	} else {
		k.ckey = key
		k.aead, err = newAEAD(s.bulk, key)
	}
	if err != nil {
		return nil, err
	}
	copy(k.iv[:], iv)
	return k, nil
}

// next returns the keys after a KeyUpdate: the next traffic secret is
// HKDF-Expand-Label(secret, "traffic upd", "", Hash.length) (RFC 8446 §7.2).
func (k *keys) next() (*keys, error) {
	secret, err := expandLabel(k.s.hash, k.secret, "traffic upd", k.s.hashLen)
	if err != nil {
		return nil, err
	}
	return newKeys13(k.s, secret)
}

// prf12 is the TLS 1.2 PRF, P_hash(secret, label + seed) (RFC 5246 §5).
func prf12(h func() hash.Hash, secret []byte, lbl string, seed []byte, out []byte) {
	labelSeed := append([]byte(lbl), seed...)
	mac := hmac.New(h, secret)
	a := labelSeed // A(0)
	for off := 0; off < len(out); {
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
		mac.Reset()
		mac.Write(a)
		mac.Write(labelSeed)
		off += copy(out[off:], mac.Sum(nil))
	}
}

// newKeys12 derives both directions' keys from a TLS 1.2 master secret:
// key_block = PRF(master, "key expansion", server_random + client_random),
// split into MAC keys, write keys and IVs, client first (RFC 5246 §6.3).
func newKeys12(s *suite, master []byte, clientRandom, serverRandom *[32]byte) (client, server *keys, err error) {
	macLen := 0
	if s.bulk == bulkAESCBC {
		macLen = s.macLen
	}
	ivLen := s.ivLen()
	kb := make([]byte, 2*(macLen+s.keyLen+ivLen))
	seed := make([]byte, 0, 64)
	seed = append(seed, serverRandom[:]...)
	seed = append(seed, clientRandom[:]...)
	prf12(s.hash, master, "key expansion", seed, kb)
	cMAC, kb := kb[:macLen], kb[macLen:]
	sMAC, kb := kb[:macLen], kb[macLen:]
	cKey, kb := kb[:s.keyLen], kb[s.keyLen:]
	sKey, kb := kb[:s.keyLen], kb[s.keyLen:]
	cIV, sIV := kb[:ivLen], kb[ivLen:]
	if client, err = newKeys12Dir(s, cMAC, cKey, cIV); err != nil {
		return nil, nil, err
	}
	if server, err = newKeys12Dir(s, sMAC, sKey, sIV); err != nil {
		return nil, nil, err
	}
	return client, server, nil
}

func newKeys12Dir(s *suite, macKey, key, iv []byte) (*keys, error) {
	k := &keys{s: s}
	copy(k.iv[:], iv)
	if s.bulk == bulkAESCBC {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		k.cbc = cipher.NewCBCDecrypter(block, make([]byte, aes.BlockSize))
		if _, ok := k.cbc.(interface{ SetIV([]byte) }); !ok {
			return nil, errors.New("CBC decrypter cannot reset its IV")
		}
		k.mac = hmac.New(s.mac, macKey)
		return k, nil
	}
	aead, err := newAEAD(s.bulk, key)
	if err != nil {
		return nil, err
	}
	k.aead = aead
	return k, nil
}

// errAuth is the cause of ErrDecrypt failures.
var errAuth = errors.New("message authentication failed")

// setNonce sets k.nonce to the IV XOR the 64-bit sequence number, left-padded
// (RFC 8446 §5.3, RFC 7905 §2).
func (k *keys) setNonce() {
	k.nonce = k.iv
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], k.seq)
	for i := range seq {
		k.nonce[4+i] ^= seq[i]
	}
}

// plausible13 reports whether the TLS 1.3 record body may open under k
// with sequence number seq, decrypting only the block of the keystream
// that covers the end of its inner plaintext (RFC 8446 §5.2, §5.4: the
// content type, then zero padding): the last byte that is not zero in
// that block must be a content type (handshake, application data,
// alert), or the block is all padding. One AES block (AES-GCM: counter 2
// is the first plaintext block, NIST SP 800-38D §7.1) or one ChaCha20
// block (counter 1, RFC 8439 §2.8) instead of the whole record: a wrong
// sequence number passes in about 3 of 256 trials, the right one always
// (a damaged record then fails the full open). k.seq is not used.
func (k *keys) plausible13(seq uint64, body []byte) bool {
	n := len(body) - 16 // the tag
	if n <= 0 || !k.s.v13 {
		return true
	}
	nonce := k.iv
	for i := range 8 {
		nonce[4+i] ^= byte(seq >> (56 - 8*i))
	}
	var ks [64]byte
	bs := 16
	switch {
	case k.blk != nil:
		var ctr [16]byte
		copy(ctr[:12], nonce[:])
		binary.BigEndian.PutUint32(ctr[12:], uint32(2+(n-1)/16))
		k.blk.Encrypt(ks[:16], ctr[:])
	case k.ckey != nil:
		bs = 64
		c, err := chacha20.NewUnauthenticatedCipher(k.ckey, nonce[:])
		if err != nil {
			return true
		}
		c.SetCounter(uint32(1 + (n-1)/64))
		c.XORKeyStream(ks[:], ks[:])
	default:
		return true
	}
	start := (n - 1) / bs * bs
	for i := n - 1; i >= start; i-- {
		if b := body[i] ^ ks[i-start]; b != 0 {
			return b == typeAppData || b == typeHandshake || b == typeAlert
		}
	}
	return true
}

// open13 decrypts a TLS 1.3 record (RFC 8446 §5.2): hdr is its 5-byte
// header, the additional data. The plaintext is written to dst[:0], or over
// body if dst is nil. The sequence number advances only on success.
func (k *keys) open13(dst []byte, hdr *[5]byte, body []byte) ([]byte, error) {
	if len(body) < k.aead.Overhead() {
		return nil, errAuth
	}
	if dst == nil {
		dst = body
	}
	k.setNonce()
	copy(k.aad[:5], hdr[:]) // hdr itself would escape through the interface call
	p, err := k.aead.Open(dst[:0], k.nonce[:], body, k.aad[:5])
	if err != nil {
		return nil, errAuth
	}
	k.seq++
	return p, nil
}

// setAAD12 sets the TLS 1.2 additional data: seq_num + type + version +
// length of the plaintext (RFC 5246 §6.2.3.3).
func (k *keys) setAAD12(hdr *[5]byte, n int) {
	binary.BigEndian.PutUint64(k.aad[:8], k.seq)
	copy(k.aad[8:11], hdr[:3])
	binary.BigEndian.PutUint16(k.aad[11:], uint16(n))
}

// open12 decrypts a TLS 1.2 record into dst[:0], or over body if dst is nil.
func (k *keys) open12(dst []byte, hdr *[5]byte, body []byte) ([]byte, error) {
	switch k.s.bulk {
	case bulkAESGCM:
		// GenericAEADCipher with an 8-byte explicit nonce (RFC 5288 §3).
		if len(body) < 8+k.aead.Overhead() {
			return nil, errAuth
		}
		copy(k.nonce[:4], k.iv[:4])
		copy(k.nonce[4:], body[:8])
		ct := body[8:]
		k.setAAD12(hdr, len(ct)-k.aead.Overhead())
		if dst == nil {
			dst = ct // in place: the plaintext starts where the ciphertext does
		}
		p, err := k.aead.Open(dst[:0], k.nonce[:], ct, k.aad[:])
		if err != nil {
			return nil, errAuth
		}
		k.seq++
		return p, nil
	case bulkChaCha:
		if len(body) < k.aead.Overhead() {
			return nil, errAuth
		}
		if dst == nil {
			dst = body
		}
		k.setNonce()
		k.setAAD12(hdr, len(body)-k.aead.Overhead())
		p, err := k.aead.Open(dst[:0], k.nonce[:], body, k.aad[:])
		if err != nil {
			return nil, errAuth
		}
		k.seq++
		return p, nil
	}
	return k.openCBC(dst, hdr, body)
}

// openCBC decrypts a TLS 1.2 GenericBlockCipher record: explicit IV, then
// content + MAC + padding (RFC 5246 §6.2.3.2). It checks padding and MAC but,
// unlike an endpoint, need not be constant-time: nothing answers an attacker.
func (k *keys) openCBC(dst []byte, hdr *[5]byte, body []byte) ([]byte, error) {
	const bs = aes.BlockSize
	if len(body) < 2*bs || len(body)%bs != 0 || len(body)-bs < k.s.macLen+1 {
		return nil, errAuth
	}
	iv, ct := body[:bs], body[bs:]
	k.cbc.(interface{ SetIV([]byte) }).SetIV(iv)
	if dst == nil {
		dst = ct
	}
	p := dst[:len(ct)]
	k.cbc.CryptBlocks(p, ct)
	pad := int(p[len(p)-1])
	if pad+1+k.s.macLen > len(p) {
		return nil, errAuth
	}
	for _, b := range p[len(p)-1-pad : len(p)-1] {
		if int(b) != pad {
			return nil, errAuth
		}
	}
	n := len(p) - 1 - pad - k.s.macLen
	content, mac := p[:n], p[n:n+k.s.macLen]
	k.setAAD12(hdr, n)
	k.mac.Reset()
	k.mac.Write(k.aad[:])
	k.mac.Write(content)
	if subtle.ConstantTimeCompare(k.mac.Sum(k.macBuf[:0]), mac) != 1 {
		return nil, errAuth
	}
	k.seq++
	return content, nil
}
