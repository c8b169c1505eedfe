package record_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/record"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestCloseOrder: the order in which a replay's Server and its Recorder are
// closed does not matter — closing the Recorder first closes the Server it
// records first, so every answer ends as the Server ends it and the run
// is the same either way (it used to end the answers still open as cut by
// the recording, and lose what the Server sent after).
func TestCloseOrder(t *testing.T) {
	session := corpus(t, "basic-json")
	run := func(recorderFirst bool) string {
		path := filepath.Join(t.TempDir(), "run.wt")
		rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: path}, Tool: "wtrace test"})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := replay.Open(session, replay.Options{Speed: 0, Hold: true, Out: rec})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		// A watch held open after its events: open when the run ends.
		resp, err := http.Get(srv.URL + "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for n := 0; n < 200; n++ {
			var ev json.RawMessage
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("after %d events: %v", n, err)
			}
		}
		if recorderFirst {
			if _, err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			srv.Close()
		} else {
			srv.Close()
			if _, err := rec.Close(); err != nil {
				t.Fatal(err)
			}
		}
		s := export.SessionOf(wttest.OpenSession(t, path).Index())
		// What the run holds, but for times and addresses.
		type end struct{ Status, Note string }
		var out []any
		for _, x := range s.Exchanges {
			var e end
			if x.End != nil {
				e = end{x.End.Status, x.End.Note}
			}
			out = append(out, x.Request.Target, x.Events, x.EventTypes, e)
		}
		for _, c := range s.Conns {
			if c.End != nil {
				out = append(out, c.End.Reason)
			}
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	a, b := run(false), run(true)
	if a != b {
		t.Errorf("the run depends on the order of the Close calls:\nserver first:   %s\nrecorder first: %s", a, b)
	}
}
