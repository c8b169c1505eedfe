package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// harLog is what the tests read of a HAR.
type harLog struct {
	Log struct {
		Version string `json:"version"`
		Creator struct {
			Name, Version string
		} `json:"creator"`
		Entries []struct {
			StartedDateTime string  `json:"startedDateTime"`
			Time            float64 `json:"time"`
			Request         struct {
				Method   string  `json:"method"`
				URL      string  `json:"url"`
				Headers  []harNV `json:"headers"`
				PostData *struct {
					Text     string `json:"text"`
					Encoding string `json:"_encoding"`
				} `json:"postData"`
			} `json:"request"`
			Response struct {
				Status  int     `json:"status"`
				Headers []harNV `json:"headers"`
				Content struct {
					Size     int64  `json:"size"`
					Text     string `json:"text"`
					Encoding string `json:"encoding"`
				} `json:"content"`
			} `json:"response"`
			Timings  map[string]float64 `json:"timings"`
			Exchange int64              `json:"_exchange"`
		} `json:"entries"`
	} `json:"log"`
}

func readHAR(t *testing.T, path string) *harLog {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h harLog
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("the HAR does not parse: %v", err)
	}
	return &h
}

func harText(t *testing.T, text, encoding string) []byte {
	t.Helper()
	if encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			t.Fatalf("content.text: %v", err)
		}
		return b
	}
	return []byte(text)
}

// TestHAR: the HAR export of every corpus session parses and holds every
// exchange, in order, with its request and response as a client saw them:
// status, the body decoded (a watch body with every event as recorded),
// the request body; timings that add up.
func TestHAR(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := wttest.OpenSession(t, record(t, sc, true))
			path, _ := exportFile(t, "s.har", func(w io.Writer) (Result, error) { return HAR(w, f, HAROptions{}) })
			h := readHAR(t, path)
			idx := f.Index()
			if h.Log.Version != "1.2" || h.Log.Creator.Name != "wtrace" {
				t.Errorf("log version %q creator %q", h.Log.Version, h.Log.Creator.Name)
			}
			if len(h.Log.Entries) != len(idx.Exchanges) {
				t.Fatalf("%d entries; the session has %d exchanges", len(h.Log.Entries), len(idx.Exchanges))
			}
			resp, req := bodies(t, f, formats.ServerToClient), bodies(t, f, formats.ClientToServer)
			for i, e := range h.Log.Entries {
				x := &idx.Exchanges[i]
				id := x.Request.Exchange
				if e.Exchange != id {
					t.Fatalf("entry %d is exchange %d; want %d", i, e.Exchange, id)
				}
				if _, err := time.Parse(time.RFC3339Nano, e.StartedDateTime); err != nil {
					t.Errorf("exchange %d: startedDateTime %q: %v", id, e.StartedDateTime, err)
				}
				if !x.Request.Missing && (e.Request.Method != x.Request.Method || !strings.HasSuffix(e.Request.URL, x.Request.Target)) {
					t.Errorf("exchange %d: request %s %s; want %s …%s", id, e.Request.Method, e.Request.URL, x.Request.Method, x.Request.Target)
				}
				if x.Response != nil && e.Response.Status != x.Response.Status {
					t.Errorf("exchange %d: status %d; want %d", id, e.Response.Status, x.Response.Status)
				}
				var want []byte
				if b := resp[id]; b != nil {
					want = b.read
				}
				if got := harText(t, e.Response.Content.Text, e.Response.Content.Encoding); !bytes.Equal(got, want) {
					t.Errorf("exchange %d: content of %d bytes differs from the session's body of %d", id, len(got), len(want))
				}
				if e.Response.Content.Size != int64(len(want)) {
					t.Errorf("exchange %d: content.size %d; want %d", id, e.Response.Content.Size, len(want))
				}
				if b := req[id]; b != nil && len(b.stored) > 0 {
					if e.Request.PostData == nil {
						t.Errorf("exchange %d: no postData; the request has a body of %d bytes", id, len(b.stored))
					} else if got := harText(t, e.Request.PostData.Text, e.Request.PostData.Encoding); !bytes.Equal(got, b.stored) {
						t.Errorf("exchange %d: postData differs from the request body", id)
					}
				}
				sum := 0.0
				for _, k := range []string{"send", "wait", "receive"} {
					v, ok := e.Timings[k]
					if !ok || v < 0 {
						t.Errorf("exchange %d: timings.%s = %v", id, k, v)
					}
					sum += v
				}
				if d := e.Time - sum; d > 1e-6 || d < -1e-6 {
					t.Errorf("exchange %d: time %v is not the sum of its timings %v", id, e.Time, sum)
				}
			}
		})
	}
}

// TestExportSecrets: the HAR and JSONL (with the data) of sessions
// recorded with redaction hold none of the corpus' credentials and Secret
// values, however they are encoded there.
func TestExportSecrets(t *testing.T) {
	needles, err := wttest.CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, what string, b []byte) {
		t.Helper()
		for _, n := range needles {
			if len(n.Value) > 0 && bytes.Contains(b, n.Value) {
				t.Errorf("%s holds %q… (%s)", what, n.Value[:min(len(n.Value), 16)], n.From)
			}
		}
	}
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			wt := record(t, sc, false)
			f := wttest.OpenSession(t, wt)
			path, _ := exportFile(t, "s.har", func(w io.Writer) (Result, error) { return HAR(w, f, HAROptions{}) })
			raw, _ := os.ReadFile(path)
			check(t, "the HAR", raw)
			h := readHAR(t, path)
			for _, e := range h.Log.Entries {
				check(t, "a HAR body", harText(t, e.Response.Content.Text, e.Response.Content.Encoding))
				if e.Request.PostData != nil {
					check(t, "a HAR request body", harText(t, e.Request.PostData.Text, e.Request.PostData.Encoding))
				}
			}
			path, _ = exportFile(t, "s.jsonl", func(w io.Writer) (Result, error) { return JSONL(w, f, JSONLOptions{Data: true}) })
			raw, _ = os.ReadFile(path)
			check(t, "the JSONL", raw)
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				var l struct {
					DataBase64  string `json:"dataBase64"`
					EventBase64 string `json:"event_base64"`
				}
				json.Unmarshal(sc.Bytes(), &l)
				for _, s := range []string{l.DataBase64, l.EventBase64} {
					b, _ := base64.StdEncoding.DecodeString(s)
					check(t, "a JSONL body", b)
				}
			}
		})
	}
}
