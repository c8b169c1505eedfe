package formats

import (
	"encoding/base64"
	"encoding/hex"
)

// Redaction placeholders. capture/redact replaces each Secret value (and
// credential) in a body by a placeholder of exactly its length: a
// pattern — PlaceholderPrefix and 16 hex digits of a hash of the value
// keyed per recording — repeated or cut to the value's length; a base64
// value is replaced by the base64 of such a placeholder of the same
// decoded length. Equal values get equal placeholders within one
// recording, never across recordings. The format is defined here, where
// it is written (capture/redact) and read back (diff, which compares
// placeholders by their lengths only) both find it.

// PlaceholderPrefix starts every placeholder pattern.
const PlaceholderPrefix = "redacted-"

// PlaceholderTagLen is the length of a placeholder pattern:
// PlaceholderPrefix and 16 hex digits.
const PlaceholderTagLen = len(PlaceholderPrefix) + 16

// placeholderPrefixB64 is the base64 of PlaceholderPrefix (9 bytes: 12
// characters, no padding).
const placeholderPrefixB64 = "cmVkYWN0ZWQt"

// AppendPlaceholderTag appends to dst the placeholder pattern of a keyed
// hash: PlaceholderPrefix and the hex of sum's first 8 bytes (sum must
// hold at least 8).
func AppendPlaceholderTag(dst, sum []byte) []byte {
	return hex.AppendEncode(append(dst, PlaceholderPrefix...), sum[:8])
}

// IsPlaceholder reports whether s is a redaction placeholder that holds
// part of a hash: a pattern repeated or cut to len(s), longer than
// PlaceholderPrefix (shorter ones are the same in every recording), or
// the base64 of one. It allocates only to decode base64.
func IsPlaceholder(s []byte) bool {
	switch {
	case len(s) > len(PlaceholderPrefix) && string(s[:len(PlaceholderPrefix)]) == PlaceholderPrefix:
		tag := s[:min(len(s), PlaceholderTagLen)]
		for _, c := range tag[len(PlaceholderPrefix):] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		for i := len(tag); i < len(s); i++ {
			if s[i] != tag[i%len(tag)] {
				return false
			}
		}
		return true
	case len(s) > len(placeholderPrefixB64) && string(s[:len(placeholderPrefixB64)]) == placeholderPrefixB64 && len(s)%4 == 0:
		dec := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(dec, s)
		return err == nil && IsPlaceholder(dec[:n])
	}
	return false
}
