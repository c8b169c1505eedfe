package formats

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// Event is one watch event of a session with what the session says about
// it: the fields of the events line format (EventLine).
type Event struct {
	Conn     string // the connection, "client->server" ("" if no Conn record announced it)
	Exchange int64
	Request  string // method and request-target as sent; "" when the request was not captured
	Seq      int64  // event number within the exchange, from 0
	Time     int64  // capture time of the packet that completed the event
	Format   frame.Format
	// Meta is what frame.Peek reads from Data; zero when it cannot read
	// the event.
	Meta     frame.Meta
	Data     []byte // the event's exact bytes; the caller's
	Redacted []int  // lengths of the values redaction replaced in Data
}

// Exchange returns what the index says about exchange id, or nil if the
// file holds no record of it.
func (f *File) Exchange(id int64) *ExchangeInfo {
	pos, ok := f.exPos[id]
	if !ok {
		return nil
	}
	return &f.idx.Exchanges[pos]
}

// Events returns an iterator over the watch events of the session, in
// file order (session order). Damage is yielded in its place, as
// Scanner.All yields it: a *DamageError, after which the iteration goes on
// (unless ReaderOptions.StopOnDamage); any other error ends it.
func (f *File) Events() iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		for r, err := range f.Records().All() {
			if err != nil {
				if !yield(nil, err) {
					return
				}
				continue
			}
			if fr, ok := r.(*Frame); ok && !yield(f.Event(fr), nil) {
				return
			}
		}
	}
}

// Event returns what the session says of the watch event fr, one of its
// Frames: its connection and request (from the index), its format, and
// what frame.Peek reads from it. The Event shares fr's Data.
func (f *File) Event(fr *Frame) *Event {
	ev := &Event{Exchange: fr.Exchange, Seq: fr.Seq, Time: fr.Time, Data: fr.Data, Redacted: fr.Redacted}
	if x := f.Exchange(fr.Exchange); x != nil {
		ev.Conn = f.connName(x.Request.Conn)
		if !x.Request.Missing {
			ev.Request = x.Request.Method + " " + x.Request.Target
		}
		if x.Response != nil {
			ev.Format = x.Response.Events
		}
	}
	ev.Meta, _ = frame.Peek(ev.Format, fr.Data)
	return ev
}

// connName names connection id as the events lines do: "client->server".
func (f *File) connName(id uint64) string {
	f.namesOnce.Do(func() {
		f.names = make(map[uint64]string, len(f.idx.Conns))
		for _, c := range f.idx.Conns {
			f.names[c.Conn.ID] = c.Conn.Client + "->" + c.Conn.Server
		}
	})
	return f.names[id]
}

// EventFilter selects events by what Peek read from them. Each non-empty
// list must hold the event's value (compared case-insensitively); the zero
// value selects every event.
type EventFilter struct {
	Types, Kinds, Namespaces, Names []string
}

// Match reports whether m passes the filter.
func (f EventFilter) Match(m frame.Meta) bool {
	return matchAny(f.Types, m.Type) && matchAny(f.Kinds, m.Kind) &&
		matchAny(f.Namespaces, m.Namespace) && matchAny(f.Names, m.Name)
}

func matchAny(values []string, v string) bool {
	if len(values) == 0 {
		return true
	}
	for _, f := range values {
		if strings.EqualFold(f, v) {
			return true
		}
	}
	return false
}

// EventLine is one line of the events format, the output of `wtrace
// events`: a stable interface (see the field list in the command's help).
// Fields that do not apply are omitted; fields may be added, never renamed.
type EventLine struct {
	Conn            string          `json:"conn"`
	Exchange        int64           `json:"exchange"`
	Request         string          `json:"request,omitempty"`
	Seq             int64           `json:"seq"`
	Time            string          `json:"time"`
	Type            string          `json:"type,omitempty"`
	APIVersion      string          `json:"apiVersion,omitempty"`
	Kind            string          `json:"kind,omitempty"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Code            int32           `json:"code,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Message         string          `json:"message,omitempty"`
	Size            int             `json:"size"`
	SHA256          string          `json:"sha256"`
	Format          string          `json:"format"`
	Redacted        int             `json:"redacted,omitempty"`
	Event           json.RawMessage `json:"event,omitempty"`
	EventBase64     string          `json:"event_base64,omitempty"`
}

// TimeFormat is how the events format writes times: RFC 3339 in UTC with
// all nine digits of nanoseconds, so that times sort as strings.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Line returns e as a line of the events format. With data, the line
// carries the event itself: "event" for a JSON event, "event_base64" for
// anything else.
func (e *Event) Line(data bool) EventLine {
	sum := sha256.Sum256(e.Data)
	m := e.Meta
	l := EventLine{
		Conn:            e.Conn,
		Exchange:        e.Exchange,
		Request:         e.Request,
		Seq:             e.Seq,
		Time:            time.Unix(0, e.Time).UTC().Format(TimeFormat),
		Type:            m.Type,
		APIVersion:      m.APIVersion,
		Kind:            m.Kind,
		Namespace:       m.Namespace,
		Name:            m.Name,
		ResourceVersion: m.ResourceVersion,
		Code:            m.Code,
		Reason:          m.Reason,
		Message:         m.Message,
		Size:            len(e.Data),
		SHA256:          hex.EncodeToString(sum[:]),
		Format:          e.Format.String(),
		Redacted:        len(e.Redacted),
	}
	if data {
		if e.Format == frame.JSON && json.Valid(e.Data) {
			l.Event = e.Data
		} else {
			l.EventBase64 = base64.StdEncoding.EncodeToString(e.Data)
		}
	}
	return l
}

// EventEncoder writes events as lines of the events format. It is not
// safe for concurrent use.
type EventEncoder struct {
	enc  *json.Encoder
	data bool
}

// NewEventEncoder returns an encoder writing to w, one line per event
// (with the event itself if data, see Event.Line).
func NewEventEncoder(w io.Writer, data bool) *EventEncoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &EventEncoder{enc: enc, data: data}
}

// Encode writes e's line.
func (e *EventEncoder) Encode(ev *Event) error {
	l := ev.Line(e.data)
	return e.enc.Encode(&l)
}
