package replay

import (
	"net/http"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Out receives a replay's traffic, for a recording of the run
// (Options.Out): for each request, Conn is called when it arrives; the
// OutConn then gets the request's bytes (ClientToServer), the response's
// as they are sent (ServerToClient), and Close when the answer is over.
// Every exchange goes out as HTTP/1.1 (request line, header fields, body
// with Content-Length; response head and body, chunked when it has no
// Content-Length, one chunk per write), on a connection of its own, from
// the client's address to the server's, whatever protocol the client
// spoke (HTTP/2 streams are told apart by their connection).
//
// package replay/record connects it to a session file (capture.Tee and
// formats.FileSink, as the recording proxy does): the bytes are parsed,
// split into events and redacted there, as any recording's.
//
// Conn and the OutConn's methods are called from the handler goroutine of
// the request; an Out must be safe for concurrent use by many of them.
// Data may keep p only during the call. An Out that blocks slows down the
// replay's answers.
type Out interface {
	Conn(client, server string) OutConn
}

// OutConn is one exchange of an Out (see Out). *capture.TeeConn is one.
// An OutConn that also has a method Note(string) is told how the request
// is answered (formats.ReplayAnswer: "replay answer: recorded exchange
// 12"), after the request's bytes and before the answer's: the run file
// keeps it as the note of the response's End.

type OutConn interface {
	Data(dir formats.Direction, p []byte)
	Close(reason formats.ConnEndReason)
}

// Request is one request a client made to the replay, and its answer.
// Server.Requests returns them; their slices must not be modified.
type Request struct {
	Method string
	Target string      // request-target as sent ("/api/v1/namespaces/demo/configmaps?watch=1")
	Header http.Header // as received
	// Body is the request body of a write (POST, PUT, PATCH, DELETE), nil
	// for other requests.
	Body []byte
	// Arrival is when the request arrived and Done when its answer ended,
	// on the server's clock.
	Arrival, Done time.Time
	// Status is the status code of the answer.
	Status int
	// How says how it was answered: "recorded", "resumed", "synth-create",
	// … (the "how" of the log lines, see the package doc).
	How string
	// Exchange is the recorded exchange served, or -1.
	Exchange int64
	// Transcoded says why the answer is not recorded bytes as recorded
	// ("" when it is, or when it was synthesized): the encoding changed
	// ("json→protobuf", "Table"), resourceVersions were rewritten ("rv"),
	// the clients' writes were interleaved ("writes").
	Transcoded string
	// ContentType and Response are the Content-Type and body of the answer
	// to a write (a Status for an error), nil for other requests.
	ContentType string
	Response    []byte

	seq int64 // arrival order
}

// IsWrite reports whether the request was a write (POST, PUT, PATCH,
// DELETE).
func (r *Request) IsWrite() bool { return apipath.IsWrite(r.Method) }
