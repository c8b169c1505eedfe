package tlsdec

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, wrapped in *Error by Feed.
var (
	// ErrNotTLS: the first bytes of a direction are not a TLS handshake
	// record (not TLS, or the capture began in the middle of the
	// connection). The caller may treat the stream as something else.
	ErrNotTLS = errors.New("tlsdec: not a TLS stream")
	// ErrMalformed: a record header or handshake message violates the
	// protocol or a limit of this package (see the Max constants).
	ErrMalformed = errors.New("tlsdec: malformed TLS")
	// ErrDecrypt: a record failed authentication under the key log's keys
	// (wrong or mismatched secrets, or corrupted bytes).
	ErrDecrypt = errors.New("tlsdec: decryption failed")
)

// Error is a failure in one direction of a connection, with its position.
type Error struct {
	Dir    Direction
	Record int64 // index of the record in this direction, from 0
	Offset int64 // stream offset of the record's header in this direction
	Err    error // wraps one of the sentinels above
}

func (e *Error) Error() string {
	return fmt.Sprintf("tlsdec: %s record %d at offset %d: %s", e.Dir, e.Record, e.Offset,
		strings.TrimPrefix(e.Err.Error(), "tlsdec: "))
}

func (e *Error) Unwrap() error { return e.Err }
