package export

import (
	"encoding/base64"
	"encoding/json"
	"io"

	"github.com/wtrace/wtrace/formats"
)

// JSONLOptions configure JSONL. The zero value writes no event or body
// bytes, only what describes them.
type JSONLOptions struct {
	// Data adds each event itself to its line ("event" or "event_base64",
	// as `wtrace events --data`), and a "body" line for each piece of a
	// body stored whole.
	Data bool
}

// Result is what an export did.
type Result struct {
	// Damage lists the damaged regions of the session that could not be
	// read (each a *formats.DamageError), in file order; everything else
	// was exported.
	Damage []error
	// Notes say where the export could not give back exactly what was on
	// the wire (pcap), one line each.
	Notes []string
}

// Lines of the JSONL export: each is one of the schema's objects with
// "record" naming it.
type (
	metaLine struct {
		Record     string `json:"record"`
		APIVersion string `json:"apiVersion"`
		*Meta
	}
	connLine struct {
		Record string `json:"record"`
		Conn
	}
	exchangeLine struct {
		Record string `json:"record"`
		Exchange
	}
	eventLine struct {
		Record string `json:"record"`
		formats.EventLine
	}
	bodyLine struct {
		Record     string `json:"record"`
		Exchange   int64  `json:"exchange"`
		Direction  string `json:"direction"`
		Time       string `json:"time,omitempty"`
		Offset     int64  `json:"offset"`
		Size       int    `json:"size"`
		DataBase64 string `json:"dataBase64,omitempty"`
	}
	anomalyLine struct {
		Record string `json:"record"`
		Anomaly
	}
	summaryLine struct {
		Record string `json:"record"`
		*Summary
	}
	damageLine struct {
		Record  string `json:"record"`
		Offset  int64  `json:"offset"`
		Block   int    `json:"block"`
		Message string `json:"message"`
	}
)

// JSONL writes the session f as JSON lines, in session (file) order: a
// "meta" line first; a "conn" line where each connection is announced and
// an "exchange" line where each exchange begins, each with everything the
// index says of it (how it ended included); an "event" line per watch
// event (the events line format, formats.EventLine, with "record":
// "event"); with Data, a "body" line per piece of a body stored whole; an
// "anomaly" line where each anomaly was recorded; a "damage" line where
// the file could not be read; a "summary" line last. docs/SCHEMA.md
// documents every member.
//
// It reads the file once, in order: memory is the index and one block.
// Damage is skipped: a "damage" line where the read met it, and every
// damaged region once in the Result (those opening found too, as every
// export lists them); other errors end it.
func JSONL(w io.Writer, f *formats.File, opts JSONLOptions) (Result, error) {
	var res Result
	idx := f.Index()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(metaLine{Record: "meta", APIVersion: APIVersion, Meta: NewMeta(idx.Meta)}); err != nil {
		return res, err
	}
	names := ConnNames(idx)
	connPos := make(map[uint64]int, len(idx.Conns))
	for i := range idx.Conns {
		connPos[idx.Conns[i].Conn.ID] = i
	}
	connDone := make(map[uint64]bool, len(idx.Conns))
	exDone := make(map[int64]bool, len(idx.Exchanges))
	conn := func(id uint64) error {
		if connDone[id] {
			return nil
		}
		connDone[id] = true
		pos, ok := connPos[id]
		if !ok {
			return nil
		}
		return enc.Encode(connLine{Record: "conn", Conn: NewConn(&idx.Conns[pos])})
	}
	exchange := func(id int64) error {
		if exDone[id] {
			return nil
		}
		exDone[id] = true
		x := f.Exchange(id)
		if x == nil {
			return nil
		}
		if err := conn(x.Request.Conn); err != nil {
			return err
		}
		return enc.Encode(exchangeLine{Record: "exchange", Exchange: NewExchange(x, names)})
	}
	var derr error // of writing a damage line
	var ds formats.Damages
	damage := func(de *formats.DamageError) {
		if !ds.Add(de) {
			return
		}
		if derr == nil {
			derr = enc.Encode(damageLine{Record: "damage", Offset: de.Offset, Block: de.Block, Message: de.Error()})
		}
	}
	for r, err := range f.Records().Intact(damage) {
		if err == nil {
			err = derr
		}
		if err != nil {
			return res, err
		}
		switch r := r.(type) {
		case *formats.Conn:
			err = conn(r.ID)
		case *formats.Request:
			err = exchange(r.Exchange)
		case *formats.Response:
			err = exchange(r.Exchange)
		case *formats.End:
			err = exchange(r.Exchange)
		case *formats.Chunk:
			err = exchange(r.Exchange)
		case *formats.Body:
			if err = exchange(r.Exchange); err == nil && opts.Data {
				l := bodyLine{Record: "body", Exchange: r.Exchange, Direction: Direction(r.Dir), Time: Time(r.Time),
					Offset: r.Offset, Size: len(r.Data), DataBase64: base64.StdEncoding.EncodeToString(r.Data)}
				err = enc.Encode(l)
			}
		case *formats.Frame:
			if err = exchange(r.Exchange); err == nil {
				ev := f.Event(r)
				err = enc.Encode(eventLine{Record: "event", EventLine: ev.Line(opts.Data)})
			}
		case *formats.Anomaly:
			if r.Exchange != formats.NoExchange {
				err = exchange(r.Exchange)
			} else {
				err = conn(r.Conn)
			}
			if err == nil {
				err = enc.Encode(anomalyLine{Record: "anomaly", Anomaly: NewAnomaly(r)})
			}
		}
		if err != nil {
			return res, err
		}
	}
	if derr != nil {
		return res, derr
	}
	ds.AddFound(f)
	res.Damage = ds.Errors()
	if idx.Summary != nil {
		if err := enc.Encode(summaryLine{Record: "summary", Summary: NewSummary(idx.Summary)}); err != nil {
			return res, err
		}
	}
	return res, nil
}
