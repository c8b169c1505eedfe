package export

import (
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// The session schema: what `wtrace inspect --json` prints (a Session) and
// the lines of the JSONL export (Meta, Conn, Exchange, the events line of
// formats.EventLine, Anomaly, Summary, each with "record" naming it). The
// conventions are the Kubernetes API's: lowerCamelCase member names
// (acronyms kept whole: "captureSHA256", "connId"), enumerations as
// strings, times as RFC 3339 strings in UTC with nine digits of
// nanoseconds (formats.TimeFormat), members that do not apply omitted.
// docs/SCHEMA.md documents every member. The schema is stable: members may
// be added, never renamed or given another meaning.

// APIVersion names the schema and its version, in the Session document and
// the JSONL export's meta line.
const APIVersion = "wtrace/v1"

// Session is the whole index of a session file: `wtrace inspect --json`.
type Session struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"` // "Session"
	Meta       *Meta    `json:"meta,omitempty"`
	Summary    *Summary `json:"summary,omitempty"`
	// Clean is true when the file has a valid footer, index and Summary.
	Clean bool `json:"clean"`
	// Problems says what opening found wrong: damage, a missing index.
	Problems  []string   `json:"problems,omitempty"`
	Blocks    []Block    `json:"blocks"`
	Conns     []Conn     `json:"conns"`
	Exchanges []Exchange `json:"exchanges"`
	Anomalies []Anomaly  `json:"anomalies"`
}

// Meta describes the session: where and how it was recorded.
type Meta struct {
	Tool          string            `json:"tool,omitempty"`
	Recorded      string            `json:"recorded,omitempty"` // wall clock of the recording machine
	Host          string            `json:"host,omitempty"`
	Source        string            `json:"source,omitempty"` // "pcap", "iface", "proxy", or what a later version writes
	Description   string            `json:"description,omitempty"`
	CaptureFile   string            `json:"captureFile,omitempty"`
	CaptureSHA256 string            `json:"captureSHA256,omitempty"`
	Redaction     string            `json:"redaction,omitempty"` // "default", "headers-only"
	Labels        map[string]string `json:"labels,omitempty"`
}

// Summary is what the recording saw in total (the file's last record).
type Summary struct {
	Time          string `json:"time,omitempty"`
	Packets       int64  `json:"packets"`
	Bytes         int64  `json:"bytes"`
	Conns         int64  `json:"conns"`
	Exchanges     int64  `json:"exchanges"`
	Events        int64  `json:"events"`
	Anomalies     int64  `json:"anomalies"`
	CaptureSHA256 string `json:"captureSHA256,omitempty"`
	Note          string `json:"note,omitempty"`
	CaptureXXH64  string `json:"captureXXH64,omitempty"`
}

// Block locates one data block of the file.
type Block struct {
	Offset  int64  `json:"offset"`
	Size    int64  `json:"size"`
	Records int    `json:"records"`
	First   string `json:"first,omitempty"`
	Last    string `json:"last,omitempty"`
}

// Conn is one connection.
type Conn struct {
	ConnID    uint64   `json:"connId"`
	Conn      string   `json:"conn"` // "client->server", as in the events lines
	Time      string   `json:"time,omitempty"`
	Client    string   `json:"client,omitempty"`
	Server    string   `json:"server,omitempty"`
	Proto     string   `json:"proto,omitempty"` // "http/1.1", "h2", "h2c", "tls" (not decrypted), "unknown"
	Midstream bool     `json:"midstream,omitempty"`
	TLS       *TLS     `json:"tls,omitempty"`
	End       *ConnEnd `json:"end,omitempty"`
	Exchanges []int64  `json:"exchanges"`
	Anomalies int      `json:"anomalies,omitempty"`
}

// TLS is what a connection's TLS handshake said.
type TLS struct {
	Time      string `json:"time,omitempty"`
	Version   string `json:"version"` // "TLS 1.3" (crypto/tls.VersionName)
	Cipher    string `json:"cipher"`  // "TLS_AES_128_GCM_SHA256" (crypto/tls.CipherSuiteName)
	ALPN      string `json:"alpn,omitempty"`
	SNI       string `json:"sni,omitempty"`
	Decrypted bool   `json:"decrypted"`
	Note      string `json:"note,omitempty"`
}

// ConnEnd says how a connection ended.
type ConnEnd struct {
	Time        string `json:"time,omitempty"`
	Reason      string `json:"reason"` // "fin", "rst", "capture-end", "idle", "closed"
	ClientBytes int64  `json:"clientBytes"`
	ServerBytes int64  `json:"serverBytes"`
	LostBytes   int64  `json:"lostBytes,omitempty"`
}

// Exchange is one HTTP exchange: a request and its response.
type Exchange struct {
	Exchange   int64            `json:"exchange"`
	ConnID     uint64           `json:"connId"`
	Conn       string           `json:"conn,omitempty"`
	Stream     uint32           `json:"stream,omitempty"` // HTTP/2 stream
	Request    Request          `json:"request"`
	Response   *Response        `json:"response,omitempty"`
	RequestEnd *End             `json:"requestEnd,omitempty"`
	End        *End             `json:"end,omitempty"`
	Events     int64            `json:"events"`
	EventTypes map[string]int64 `json:"eventTypes,omitempty"`
	BodyBytes  int64            `json:"bodyBytes"`
	Chunks     int64            `json:"chunks"`
	First      string           `json:"first,omitempty"`
	Last       string           `json:"last,omitempty"`
	Anomalies  int              `json:"anomalies,omitempty"`
	Blocks     []int            `json:"blocks,omitempty"`
	// Errors are a watch's ERROR events carrying a Status, and
	// LongestSilence the longest time it sent nothing: what inspect's text
	// says under the exchange. In the Session document (NewSession) only;
	// a JSONL export has the events themselves.
	Errors         []WatchError `json:"errors,omitempty"`
	LongestSilence *Silence     `json:"longestSilence,omitempty"`
}

// Request is an exchange's request head.
type Request struct {
	Time    string   `json:"time,omitempty"`
	Method  string   `json:"method,omitempty"`
	Target  string   `json:"target,omitempty"`
	Proto   string   `json:"proto,omitempty"`
	Headers []Header `json:"headers,omitempty"`
	Missing bool     `json:"missing,omitempty"` // the request was not captured
}

// Response is an exchange's response head.
type Response struct {
	Time     string   `json:"time,omitempty"`
	Proto    string   `json:"proto,omitempty"`
	Status   int      `json:"status,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Headers  []Header `json:"headers,omitempty"`
	Framing  string   `json:"framing"` // "none", "content-length", "chunked", "close", "h2"
	Encoding string   `json:"encoding,omitempty"`
	// EventFormat is "json" or "protobuf" for a watch split into events,
	// "" (absent) for a body stored whole.
	EventFormat string `json:"eventFormat,omitempty"`
	Midstream   bool   `json:"midstream,omitempty"` // the head was not captured
}

// Header is one header field. A redacted one has no value; Length is the
// length of the value that was not stored.
type Header struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Redacted bool   `json:"redacted,omitempty"`
	Length   int    `json:"length,omitempty"`
}

// End says how one direction of an exchange ended.
type End struct {
	Time       string      `json:"time,omitempty"`
	Status     string      `json:"status"` // "complete", "truncated", "gap", "reset", "closed", "error"
	Size       int64       `json:"size"`
	Trailers   []Header    `json:"trailers,omitempty"`
	Note       string      `json:"note,omitempty"`
	Redactions []Redaction `json:"redactions,omitempty"`
}

// Redaction is one line of what redaction replaced, and why.
type Redaction struct {
	Reason string `json:"reason"` // "secret-value", "last-applied", "token", "query-credential", "unparsed"
	Object string `json:"object,omitempty"`
	Fields string `json:"fields,omitempty"`
	Count  int64  `json:"count"`
	Bytes  int64  `json:"bytes"`
}

// Anomaly is something lost, skipped or malformed.
type Anomaly struct {
	ConnID    uint64 `json:"connId"`
	Exchange  *int64 `json:"exchange,omitempty"` // absent when it concerns the whole connection
	Direction string `json:"direction"`          // "client-to-server", "server-to-client"
	Time      string `json:"time,omitempty"`
	Kind      string `json:"kind"` // "gap", "resync", "truncated", "malformed", "no-keys", "limit", "unknown-protocol"
	Offset    int64  `json:"offset"`
	Bytes     int64  `json:"bytes,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Time formats a capture time as the schema does: formats.TimeFormat, ""
// for 0 (unknown).
func Time(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(formats.TimeFormat)
}

// name is an enumeration's String(), or "unknown-N" for a value this
// version does not know (a later version's), so that no value is lost.
func name(s string, v uint8) string {
	if s == "unknown" {
		return fmt.Sprintf("unknown-%d", v)
	}
	return s
}

// Direction names a direction: "client-to-server", "server-to-client".
func Direction(d formats.Direction) string {
	switch d {
	case formats.ClientToServer:
		return "client-to-server"
	case formats.ServerToClient:
		return "server-to-client"
	}
	return fmt.Sprintf("unknown-%d", d)
}

// Framing names a body framing: "none", "content-length", "chunked",
// "close", "h2".
func Framing(f formats.BodyFraming) string {
	switch f {
	case formats.FramingNone:
		return "none"
	case formats.FramingLength:
		return "content-length"
	case formats.FramingChunked:
		return "chunked"
	case formats.FramingClose:
		return "close"
	case formats.FramingH2:
		return "h2"
	}
	return fmt.Sprintf("unknown-%d", f)
}

// NewSession returns the Session document of f: its index, the problems
// found opening it, and the notes of each watch (Exchange.Errors and
// LongestSilence), read from its events in one pass over the file.
func NewSession(f *formats.File) *Session {
	s := SessionOf(f.Index())
	s.Clean = f.Clean()
	for _, p := range f.Problems() {
		s.Problems = append(s.Problems, p.Error())
	}
	notes, err := readWatchNotes(f)
	if err != nil {
		s.Problems = append(s.Problems, "reading the watches' events: "+err.Error())
	}
	for i := range s.Exchanges {
		if n := notes[s.Exchanges[i].Exchange]; n != nil {
			s.Exchanges[i].Errors = n.errors
			s.Exchanges[i].LongestSilence = n.silence()
		}
	}
	return s
}

// SessionOf returns the Session document of an index (Clean false, no
// Problems: what the index alone cannot say).
func SessionOf(idx *formats.Index) *Session {
	s := &Session{
		APIVersion: APIVersion,
		Kind:       "Session",
		Meta:       NewMeta(idx.Meta),
		Summary:    NewSummary(idx.Summary),
		Blocks:     make([]Block, len(idx.Blocks)),
		Conns:      make([]Conn, len(idx.Conns)),
		Exchanges:  make([]Exchange, len(idx.Exchanges)),
		Anomalies:  make([]Anomaly, len(idx.Anomalies)),
	}
	for i, b := range idx.Blocks {
		s.Blocks[i] = Block{Offset: b.Offset, Size: b.Size, Records: b.Records, First: Time(b.First), Last: Time(b.Last)}
	}
	names := ConnNames(idx)
	for i := range idx.Conns {
		s.Conns[i] = NewConn(&idx.Conns[i])
	}
	for i := range idx.Exchanges {
		s.Exchanges[i] = NewExchange(&idx.Exchanges[i], names)
	}
	for i := range idx.Anomalies {
		s.Anomalies[i] = NewAnomaly(&idx.Anomalies[i])
	}
	return s
}

// ConnNames maps each connection ID of idx to its "client->server" name,
// as the events lines name connections.
func ConnNames(idx *formats.Index) map[uint64]string {
	m := make(map[uint64]string, len(idx.Conns))
	for _, c := range idx.Conns {
		m[c.Conn.ID] = connName(&c.Conn)
	}
	return m
}

func connName(c *formats.Conn) string { return c.Client + "->" + c.Server }

// NewMeta converts a Meta record (nil for nil).
func NewMeta(m *formats.Meta) *Meta {
	if m == nil {
		return nil
	}
	return &Meta{
		Tool:          m.Tool,
		Recorded:      Time(m.Recorded),
		Host:          m.Host,
		Source:        m.Source,
		Description:   m.Description,
		CaptureFile:   m.CaptureFile,
		CaptureSHA256: m.CaptureSHA256,
		Redaction:     m.Redaction,
		Labels:        maps.Clone(m.Labels),
	}
}

// NewSummary converts a Summary record (nil for nil).
func NewSummary(s *formats.Summary) *Summary {
	if s == nil {
		return nil
	}
	return &Summary{
		Time:          Time(s.Time),
		Packets:       s.Packets,
		Bytes:         s.Bytes,
		Conns:         s.Conns,
		Exchanges:     s.Exchanges,
		Events:        s.Events,
		Anomalies:     s.Anomalies,
		CaptureSHA256: s.CaptureSHA256,
		Note:          s.Note,
		CaptureXXH64:  s.CaptureXXH64,
	}
}

// NewConn converts what the index says of a connection.
func NewConn(c *formats.ConnInfo) Conn {
	out := Conn{
		ConnID:    c.Conn.ID,
		Conn:      connName(&c.Conn),
		Time:      Time(c.Conn.Time),
		Client:    c.Conn.Client,
		Server:    c.Conn.Server,
		Proto:     c.Conn.Proto,
		Midstream: c.Conn.Midstream,
		Exchanges: slices.Clone(c.Exchanges),
		Anomalies: c.Anomalies,
	}
	if out.Exchanges == nil {
		out.Exchanges = []int64{}
	}
	if t := c.TLS; t != nil {
		out.TLS = &TLS{
			Time:      Time(t.Time),
			Version:   tls.VersionName(t.Version),
			Cipher:    tls.CipherSuiteName(t.Cipher),
			ALPN:      t.ALPN,
			SNI:       t.SNI,
			Decrypted: t.Decrypted,
			Note:      t.Note,
		}
	}
	if e := c.End; e != nil {
		out.End = &ConnEnd{
			Time:        Time(e.Time),
			Reason:      name(e.Reason.String(), uint8(e.Reason)),
			ClientBytes: e.ClientBytes,
			ServerBytes: e.ServerBytes,
			LostBytes:   e.LostBytes,
		}
	}
	return out
}

// NewExchange converts what the index says of an exchange; conns names the
// connections (ConnNames).
func NewExchange(x *formats.ExchangeInfo, conns map[uint64]string) Exchange {
	r := &x.Request
	out := Exchange{
		Exchange: r.Exchange,
		ConnID:   r.Conn,
		Conn:     conns[r.Conn],
		Stream:   r.Stream,
		Request: Request{
			Time:    Time(r.Time),
			Method:  r.Method,
			Target:  r.Target,
			Proto:   r.Proto,
			Headers: headers(r.Header),
			Missing: r.Missing,
		},
		RequestEnd: newEnd(x.RequestEnd),
		End:        newEnd(x.End),
		Events:     x.Frames,
		EventTypes: maps.Clone(x.FrameTypes),
		BodyBytes:  x.BodyBytes,
		Chunks:     x.Chunks,
		First:      Time(x.First),
		Last:       Time(x.Last),
		Anomalies:  x.Anomalies,
		Blocks:     slices.Clone(x.Blocks),
	}
	if p := x.Response; p != nil {
		out.Response = &Response{
			Time:      Time(p.Time),
			Proto:     p.Proto,
			Status:    p.Status,
			Reason:    p.Reason,
			Headers:   headers(p.Header),
			Framing:   Framing(p.Framing),
			Encoding:  p.Encoding,
			Midstream: p.Midstream,
		}
		if p.Events != 0 {
			out.Response.EventFormat = p.Events.String()
		}
	}
	return out
}

func newEnd(e *formats.End) *End {
	if e == nil {
		return nil
	}
	out := &End{
		Time:     Time(e.Time),
		Status:   name(e.Status.String(), uint8(e.Status)),
		Size:     e.Size,
		Trailers: headers(e.Trailer),
		Note:     e.Note,
	}
	for _, r := range e.Redactions {
		out.Redactions = append(out.Redactions, Redaction{
			Reason: name(r.Reason.String(), uint8(r.Reason)),
			Object: r.Object,
			Fields: r.Fields,
			Count:  r.Count,
			Bytes:  r.Bytes,
		})
	}
	return out
}

func headers(hs []formats.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Name: h.Name, Value: h.Value, Redacted: h.Redacted}
		if h.Redacted {
			out[i].Length = h.Len
		}
	}
	return out
}

// NewAnomaly converts an Anomaly record.
func NewAnomaly(a *formats.Anomaly) Anomaly {
	out := Anomaly{
		ConnID:    a.Conn,
		Direction: Direction(a.Dir),
		Time:      Time(a.Time),
		Kind:      name(a.Kind.String(), uint8(a.Kind)),
		Offset:    a.Offset,
		Bytes:     a.Bytes,
		Message:   a.Message,
	}
	if a.Exchange != formats.NoExchange {
		x := a.Exchange
		out.Exchange = &x
	}
	return out
}
