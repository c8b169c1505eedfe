package chunked

import (
	"bytes"
	"errors"
	"fmt"
)

// errCode classifies a grammar violation without allocating; Decoder.fail
// turns it into an error. Resync uses the codes only as pass/fail.
type errCode uint8

const (
	codeOK errCode = iota
	codeBareLF
	codeCR
	codeNoSize
	codeSizeByte
	codeExt
	codeTooManyDigits
	codeSizeTooLarge
	codeLineTooLong
	codeNoCRLF
	codeField
	codeObsFold
	codeOverhead
)

// Detail errors, wrapped together with a sentinel so that tests (and
// curious callers) can tell the classes apart with errors.Is.
var (
	errBareLF   = errors.New("line ends with bare LF (RFC 9112 §7.1 requires CRLF)")
	errCR       = errors.New("CR inside a line")
	errSize     = errors.New("invalid chunk size")
	errExt      = errors.New("invalid chunk extension (RFC 9112 §7.1.1)")
	errNoCRLF   = errors.New("chunk data not followed by CRLF")
	errField    = errors.New("invalid trailer field (RFC 9112 §5)")
	errObsFold  = errors.New("obsolete line folding in trailer (RFC 9112 §5.2)")
	errOverhead = fmt.Errorf("more than %d bytes of framing overhead", MaxOverhead)
)

func (c errCode) err(b byte) error {
	switch c {
	case codeBareLF:
		return fmt.Errorf("%w: %w", ErrMalformed, errBareLF)
	case codeCR:
		return fmt.Errorf("%w: %w", ErrMalformed, errCR)
	case codeNoSize:
		return fmt.Errorf("%w: %w: no hex digits", ErrMalformed, errSize)
	case codeSizeByte:
		return fmt.Errorf("%w: %w: unexpected byte %q", ErrMalformed, errSize, b)
	case codeExt:
		return fmt.Errorf("%w: %w: unexpected byte %q", ErrMalformed, errExt, b)
	case codeTooManyDigits:
		return fmt.Errorf("%w: more than %d hex digits", ErrChunkTooLarge, maxHexDigits)
	case codeSizeTooLarge:
		return fmt.Errorf("%w: more than %d bytes", ErrChunkTooLarge, int64(MaxChunkSize))
	case codeLineTooLong:
		return fmt.Errorf("%w: more than %d bytes without LF", ErrLineTooLong, MaxLineLength)
	case codeNoCRLF:
		return fmt.Errorf("%w: %w: got %q", ErrMalformed, errNoCRLF, b)
	case codeField:
		return fmt.Errorf("%w: %w: unexpected byte %q", ErrMalformed, errField, b)
	case codeObsFold:
		return fmt.Errorf("%w: %w", ErrMalformed, errObsFold)
	case codeOverhead:
		return fmt.Errorf("%w: %w", ErrOverhead, errOverhead)
	}
	return ErrMalformed
}

// Character classes (RFC 9110 §5.6).
const (
	cHex   = 1 << iota // HEXDIG
	cTchar             // tchar
	cQd                // qdtext: HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
	cQp                // after "\" in quoted-pair: HTAB / SP / VCHAR / obs-text
	cField             // field-value byte: HTAB / SP / VCHAR / obs-text
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		var m uint8
		if '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' {
			m |= cHex
		}
		if '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' ||
			bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), b) >= 0 {
			m |= cTchar
		}
		vchar := 0x21 <= b && b <= 0x7e
		obs := b >= 0x80
		if b == '\t' || b == ' ' || vchar && b != '"' && b != '\\' || obs {
			m |= cQd
		}
		if b == '\t' || b == ' ' || vchar || obs {
			m |= cQp | cField
		}
		t[c] = m
	}
	return t
}()

func unhex(b byte) uint64 {
	switch {
	case b <= '9':
		return uint64(b - '0')
	case b >= 'a':
		return uint64(b - 'a' + 10)
	default:
		return uint64(b - 'A' + 10)
	}
}

func isWS(b byte) bool { return b == ' ' || b == '\t' }

func skipWS(c []byte, i int) int {
	for i < len(c) && isWS(c[i]) {
		i++
	}
	return i
}

func skipClass(c []byte, i int, m uint8) int {
	for i < len(c) && class[c[i]]&m != 0 {
		i++
	}
	return i
}

// lineContent checks that line (which ends in LF) ends in CRLF and has no
// other CR, and returns it without the CRLF. On error bad is the index in
// line of the offending byte.
func lineContent(line []byte) (c []byte, bad int, code errCode) {
	n := len(line)
	if n < 2 || line[n-2] != '\r' {
		return nil, n - 1, codeBareLF
	}
	c = line[:n-2]
	if i := bytes.IndexByte(c, '\r'); i >= 0 {
		return nil, i, codeCR
	}
	return c, 0, codeOK
}

// parseSizeLine parses chunk-size [ chunk-ext ] (RFC 9112 §7.1, §7.1.1):
//
//	chunk-size = 1*HEXDIG
//	chunk-ext  = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-val = token / quoted-string
//
// plus trailing whitespace, which net/http accepts too. c has no CRLF.
// c[extLo:extHi] is the extension text after the first ';' without
// trailing whitespace. On error bad is the index of the offending byte
// (len(c) if the line ended too early).
func parseSizeLine(c []byte) (size uint64, extLo, extHi, bad int, code errCode) {
	i := 0
	for ; i < len(c) && class[c[i]]&cHex != 0; i++ {
		if i == maxHexDigits {
			return 0, 0, 0, i, codeTooManyDigits
		}
		size = size<<4 | unhex(c[i])
	}
	if i == 0 {
		if len(c) == 0 {
			return 0, 0, 0, 0, codeNoSize
		}
		return 0, 0, 0, 0, codeSizeByte
	}
	if size > MaxChunkSize {
		return 0, 0, 0, 0, codeSizeTooLarge
	}
	j := skipWS(c, i)
	if j == len(c) {
		return size, 0, 0, 0, codeOK
	}
	if c[j] != ';' {
		return 0, 0, 0, j, codeSizeByte
	}
	extLo = j + 1
	for {
		// c[j] == ';'
		j = skipWS(c, j+1)
		k := skipClass(c, j, cTchar)
		if k == j {
			return 0, 0, 0, j, codeExt
		}
		j = skipWS(c, k)
		if j < len(c) && c[j] == '=' {
			j = skipWS(c, j+1)
			if j < len(c) && c[j] == '"' {
				k, ok := skipQuoted(c, j)
				if !ok {
					return 0, 0, 0, k, codeExt
				}
				j = k
			} else {
				k := skipClass(c, j, cTchar)
				if k == j {
					return 0, 0, 0, j, codeExt
				}
				j = k
			}
			j = skipWS(c, j)
		}
		if j == len(c) {
			break
		}
		if c[j] != ';' {
			return 0, 0, 0, j, codeExt
		}
	}
	extHi = len(c)
	for extHi > extLo && isWS(c[extHi-1]) {
		extHi--
	}
	return size, extLo, extHi, 0, codeOK
}

// skipQuoted skips a quoted-string starting at c[i] == '"' and returns the
// index after its closing quote; when it is invalid, ok is false and the
// index is that of the offending byte (len(c) if unterminated).
//
//	quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE
//	quoted-pair   = "\" ( HTAB / SP / VCHAR / obs-text )
func skipQuoted(c []byte, i int) (int, bool) {
	for i++; i < len(c); i++ {
		switch b := c[i]; {
		case b == '"':
			return i + 1, true
		case b == '\\':
			i++
			if i == len(c) || class[c[i]]&cQp == 0 {
				return i, false
			}
		case class[b]&cQd == 0:
			return i, false
		}
	}
	return i, false
}

// parseField parses a trailer field line (RFC 9112 §5, RFC 9110 §5.5):
//
//	field-line  = field-name ":" OWS field-value OWS
//	field-name  = token
//	field-value = *( VCHAR / obs-text / SP / HTAB ), trimmed
//
// A line starting with whitespace is obsolete line folding and rejected
// (RFC 9112 §5.2 allows that). c is not empty and has no CRLF.
func parseField(c []byte) (nameEnd, valLo, valHi, bad int, code errCode) {
	if isWS(c[0]) {
		return 0, 0, 0, 0, codeObsFold
	}
	k := skipClass(c, 0, cTchar)
	if k == 0 || k == len(c) || c[k] != ':' {
		if k == len(c) {
			k-- // the line ended without ':'; blame its last byte
		}
		return 0, 0, 0, k, codeField
	}
	valLo = skipWS(c, k+1)
	valHi = len(c)
	for valHi > valLo && isWS(c[valHi-1]) {
		valHi--
	}
	if e := skipClass(c, valLo, cField); e < valHi {
		return 0, 0, 0, e, codeField
	}
	return k, valLo, valHi, 0, codeOK
}

// validSizePrefix reports whether b, which contains no LF, may be the
// beginning of a valid chunk-size line. It is deliberately loose about
// extensions: it checks the digits and that no byte is one a complete line
// could never hold.
func validSizePrefix(b []byte) bool {
	if len(b) >= MaxLineLength {
		return false
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	i := 0
	var size uint64
	for ; i < len(b) && class[b[i]]&cHex != 0; i++ {
		if i == maxHexDigits {
			return false
		}
		size = size<<4 | unhex(b[i])
	}
	if size > MaxChunkSize {
		return false
	}
	if i == len(b) {
		return true
	}
	if i == 0 {
		return false
	}
	for _, c := range b[i:] {
		if class[c]&cQp == 0 { // every byte a size line may hold after the digits
			return false
		}
	}
	return true
}
