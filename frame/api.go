package frame

// API CONTRACT SKELETON — the frame helper replaces these bodies (and may
// split this file), keeping every exported name and signature below.

import "errors"

// MaxEventSize bounds one event: Kubernetes' own limit on a watch frame
// (16 MiB, see k8s.io/apimachinery/pkg/util/framer).
const MaxEventSize = 16 << 20

// Format is how a response body carries watch events.
type Format uint8

const (
	Unknown  Format = 0
	JSON     Format = 1 // a stream of JSON objects (application/json on a watch request)
	Protobuf Format = 2 // application/vnd.kubernetes.protobuf;stream=watch: 4-byte big-endian length + metav1.WatchEvent
	CBOR     Format = 3 // application/cbor-seq (reserved: recognised, not split)
)

func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case Protobuf:
		return "protobuf"
	case CBOR:
		return "cbor"
	}
	return "unknown"
}

// FormatOf picks the event format from a response Content-Type and whether
// the request was a watch. Protobuf and CBOR watch streams say so in their
// media type; a JSON watch response is plain application/json, so watch
// decides. It returns Unknown for anything that is not a watch stream.
func FormatOf(contentType string, watch bool) Format { panic("unimplemented") }

var (
	// ErrTooLarge: an event exceeds MaxEventSize (or the configured limit).
	ErrTooLarge = errors.New("frame: event too large")
	// ErrSyntax: bytes between events, or a frame, that are not valid framing.
	ErrSyntax = errors.New("frame: bad event framing")
	// ErrTruncated: the body ended inside an event.
	ErrTruncated = errors.New("frame: body ended inside an event")
)

// Error is a framing error with its position in the body.
type Error struct {
	Offset int64 // body offset where the problem was found
	Err    error // one of the sentinels above, possibly wrapped with detail
}

func (e *Error) Error() string { panic("unimplemented") }
func (e *Error) Unwrap() error { return e.Err }

// Event is one watch event found in a body.
type Event struct {
	// Offset is the body offset of Pre[0] (of Data[0] when Pre is empty).
	Offset int64
	// Pre holds the bytes between the previous event and Data: whitespace
	// for JSON, the 4-byte length prefix for protobuf.
	Pre []byte
	// Data is the event's exact bytes: JSON from '{' to the matching '}';
	// protobuf the frame payload without the length prefix.
	Data []byte
}

// Options configure a Splitter. The zero value is ready to use.
type Options struct {
	// MaxEventSize bounds one event; 0 means MaxEventSize.
	MaxEventSize int
	// Resync starts the splitter in resync mode: it skips bytes until the
	// first point where an event clearly begins (see Splitter.Resync).
	Resync bool
}

// Splitter splits a body, fed incrementally, into events. It does not rely
// on newlines or on how the body was cut into pieces: one Next input may
// hold several events and one event may span many inputs. Not safe for
// concurrent use.
type Splitter struct{ _ int }

// NewSplitter returns a Splitter for format f (JSON or Protobuf).
func NewSplitter(f Format, opts Options) *Splitter { panic("unimplemented") }

// Next consumes a prefix of p and reports at most one completed event.
// It returns the number of bytes consumed; call again with p[n:] until p is
// empty. When ok is true, ev is an event completed by these bytes; ev's
// slices alias p when the whole event lies in p, else the Splitter's buffer,
// and are valid only until the next call. Partial events are buffered (at
// most the event size limit; a larger event is an *Error wrapping
// ErrTooLarge). Errors are *Error and sticky until Resync.
func (s *Splitter) Next(p []byte) (n int, ev Event, ok bool, err error) { panic("unimplemented") }

// End reports the end of the body. tail is what remains after the last
// event (whitespace, or the bytes of an event the body cut); err is an
// *Error wrapping ErrTruncated if those bytes hold a partial event.
func (s *Splitter) End() (tail []byte, err error) { panic("unimplemented") }

// Resync discards any partial event and the sticky error, and skips input
// until a point where an event clearly begins: for JSON a '{' at the start
// of the body or after a '\n' followed by `"type":"` and one of the five
// event types; for protobuf a length prefix whose payload starts with a
// WatchEvent type field holding one of the five event types. Use it after a
// gap in the body, or for a body captured from its middle.
func (s *Splitter) Resync() { panic("unimplemented") }

// Skipped returns how many bytes resync mode has discarded so far.
func (s *Splitter) Skipped() int64 { panic("unimplemented") }

// Offset returns the body offset of the next byte Next will read.
func (s *Splitter) Offset() int64 { panic("unimplemented") }

// SetOffset sets the body offset of the next byte (after a gap of known size).
func (s *Splitter) SetOffset(off int64) { panic("unimplemented") }

// Meta is what Peek reads from an event without decoding the whole object.
// Fields that are absent are "".
type Meta struct {
	Type            string // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	APIVersion      string
	Kind            string
	Namespace       string
	Name            string
	ResourceVersion string
	// Status fields, set for ERROR events whose object is a metav1.Status.
	Code    int32
	Reason  string
	Message string
	// Annotation k8s.io/initial-events-end is "true" on the bookmark that ends a streaming list.
	InitialEventsEnd bool
}

// Peek reads Meta from an event's exact bytes (Event.Data) in format f.
func Peek(f Format, data []byte) (Meta, error) { panic("unimplemented") }

// Sniff guesses the format of a body captured from its middle (no headers):
// it looks for JSON or protobuf event starts in p.
func Sniff(p []byte) Format { panic("unimplemented") }
