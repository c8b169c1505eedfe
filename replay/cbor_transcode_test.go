package replay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
)

// TestCBORTranscoded: the cbor-informer session (a real apiserver with
// CBORServingAndStorage, client-go preferring CBOR) served to clients of
// every encoding. A client that accepts CBOR (client-go's dynamic client
// with ClientsAllowCBOR, or application/cbor-seq alone) gets the recorded
// streaming list byte for byte; the others get it transcoded event by
// event (JSON, protobuf, Table, PartialObjectMetadata), the same events.
// A LIST goes as recorded to a CBOR client and transcoded to a JSON one.
// A client that accepts CBOR alone gets 406 for a JSON recording: nothing
// is transcoded into CBOR.
func TestCBORTranscoded(t *testing.T) {
	path := replay.CorpusSession(t, "cbor-informer")
	const w = "/api/v1/namespaces/wtrace-cbor-informer/secrets?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
	const recordedSub = "secrets?allowWatchBookmarks=true"
	rec := recordedWatch(t, path, recordedSub)
	recData := replay.RecordedFrames(t, path, recordedSub)
	for _, c := range []struct {
		name, accept   string
		ct, transcoded string
	}{
		{"CBOR as recorded (client-go dynamic)", "application/json;q=0.9,application/cbor;q=1", "application/cbor-seq", ""},
		{"CBOR as recorded (cbor-seq)", "application/cbor-seq", "application/cbor-seq", ""},
		{"CBOR to JSON", "application/json", "application/json", "cbor→json"},
		{"CBOR to protobuf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf;stream=watch", "cbor→protobuf"},
		{"CBOR to a Table (kubectl get -w)", acceptKubectlTable, "application/json", "Table"},
		{"CBOR to metadata", acceptMetaWatch, "application/vnd.kubernetes.protobuf;stream=watch", "PartialObjectMetadata"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := replaytest.NewServer(t, path, replay.Options{Writes: replay.WritesReject, Speed: 0})
			ct, got, datas := rawWatch(t, srv.URL+w, c.accept)
			if ct != c.ct {
				t.Errorf("Content-Type %q; want %q", ct, c.ct)
			}
			if len(got) != len(rec) {
				t.Fatalf("%d events; want the %d recorded", len(got), len(rec))
			}
			for i := range rec {
				g, w := got[i], rec[i]
				if c.transcoded == "Table" {
					if w.Type != "BOOKMARK" && !strings.Contains(string(datas[i]), `"name":"`+w.Name+`"`) {
						t.Fatalf("Table event %d = %.300s; want a row of %s", i, datas[i], w.Name)
					}
					continue
				}
				if g.Type != w.Type || g.Name != w.Name || g.ResourceVersion != w.ResourceVersion {
					t.Fatalf("event %d = %s %s %s; want %s %s %s", i, g.Type, g.Name, g.ResourceVersion, w.Type, w.Name, w.ResourceVersion)
				}
				if c.transcoded == "" && !bytes.Equal(datas[i], recData[i]) {
					t.Fatalf("event %d is not the recorded bytes:\n got %q\nwant %q", i, datas[i], recData[i])
				}
			}
			r := waitRequest(t, srv, func(r replay.Request) bool { return strings.Contains(r.Target, "watch=true") })
			if r.Transcoded != c.transcoded {
				t.Errorf("request log: transcoded %q; want %q", r.Transcoded, c.transcoded)
			}
		})
	}

	srv := replaytest.NewServer(t, path, replay.Options{Writes: replay.WritesReject, Speed: 0})
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const list = "/api/v1/namespaces/wtrace-cbor-informer/configmaps"
	var recorded []byte
	for _, x := range f.Index().Exchanges {
		if x.Request.Method == "GET" && x.Request.Target == list {
			for rec, err := range f.ExchangeRecords(x.Request.Exchange).All() {
				if err != nil {
					t.Fatal(err)
				}
				if b, ok := rec.(*formats.Body); ok && b.Dir == formats.ServerToClient {
					recorded = append(recorded, b.Data...)
				}
			}
		}
	}
	want, err := frame.ListItems(frame.CBOR, recorded)
	if err != nil || len(want.Items) == 0 {
		t.Fatalf("recorded CBOR LIST: %d items, %v", len(want.Items), err)
	}
	get := func(target, accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+target, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := get(list, "application/cbor"); resp.Header.Get("Content-Type") != "application/cbor" || !bytes.Equal(b, recorded) {
		t.Errorf("LIST for a CBOR client: %s, %d bytes; want the %d recorded", resp.Header.Get("Content-Type"), len(b), len(recorded))
	}
	resp, b := get(list, "application/json")
	var jl struct {
		Kind     string
		Metadata struct{ ResourceVersion string }
		Items    []struct {
			Metadata struct{ Name, ResourceVersion string }
		}
	}
	if err := json.Unmarshal(b, &jl); err != nil || resp.Header.Get("Content-Type") != "application/json" || jl.Kind != "ConfigMapList" ||
		jl.Metadata.ResourceVersion != want.ResourceVersion || len(jl.Items) != len(want.Items) {
		t.Fatalf("LIST for a JSON client: %s %v %.300s", resp.Header.Get("Content-Type"), err, b)
	}
	for i, it := range want.Items {
		m, err := frame.Peek(frame.CBOR, frame.WatchEvent(frame.CBOR, "ADDED", "v1", "ConfigMap", it))
		if err != nil || jl.Items[i].Metadata.Name != m.Name || jl.Items[i].Metadata.ResourceVersion != m.ResourceVersion {
			t.Errorf("JSON item %d = %+v; want %s@%s (%v)", i, jl.Items[i].Metadata, m.Name, m.ResourceVersion, err)
		}
	}

	// Nothing is transcoded into CBOR: a client that accepts nothing else
	// gets the apiserver's 406 (v1.33 without CBORServingAndStorage).
	basic := replaytest.NewServer(t, replay.CorpusSession(t, "basic-json"), replay.Options{Writes: replay.WritesReject, Speed: 0})
	req, _ := http.NewRequest("GET", basic.URL+"/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=1", nil)
	req.Header.Set("Accept", "application/cbor-seq")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotAcceptable || !strings.Contains(string(b2), "NotAcceptable") {
		t.Errorf("JSON recording to a CBOR-only client: %d %.200s; want 406 NotAcceptable", r2.StatusCode, b2)
	}
}
