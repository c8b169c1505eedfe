package frame

import (
	"errors"
	"fmt"
	"strings"
)

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

var (
	// ErrTooLarge: an event exceeds MaxEventSize (or the configured limit).
	ErrTooLarge = errors.New("frame: event too large")
	// ErrSyntax: bytes between events, or a frame, that are not valid framing.
	ErrSyntax = errors.New("frame: bad event framing")
	// ErrTruncated: the body ended inside an event.
	ErrTruncated = errors.New("frame: body ended inside an event")
	// ErrInvalid: an event or list whose content Peek, EventObject or
	// ListItems cannot read (framing may be fine; the bytes inside are not a
	// watch event or a list).
	ErrInvalid = errors.New("frame: malformed event")
)

// Error is a framing error with its position in the body.
type Error struct {
	Offset int64 // body offset where the problem was found
	Err    error // one of the sentinels above, possibly wrapped with detail
}

func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = strings.TrimPrefix(e.Err.Error(), "frame: ")
	}
	return fmt.Sprintf("frame: offset %d: %s", e.Offset, msg)
}

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
	// MaxEventSize bounds one event's Data; 0 (or less) means MaxEventSize.
	MaxEventSize int
	// Resync starts the splitter in resync mode: it skips bytes until the
	// first point where an event clearly begins (see Splitter.Resync). The
	// first byte given to Next counts as a line start, so a body captured
	// from its middle that happens to begin with an event keeps it.
	Resync bool
}

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

// FormatOf picks the event format from a response Content-Type and whether
// the request was a watch. Protobuf and CBOR watch streams say so in their
// media type; a JSON watch response is plain application/json, so watch
// decides. It returns Unknown for anything that is not a watch stream.
//
// The media type is parsed leniently: case-insensitive, parameters in any
// order, optional whitespace and quotes. Rules:
//
//	application/json;stream=watch              JSON
//	application/json (watch)                   JSON
//	application/vnd.kubernetes.protobuf;stream=watch   Protobuf (watch or not)
//	application/vnd.kubernetes.protobuf (watch)        Protobuf
//	application/cbor-seq                       CBOR
//	application/cbor;stream=watch, or (watch)  CBOR
//	anything else                              Unknown
func FormatOf(contentType string, watch bool) Format {
	mt, stream := parseMediaType(contentType)
	streamWatch := stream == "watch"
	switch mt {
	case "application/json":
		if watch || streamWatch {
			return JSON
		}
	case "application/vnd.kubernetes.protobuf":
		if watch || streamWatch {
			return Protobuf
		}
	case "application/cbor-seq":
		return CBOR
	case "application/cbor":
		if watch || streamWatch {
			return CBOR
		}
	}
	return Unknown
}

// ResponseFormat is the event format of a response body, decided by the
// response as kube-apiserver writes a watch (k8s.io/apiserver
// pkg/endpoints/handlers/watch.go: serveWatchHandler picks the stream
// serializer's media type, WatchServer.HandleHTTP sets it and writes 200
// OK before the first event): status is the response's status code,
// contentType its Content-Type, watch whether the request asked for a
// watch (false when it was not captured). It returns Unknown — one opaque
// body — for anything else: an error answer (a Status, whatever its
// media type: 404 to a watch of a resource the server does not serve,
// 403, 410, 500), an interim or redirect status, a media type no watch is
// written in. Rules, for status 200 only:
//
//	application/json, to a watch request         JSON (the apiserver adds no parameter)
//	application/json;stream=watch                JSON
//	application/vnd.kubernetes.protobuf;stream=watch   Protobuf (never without the parameter)
//	application/cbor-seq                         CBOR (what the apiserver sends a CBOR watch)
//	application/cbor;stream=watch                CBOR
//
// The media type is parsed as FormatOf parses it.
func ResponseFormat(status int, contentType string, watch bool) Format {
	if status != 200 {
		return Unknown
	}
	mt, stream := parseMediaType(contentType)
	switch mt {
	case "application/json":
		if watch || stream == "watch" {
			return JSON
		}
	case "application/vnd.kubernetes.protobuf":
		if stream == "watch" {
			return Protobuf
		}
	case "application/cbor-seq":
		return CBOR
	case "application/cbor":
		if stream == "watch" {
			return CBOR
		}
	}
	return Unknown
}

// parseMediaType returns the lower-cased media type and the lower-cased
// value of its "stream" parameter (RFC 9110 section 8.3.1: type, subtype
// and parameter names are case-insensitive). It never fails: malformed
// parameters are ignored.
func parseMediaType(ct string) (mediaType, stream string) {
	mt, params, _ := strings.Cut(ct, ";")
	mediaType = strings.ToLower(strings.TrimSpace(mt))
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "stream") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		stream = strings.ToLower(v)
	}
	return mediaType, stream
}
