package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestJSONL: every line of the JSONL export of every corpus session
// parses; it holds the meta first and the summary last, a line for each
// connection, exchange and anomaly of the index, placed before anything
// that names them, and its event lines are the lines of `wtrace events`
// (with "record"); with --data, the body lines give back every body the
// session stores whole.
func TestJSONL(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := wttest.OpenSession(t, record(t, sc, true))
			path, _ := exportFile(t, "s.jsonl", func(w io.Writer) (Result, error) { return JSONL(w, f, JSONLOptions{Data: true}) })
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The events as `wtrace events --data` prints them.
			var events bytes.Buffer
			enc := formats.NewEventEncoder(&events, true)
			for ev, err := range f.Events() {
				if err != nil {
					t.Fatal(err)
				}
				enc.Encode(ev)
			}
			wantEvents := bytes.Split(bytes.TrimSuffix(events.Bytes(), []byte("\n")), []byte("\n"))

			idx := f.Index()
			counts := map[string]int{}
			seenConn, seenEx := map[uint64]bool{}, map[int64]bool{}
			stored := map[int64][]byte{}
			var records []string
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(nil, 64<<20)
			ev := 0
			for sc.Scan() {
				var l map[string]json.RawMessage
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("line %d does not parse: %v", len(records)+1, err)
				}
				var rec string
				json.Unmarshal(l["record"], &rec)
				records = append(records, rec)
				counts[rec]++
				switch rec {
				case "conn":
					var c Conn
					json.Unmarshal(sc.Bytes(), &c)
					seenConn[c.ConnID] = true
				case "exchange":
					var x Exchange
					json.Unmarshal(sc.Bytes(), &x)
					if !seenConn[x.ConnID] && len(idx.Conns) > 0 {
						t.Errorf("exchange %d before its connection %d", x.Exchange, x.ConnID)
					}
					seenEx[x.Exchange] = true
				case "event":
					var e formats.EventLine
					json.Unmarshal(sc.Bytes(), &e)
					if !seenEx[e.Exchange] {
						t.Errorf("event %d/%d before its exchange", e.Exchange, e.Seq)
					}
					delete(l, "record")
					b, _ := json.Marshal(l)
					var want map[string]json.RawMessage
					if ev >= len(wantEvents) {
						t.Fatalf("more event lines than events (%d)", len(wantEvents))
					}
					json.Unmarshal(wantEvents[ev], &want)
					w, _ := json.Marshal(want)
					if !bytes.Equal(b, w) {
						t.Errorf("event line %d:\n got %.300s\nwant %.300s", ev, b, w)
					}
					ev++
				case "body":
					var b bodyLine
					json.Unmarshal(sc.Bytes(), &b)
					data, err := base64.StdEncoding.DecodeString(b.DataBase64)
					if err != nil || len(data) != b.Size {
						t.Errorf("body line of exchange %d: %d bytes (%v); size %d", b.Exchange, len(data), err, b.Size)
					}
					if b.Direction == "server-to-client" {
						stored[b.Exchange] = append(stored[b.Exchange], data...)
					}
				}
			}
			if len(records) == 0 || records[0] != "meta" {
				t.Errorf("the first line is %q; want meta", records[0])
			}
			if idx.Summary != nil && records[len(records)-1] != "summary" {
				t.Errorf("the last line is %q; want summary", records[len(records)-1])
			}
			if counts["conn"] != len(idx.Conns) || counts["exchange"] != len(idx.Exchanges) || counts["anomaly"] != len(idx.Anomalies) || ev != len(wantEvents) {
				t.Errorf("%d conn, %d exchange, %d anomaly, %d event lines; the session has %d, %d, %d, %d",
					counts["conn"], counts["exchange"], counts["anomaly"], ev, len(idx.Conns), len(idx.Exchanges), len(idx.Anomalies), len(wantEvents))
			}
			for id, b := range bodies(t, f, formats.ServerToClient) {
				if x := f.Exchange(id); x.Response != nil && x.Response.Events == 0 && !bytes.Equal(stored[id], b.stored) {
					t.Errorf("exchange %d: the body lines hold %d bytes; the session %d", id, len(stored[id]), len(b.stored))
				}
			}
		})
	}
}
