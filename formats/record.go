package formats

import "github.com/wtrace/wtrace/frame"

// The session model. A session file is a sequence of records; each record
// states one fact as it became known on the wire. Records of different
// connections and exchanges interleave in the order the recorder learned
// them (capture-time order, give or take reassembly buffering). Readers group
// them by Conn and Exchange.
//
// All times are int64 nanoseconds since the Unix epoch, taken from the
// capture (packet timestamps), never from the clock of the recording machine
// (the proxy source, which has no packets, uses the time it read the bytes).

// NoExchange is the Exchange value of a record that belongs to no exchange
// (an Anomaly about a whole connection).
const NoExchange int64 = -1

// Type identifies a record's kind on disk. Values are part of the file
// format (see FORMAT.md) and never change meaning.
type Type uint8

const (
	TypeMeta     Type = 1  // *Meta: first record of every file
	TypeConn     Type = 2  // *Conn: a TCP connection (or proxied client connection) appeared
	TypeTLS      Type = 3  // *TLS: what the TLS handshake of a connection said
	TypeRequest  Type = 4  // *Request: an exchange begins
	TypeResponse Type = 5  // *Response: the response head of an exchange
	TypeFrame    Type = 6  // *Frame: one watch event
	TypeBody     Type = 7  // *Body: a piece of an opaque (non-event) body
	TypeChunk    Type = 8  // *Chunk: a chunk boundary (HTTP/1.1 chunk or HTTP/2 DATA frame)
	TypeEnd      Type = 9  // *End: one direction of an exchange ended
	TypeConnEnd  Type = 10 // *ConnEnd: a connection ended
	TypeAnomaly  Type = 11 // *Anomaly: something was lost, skipped or malformed
	TypeSummary  Type = 12 // *Summary: the last record, written once, just before the index
)

func (t Type) String() string {
	switch t {
	case TypeMeta:
		return "meta"
	case TypeConn:
		return "conn"
	case TypeTLS:
		return "tls"
	case TypeRequest:
		return "request"
	case TypeResponse:
		return "response"
	case TypeFrame:
		return "frame"
	case TypeBody:
		return "body"
	case TypeChunk:
		return "chunk"
	case TypeEnd:
		return "end"
	case TypeConnEnd:
		return "conn-end"
	case TypeAnomaly:
		return "anomaly"
	case TypeSummary:
		return "summary"
	}
	return "unknown"
}

// Record is one of the pointer types listed with the Type constants. Records
// returned by a Reader are owned by the caller (they do not alias the
// reader's buffers).
type Record interface {
	Type() Type
}

// Meta describes the whole session. It is the first record of a file.
type Meta struct {
	Tool          string            // "wtrace v0.1.0"
	Recorded      int64             // wall-clock time the recording started (informational only)
	Host          string            // host name of the recording machine
	Source        string            // SourcePcap, SourceIface, SourceProxy
	Description   string            // human description: "pcap capture.pcap", "iface lo port 8001", "proxy → https://127.0.0.1:6443"
	CaptureFile   string            // base name of the capture file, if any
	CaptureSHA256 string            // hex sha256 of the capture file, if known at start (else in Summary)
	Redaction     string            // RedactionDefault or RedactionHeadersOnly
	Labels        map[string]string // free-form key/value pairs (stable order on disk: sorted by key)
}

// Values of Meta.Source: where the session was recorded from.
const (
	SourcePcap  = "pcap"  // a packet capture file
	SourceIface = "iface" // a live capture on a network interface
	SourceProxy = "proxy" // the recording proxy
	// SourceReplay: what the clients of a replay sent and the answers they
	// got (wtrace replay --out).
	SourceReplay = "replay"
)

// Values of Meta.Redaction: what was redacted before the records were
// written.
const (
	// RedactionDefault: credentials in headers, and Secret objects' values.
	RedactionDefault = "default"
	// RedactionHeadersOnly: credentials in headers only; Secret values were
	// kept (wtrace record --keep-secrets).
	RedactionHeadersOnly = "headers-only"
)

// Direction names one direction of a connection or exchange.
type Direction uint8

const (
	ClientToServer Direction = 0 // the request direction
	ServerToClient Direction = 1 // the response direction
)

func (d Direction) String() string {
	if d == ClientToServer {
		return "client→server"
	}
	return "server→client"
}

// Conn announces a connection. Client and Server are "ip:port" (IPv6 as
// "[::1]:8080"). Conn IDs are unique within a session, numbered from 0.
type Conn struct {
	ID        uint64
	Time      int64  // first packet (or accept time for the proxy)
	Client    string // who sent the requests
	Server    string // who answered
	Proto     string // "http/1.1", "h2", "h2c", "tls" (not decrypted), "unknown"
	Midstream bool   // the connection began before the capture (no SYN seen / no request head seen)
}

// TLS records what a connection's TLS handshake said and whether wtrace could
// decrypt it.
type TLS struct {
	Conn      uint64
	Time      int64
	Version   uint16 // 0x0303 TLS 1.2, 0x0304 TLS 1.3
	Cipher    uint16 // IANA cipher suite value
	ALPN      string // negotiated protocol ("h2", "http/1.1"), "" if none/unknown
	SNI       string // server name from the ClientHello
	Decrypted bool
	Note      string // why not decrypted ("no key for client random 1a2b…"), or ""
}

// Header is one header field as sent. A redacted header has Value "" and
// Len set to the length of the value that was not stored.
type Header struct {
	Name     string
	Value    string
	Redacted bool
	Len      int // original value length when Redacted
}

// Request begins an exchange. Exchange IDs are unique within a session,
// numbered from 0 in the order exchanges began. Missing is true when the
// response was seen but its request was not (a capture that began mid-stream);
// then Method, Target and Proto are empty.
type Request struct {
	Exchange int64
	Conn     uint64
	Stream   uint32 // HTTP/2 stream ID, 0 for HTTP/1.1
	Time     int64  // capture time of the packet that completed the request head
	Method   string
	Target   string // request-target as sent ("/api/v1/pods?watch=true"); for HTTP/2 the :path
	Proto    string // "HTTP/1.1", "HTTP/2.0"
	Header   []Header
	Missing  bool
}

// BodyFraming says how a response body was delimited on the wire.
type BodyFraming uint8

const (
	FramingNone    BodyFraming = 0 // no body (HEAD, 1xx, 204, 304) or unknown
	FramingLength  BodyFraming = 1 // Content-Length
	FramingChunked BodyFraming = 2 // Transfer-Encoding: chunked
	FramingClose   BodyFraming = 3 // until the connection closed
	FramingH2      BodyFraming = 4 // HTTP/2 DATA frames
)

// Response is the response head of an exchange.
type Response struct {
	Exchange int64
	Time     int64 // capture time of the packet that completed the head
	Proto    string
	Status   int
	Reason   string
	Header   []Header
	Framing  BodyFraming
	Encoding string // Content-Encoding as sent ("" or "gzip"); Body records keep it, Frames are decoded
	// Events is how the body was split into watch events: frame.JSON or
	// frame.Protobuf (the body is in Frame records), or frame.Unknown, not
	// a watch (the body is in Body records). Stored as frame.Format's value.
	Events    frame.Format
	Midstream bool // the head was not captured: status and headers are unknown (Status 0)
}

// Frame is one watch event. Data is the event's exact bytes: for JSON the
// object text from '{' to its matching '}'; for protobuf the frame payload
// without its 4-byte length prefix. Pre holds the body bytes between the
// previous event's end and Data (JSON: usually "\n", protobuf: the 4-byte
// length prefix), so that concatenating Pre+Data of every frame, plus the
// End's Tail, gives back the (content-decoded) body exactly, from the first
// captured event on.
type Frame struct {
	Exchange int64
	Seq      int64 // event number within the exchange, from 0
	Time     int64 // capture time of the packet that completed the event
	Offset   int64 // body offset of Pre's first byte
	Pre      []byte
	Data     []byte
	// Redacted lists the original lengths of the values redaction replaced
	// in Data (Secret data/stringData); empty when nothing was redacted.
	Redacted []int
}

// Body is a piece of an opaque body (or of a request body). Pieces of one
// exchange and direction are contiguous and in order: Offset is the body
// offset of Data[0]. Response bodies are stored as sent apart from transfer
// framing: de-chunked, but with Content-Encoding (gzip) kept.
type Body struct {
	Exchange int64
	Dir      Direction
	Time     int64 // capture time of the packet that carried the last byte of Data
	Offset   int64
	Data     []byte
}

// Chunk records one transfer chunk of a response body as it was framed on the
// wire: an HTTP/1.1 chunk, or an HTTP/2 DATA frame. Offset and Size are in
// body bytes (after de-chunking, before content decoding). Time is the
// capture time of the chunk's last byte. Ext holds chunk extensions as sent
// (without the leading ';').
type Chunk struct {
	Exchange int64
	Time     int64
	Offset   int64
	Size     int64
	Ext      string
}

// EndStatus says how one direction of an exchange ended.
type EndStatus uint8

const (
	EndComplete  EndStatus = 0 // body complete per its framing (last chunk, length reached, END_STREAM)
	EndTruncated EndStatus = 1 // the capture ended first
	EndGap       EndStatus = 2 // bytes were lost inside the body (capture loss); what follows was salvaged
	EndReset     EndStatus = 3 // the connection was reset (RST) or the HTTP/2 stream was (RST_STREAM)
	EndClosed    EndStatus = 4 // the connection closed (FIN) before the framing said the body was complete
	EndError     EndStatus = 5 // the bytes could not be parsed; Note says why
)

func (s EndStatus) String() string {
	switch s {
	case EndComplete:
		return "complete"
	case EndTruncated:
		return "truncated"
	case EndGap:
		return "gap"
	case EndReset:
		return "reset"
	case EndClosed:
		return "closed"
	case EndError:
		return "error"
	}
	return "unknown"
}

// End closes one direction of an exchange. Size is the number of body bytes
// seen (de-chunked, before content decoding; for an event body, content
// decoded). Tail holds body bytes after the last Frame that belong to no
// event (trailing whitespace, or the partial event a truncated capture cut).
type End struct {
	Exchange int64
	Dir      Direction
	Time     int64
	Status   EndStatus
	Size     int64
	Tail     []byte
	Trailer  []Header
	Note     string
	// Redactions says what redaction replaced in this direction of the
	// exchange (its body, events, tail and, for the request direction, its
	// request-target), and why. Empty when nothing was replaced. Written
	// since wtrace 0.2; older files read back with none.
	Redactions []Redaction
	// LastExt holds the extensions of an HTTP/1.1 chunked body's
	// last-chunk ("0;name=value") as sent, without the leading ';' (the
	// other chunks' are in their Chunk records). Written since wtrace
	// 0.3; older files read back with none.
	LastExt string
}

// ReplayAnswer starts the item of a response End's Note that says how a
// replay answered the request, in a replay's run file (SourceReplay):
// "replay answer: recorded exchange 12 transcoded rv" (see FORMAT.md §9).
const ReplayAnswer = "replay answer: "

// RedactReason says why bytes were replaced before they were stored.
// Values are part of the file format and never change meaning.
type RedactReason uint8

const (
	RedactSecretValue RedactReason = 1 // a Secret's data / stringData value, or a value of a patch sent to a Secret endpoint
	RedactLastApplied RedactReason = 2 // the kubectl last-applied-configuration annotation of a Secret
	RedactToken       RedactReason = 3 // TokenRequest status.token, TokenReview spec.token
	RedactQuery       RedactReason = 4 // a credential in the request-target's query or userinfo
	RedactUnparsed    RedactReason = 5 // bytes that may hold a credential but could not be parsed: replaced whole (fail closed)
)

func (r RedactReason) String() string {
	switch r {
	case RedactSecretValue:
		return "secret-value"
	case RedactLastApplied:
		return "last-applied"
	case RedactToken:
		return "token"
	case RedactQuery:
		return "query-credential"
	case RedactUnparsed:
		return "unparsed"
	}
	return "unknown"
}

// Redaction is one line of what redaction replaced in a direction of an
// exchange: Count values (or regions) holding Bytes bytes in all, of one
// Object, for one Reason. Object names what held them ("Secret demo/db",
// "patch to a Secret", "" when unknown); Fields lists where ("data.password,
// stringData.token", clipped), or for RedactUnparsed why the bytes could
// not be parsed.
type Redaction struct {
	Reason RedactReason
	Object string
	Fields string
	Count  int64
	Bytes  int64
}

// ConnEndReason says how a connection ended.
type ConnEndReason uint8

const (
	ConnFIN        ConnEndReason = 0 // both sides (or one side) sent FIN
	ConnRST        ConnEndReason = 1
	ConnCaptureEnd ConnEndReason = 2 // still open when the capture ended
	ConnIdle       ConnEndReason = 3 // dropped by the recorder after an idle timeout
	ConnClosed     ConnEndReason = 4 // proxy: closed by a peer (no TCP detail)
)

func (r ConnEndReason) String() string {
	switch r {
	case ConnFIN:
		return "fin"
	case ConnRST:
		return "rst"
	case ConnCaptureEnd:
		return "capture-end"
	case ConnIdle:
		return "idle"
	case ConnClosed:
		return "closed"
	}
	return "unknown"
}

// ConnEnd closes a connection.
type ConnEnd struct {
	Conn        uint64
	Time        int64 // last packet
	Reason      ConnEndReason
	ClientBytes int64 // payload bytes client→server
	ServerBytes int64 // payload bytes server→client
	LostBytes   int64 // payload bytes never captured (gaps), both directions
}

// AnomalyKind classifies an Anomaly.
type AnomalyKind uint8

const (
	AnomalyGap       AnomalyKind = 1 // bytes missing from a TCP stream (capture loss)
	AnomalyResync    AnomalyKind = 2 // parsing resumed after skipping bytes (midstream start, after a gap)
	AnomalyTruncated AnomalyKind = 3 // the capture ended inside a message or event
	AnomalyMalformed AnomalyKind = 4 // bytes that violate HTTP, chunked or event framing
	AnomalyNoKeys    AnomalyKind = 5 // TLS traffic that could not be decrypted
	AnomalyLimit     AnomalyKind = 6 // a configured limit was hit (buffered bytes, streams, event size)
	AnomalyUnknown   AnomalyKind = 7 // traffic wtrace does not understand (not HTTP), kept out of the session
)

func (k AnomalyKind) String() string {
	switch k {
	case AnomalyGap:
		return "gap"
	case AnomalyResync:
		return "resync"
	case AnomalyTruncated:
		return "truncated"
	case AnomalyMalformed:
		return "malformed"
	case AnomalyNoKeys:
		return "no-keys"
	case AnomalyLimit:
		return "limit"
	case AnomalyUnknown:
		return "unknown-protocol"
	}
	return "unknown"
}

// Anomaly records where something was lost, skipped or malformed. Offset is
// the byte offset in the direction's TCP stream (or, with Exchange set, in
// the exchange's body) where it happened; Bytes how many bytes it affected
// (0 when unknown).
type Anomaly struct {
	Conn     uint64
	Exchange int64 // NoExchange when it concerns the connection as a whole
	Dir      Direction
	Time     int64
	Kind     AnomalyKind
	Offset   int64
	Bytes    int64
	Message  string
}

// Summary is the last record of a file, written just before Writer.Close
// writes the index: what the recording saw in total (the recorder writes
// it: formats.FileSink). A file without one was not closed cleanly.
type Summary struct {
	Time          int64 // capture time of the last packet
	Packets       int64
	Bytes         int64 // capture bytes read
	Conns         int64
	Exchanges     int64
	Events        int64
	Anomalies     int64
	CaptureSHA256 string // hex, when asked for and computed while reading
	Note          string
	// CaptureXXH64 is the hex XXH64 of the capture file (16 digits, what
	// xxhsum prints), when computed while reading. Absent (empty) in
	// files written before wtrace 0.4.
	CaptureXXH64 string
}

func (*Meta) Type() Type     { return TypeMeta }
func (*Conn) Type() Type     { return TypeConn }
func (*TLS) Type() Type      { return TypeTLS }
func (*Request) Type() Type  { return TypeRequest }
func (*Response) Type() Type { return TypeResponse }
func (*Frame) Type() Type    { return TypeFrame }
func (*Body) Type() Type     { return TypeBody }
func (*Chunk) Type() Type    { return TypeChunk }
func (*End) Type() Type      { return TypeEnd }
func (*ConnEnd) Type() Type  { return TypeConnEnd }
func (*Anomaly) Type() Type  { return TypeAnomaly }
func (*Summary) Type() Type  { return TypeSummary }
