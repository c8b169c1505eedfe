package export

import (
	"fmt"
	"strings"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// WatchError is one ERROR event of a watch that carries a Status (a 410
// Gone is what an SRE looks for).
type WatchError struct {
	Seq     int64  `json:"seq"`
	Time    string `json:"time,omitempty"`
	Code    int32  `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Silence is the longest time a watch stream sent nothing: from its
// response head to its first event, between two events, or from its last
// event to its end.
type Silence struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	Seconds float64 `json:"seconds"`
	// Until names what ended it: "event 3 (MODIFIED ConfigMap demo/web-1)",
	// "the end of the stream".
	Until string `json:"until"`
}

// watchNotes gathers the notes of one watch exchange as its events are
// read, in order.
type watchNotes struct {
	x         *formats.ExchangeInfo
	format    frame.Format
	prev      int64 // time of what came last (0: nothing to measure from)
	from, to  int64 // the longest silence so far
	until     string
	errors    []WatchError
	errTimes  []int64
	endedNote bool
}

func newWatchNotes(x *formats.ExchangeInfo) *watchNotes {
	n := &watchNotes{x: x, format: frame.Unknown}
	if x.Response != nil {
		n.format = x.Response.Events
		n.prev = x.Response.Time
	}
	return n
}

// note ends a silence at t if it is the longest so far; what names what
// came then (called only in that case).
func (n *watchNotes) note(t int64, what func() string) {
	if n.prev != 0 && t-n.prev > n.to-n.from {
		n.from, n.to, n.until = n.prev, t, what()
	}
	n.prev = t
}

// frame takes the exchange's next event.
func (n *watchNotes) frame(fr *formats.Frame) {
	n.note(fr.Time, func() string { return eventName(n.format, fr) })
	if n.x.FrameTypes["ERROR"] == 0 {
		return
	}
	m, err := frame.Peek(n.format, fr.Data)
	if err != nil || m.Type != "ERROR" {
		return
	}
	n.errors = append(n.errors, WatchError{Seq: fr.Seq, Time: Time(fr.Time), Code: m.Code, Reason: m.Reason, Message: m.Message})
	n.errTimes = append(n.errTimes, fr.Time)
}

// end takes the end of the stream (once).
func (n *watchNotes) end() {
	if n.x.End != nil && !n.endedNote {
		n.endedNote = true
		n.note(n.x.End.Time, func() string { return "the end of the stream" })
	}
}

// silence is the longest silence, nil if none was measured.
func (n *watchNotes) silence() *Silence {
	if n.to <= n.from {
		return nil
	}
	return &Silence{From: Time(n.from), To: Time(n.to), Seconds: float64(n.to-n.from) / 1e9, Until: n.until}
}

// readWatchNotes reads the events of every watch exchange of f, in one
// pass over the file (reading each exchange on its own would decompress
// every block as many times as exchanges run through it), for the notes
// of each: its ERROR events and its longest silence. A damaged region
// breaks every silence measured across it: silences are measured within
// what the file holds intact. It stops at an error that is not damage.
func readWatchNotes(f *formats.File) (map[int64]*watchNotes, error) {
	idx := f.Index()
	notes := map[int64]*watchNotes{}
	for i := range idx.Exchanges {
		if x := &idx.Exchanges[i]; x.Frames > 0 {
			notes[x.Request.Exchange] = newWatchNotes(x)
		}
	}
	if len(notes) == 0 {
		return notes, nil
	}
	lost := func(*formats.DamageError) {
		for _, n := range notes {
			n.prev = 0
		}
	}
	var err error
	for r, rerr := range f.Records().Intact(lost) {
		if rerr != nil {
			err = rerr
			break
		}
		if fr, ok := r.(*formats.Frame); ok {
			if n := notes[fr.Exchange]; n != nil {
				n.frame(fr)
			}
		}
	}
	for _, n := range notes {
		n.end()
	}
	return notes, err
}

// eventName names an event for a reader: "event 3 (MODIFIED Table
// demo/web-1)" — a Table (kubectl get -w) by its row's object, as
// frame.Peek reads it.
func eventName(format frame.Format, fr *formats.Frame) string {
	s := fmt.Sprintf("event %d", fr.Seq)
	m, err := frame.Peek(format, fr.Data)
	if err != nil || m.Type == "" {
		return s
	}
	obj := m.Name
	if m.Namespace != "" {
		obj = m.Namespace + "/" + m.Name
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s %s %s", s, m.Type, m.Kind, obj)) + ")"
}
