package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"

	"github.com/wtrace/wtrace/formats"
)

// Secrets redacts credentials in bodies and watch events by content (see
// the package documentation). Each value is replaced by a placeholder of
// exactly the same length: "redacted-" and a keyed hash of the value, cut
// or repeated to fit; a base64 value (Secret data in JSON) stays valid
// base64 of the same decoded length. Equal values get equal placeholders
// within one Secrets (a changed value shows as a changed placeholder);
// the key is random per Secrets, so placeholders reveal nothing across
// sessions and cannot be brute-forced.
//
// A Secrets is safe for concurrent use; the Body and walkers it returns
// are not.
type Secrets struct {
	key  [32]byte
	macs sync.Pool // *tagger: HMAC-SHA256 keyed with key
}

// NewSecrets returns a Secrets with a fresh random key.
func NewSecrets() *Secrets {
	s := &Secrets{}
	rand.Read(s.key[:])
	return s
}

// unparsedFill is the pattern of bytes replaced because they could not be
// parsed (fail closed). It holds no JSON or protobuf structure characters
// that matter: quotes, backslashes and brackets are absent.
const unparsedFill = "-redacted"

// fill writes pattern, repeated, over b.
func fill[P string | []byte](b []byte, pattern P) {
	for i := range b {
		b[i] = pattern[i%len(pattern)]
	}
}

// tagLen is the length of a placeholder pattern (formats.PlaceholderTagLen:
// the format is defined there, for diff to read it back).
const tagLen = formats.PlaceholderTagLen

// tagger is a keyed MAC with its output buffer, reused through
// Secrets.macs (a buffer handed to the hash.Hash interface would escape).
type tagger struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// tag writes the placeholder pattern of value v into buf and returns it.
func (s *Secrets) tag(buf *[tagLen]byte, v []byte) []byte {
	tg, _ := s.macs.Get().(*tagger)
	if tg == nil {
		tg = &tagger{mac: hmac.New(sha256.New, s.key[:])}
	}
	tg.mac.Reset()
	tg.mac.Write(v)
	t := formats.AppendPlaceholderTag(buf[:0], tg.mac.Sum(tg.sum[:0]))
	s.macs.Put(tg)
	return t
}

// replace overwrites the value v in place with its placeholder. A base64
// value is replaced by the base64 of a placeholder of the same decoded
// length when that keeps its encoded length; else (not canonical base64)
// by 'A's, which are valid base64 of every length that is a multiple of 4.
func (s *Secrets) replace(v []byte, b64 bool) {
	var buf [tagLen]byte
	t := s.tag(&buf, v)
	if b64 {
		n := base64.StdEncoding.DecodedLen(len(v))
		if dec, err := base64.StdEncoding.DecodeString(string(v)); err == nil {
			n = len(dec)
		}
		raw := make([]byte, n)
		fill(raw, t)
		if enc := base64.StdEncoding.EncodeToString(raw); len(enc) == len(v) {
			copy(v, enc)
			return
		}
		fill(v, "A")
		return
	}
	fill(v, t)
}
