package record_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/record"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// corpus records testdata/corpus/<scenario>/capture.pcap into a session.
func corpus(t *testing.T, scenario string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), scenario+".wt")
	if _, err := wttest.RecordPcap(filepath.Join("..", "..", "testdata", "corpus", scenario, "capture.pcap"), out, capture.Options{}); err != nil {
		t.Skipf("corpus %s: %v", scenario, err)
	}
	return out
}

// TestRecordRun: a replay with a Recorder as its Out writes a session of
// source "replay" holding every request with its body and every answer,
// watch events split as any recording's, Secret values and credentials
// redacted; what a client received is what the session says it got.
func TestRecordRun(t *testing.T) {
	session := corpus(t, "basic-json")
	run := filepath.Join(t.TempDir(), "run.wt")
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: run}, Tool: "wtrace test",
		Description: "replay of basic-json", Labels: map[string]string{"session": "basic-json.wt"}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := replay.Open(session, replay.Options{Speed: 0, Out: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	do := func(method, target, ct, body string, hdr ...string) (int, []byte) {
		req, _ := http.NewRequest(method, srv.URL+target, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req.WithContext(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	const token = "Bearer run-token-9f3c2a71"
	const secretValue = "replayed-secret-value-51d0"
	code, listBody := do("GET", cms, "", "")
	if code != 200 {
		t.Fatalf("LIST: %d", code)
	}
	code, watchBody := do("GET", cms+"?watch=true&resourceVersion=205&timeoutSeconds=30", "", "", "Authorization", token)
	if code != 200 {
		t.Fatalf("WATCH: %d", code)
	}
	create := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"run-cm"},"data":{"k":"v"}}`
	if code, b := do("POST", cms, "application/json", create); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	if code, b := do("PATCH", cms+"/run-cm", "application/merge-patch+json", `{"data":{"k":"w"}}`); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"run-secret"},"stringData":{"password":"` + secretValue + `"}}`
	if code, b := do("POST", "/api/v1/namespaces/corpus-basic/secrets", "application/json", secret); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}
	srv.Close()
	res, err := rec.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0] != run || res.Stats.Exchanges != 5 {
		t.Errorf("Close = %+v; want 5 exchanges in %s", res, run)
	}

	wttest.CheckNoSecrets(t, run, secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)), "run-token-9f3c2a71")
	f, err := formats.Open(run, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx := f.Index()
	if m := idx.Meta; m == nil || m.Source != formats.SourceReplay || m.Tool != "wtrace test" || m.Labels["session"] != "basic-json.wt" || m.Redaction != formats.RedactionDefault {
		t.Errorf("Meta = %+v; want source replay, the tool, the labels, default redaction", idx.Meta)
	}
	if idx.Summary == nil {
		t.Error("no Summary: the file was not closed cleanly")
	}
	want := []struct {
		method, target string
		status         int
		answer         string // the response End's note: how the replay answered
	}{
		{"GET", cms, 200, "replay answer: synth-list"},
		{"GET", cms + "?watch=true&resourceVersion=205&timeoutSeconds=30", 200, "replay answer: synth-watch"},
		{"POST", cms, 201, "replay answer: synth-create"}, {"PATCH", cms + "/run-cm", 200, "replay answer: synth-patch"},
		{"POST", "/api/v1/namespaces/corpus-basic/secrets", 201, "replay answer: synth-create"},
	}
	if len(idx.Exchanges) != len(want) {
		t.Fatalf("%d exchanges; want %d", len(idx.Exchanges), len(want))
	}
	for i, w := range want {
		x := idx.Exchanges[i]
		if x.Request.Method != w.method || x.Request.Target != w.target || x.Response == nil || x.Response.Status != w.status ||
			x.End == nil || x.End.Status != formats.EndComplete || x.Response.Time < x.Request.Time {
			t.Errorf("exchange %d = %s %s → %+v, end %+v; want %s %s → %d, complete", i, x.Request.Method, x.Request.Target, x.Response, x.End, w.method, w.target, w.status)
		}
		if x.End != nil && x.End.Note != w.answer {
			t.Errorf("exchange %d (%s %s): End note %q; want %q", i, w.method, w.target, x.End.Note, w.answer)
		}
	}
	// The bodies: the LIST as the client got it, the create's request.
	var gotList, gotCreate []byte
	var events [][]byte
	for r, err := range f.ExchangeRecords(0, 1, 2).All() {
		if err != nil {
			t.Fatal(err)
		}
		switch r := r.(type) {
		case *formats.Body:
			if r.Exchange == 0 && r.Dir == formats.ServerToClient {
				gotList = append(gotList, r.Data...)
			}
			if r.Exchange == 2 && r.Dir == formats.ClientToServer {
				gotCreate = append(gotCreate, r.Data...)
			}
		case *formats.Frame:
			events = append(events, bytes.Clone(r.Data))
		}
	}
	if !bytes.Equal(gotList, listBody) || string(gotCreate) != create {
		t.Errorf("LIST body %d bytes (client got %d), create body %q", len(gotList), len(listBody), gotCreate)
	}
	sc := bufio.NewScanner(bytes.NewReader(watchBody))
	sc.Buffer(nil, 1<<20)
	var clientEvents [][]byte
	for sc.Scan() {
		clientEvents = append(clientEvents, bytes.Clone(sc.Bytes()))
	}
	if len(events) != len(clientEvents) || len(events) != 200 {
		t.Fatalf("%d events in the run; the client got %d (want 200)", len(events), len(clientEvents))
	}
	for i := range events {
		if !bytes.Equal(events[i], clientEvents[i]) {
			t.Fatalf("event %d differs", i)
		}
	}
	// wtrace events' exporter reads it.
	n := 0
	for ev, err := range f.Events() {
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(ev.Line(false))
		if n == 0 && !strings.Contains(string(line), `"request":"GET `+cms+`?watch=true`) {
			t.Errorf("first events line %s", line)
		}
		n++
	}
	if n != 200 {
		t.Errorf("%d events lines; want 200", n)
	}
}
