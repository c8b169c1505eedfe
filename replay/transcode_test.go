package replay_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// Accept headers of real clients.
const (
	acceptKubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	acceptMetadata     = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	acceptMetaWatch    = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)

// recordedWatch returns the events of the session's first watch whose
// target contains sub, as Peek reads them.
func recordedWatch(t *testing.T, path, sub string) []frame.Meta {
	t.Helper()
	f, data := replay.RecordedEvents(t, path, sub)
	out := make([]frame.Meta, len(data))
	for i, d := range data {
		m, err := frame.Peek(f, d)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = m
	}
	return out
}

// finalNames is the set of objects a watch's events leave.
func finalNames(evs []frame.Meta, initial []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range initial {
		out[n] = true
	}
	for _, e := range evs {
		switch e.Type {
		case "ADDED", "MODIFIED":
			out[e.Name] = true
		case "DELETED":
			delete(out, e.Name)
		}
	}
	return out
}

// rawWatch reads a whole watch response (the request has timeoutSeconds)
// and splits it into events in the format its Content-Type says.
func rawWatch(t *testing.T, url, accept string) (string, []frame.Meta, [][]byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ct := resp.Header.Get("Content-Type")
	f := frame.FormatOf(ct, true)
	sp := frame.NewSplitter(f, frame.Options{})
	var metas []frame.Meta
	var datas [][]byte
	for p := body; len(p) > 0; {
		n, ev, ok, err := sp.Next(p)
		if err != nil {
			t.Fatalf("watch %s (%s): %v", url, ct, err)
		}
		if ok {
			d := append([]byte(nil), ev.Data...)
			m, err := frame.Peek(f, d)
			if err != nil {
				t.Fatalf("event %.80q: %v", d, err)
			}
			metas, datas = append(metas, m), append(datas, d)
		}
		p = p[n:]
	}
	return ct, metas, datas
}

// waitRequest waits for the request log to hold a request ok accepts
// (its answer may end a moment after the client read it) and returns it.
func waitRequest(t *testing.T, srv *replay.Server, ok func(replay.Request) bool) replay.Request {
	t.Helper()
	var found replay.Request
	wttest.WaitFor(t, time.Minute, func() bool {
		for _, r := range srv.Requests() {
			if ok(r) {
				found = r
				return true
			}
		}
		return false
	}, "the request in the request log")
	return found
}

// TestInformersTranscoded: against a replay of a protobuf-only recording
// (a typed client-go informer's, from the real apiserver), a dynamic
// (JSON) informer and a metadata-only informer sync and end with the
// recording's objects; against a JSON-only session (basic-json), a typed
// protobuf informer does.
func TestInformersTranscoded(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, tc := range []struct{ scenario, ns string }{{"protobuf", "corpus-proto"}, {"basic-json", "corpus-basic"}} {
		t.Run(tc.scenario, func(t *testing.T) {
			path := replay.CorpusSession(t, tc.scenario)
			want := finalNames(recordedWatch(t, path, "watch=true"), nil)
			srv := replaytest.NewServer(t, path, replay.Options{Writes: replay.WritesReject, Speed: 0})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}
			dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, tc.ns, nil)
			md := metadatainformer.NewFilteredSharedInformerFactory(metadata.NewForConfigOrDie(cfg), 0, tc.ns, nil)
			pcfg := *cfg
			pcfg.ContentType = "application/vnd.kubernetes.protobuf"
			typed := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(&pcfg), 0, informers.WithNamespace(tc.ns))
			infs := map[string]cache.SharedIndexInformer{
				"dynamic":        dyn.ForResource(gvr).Informer(),
				"metadata":       md.ForResource(gvr).Informer(),
				"typed protobuf": typed.Core().V1().ConfigMaps().Informer(),
			}
			dyn.Start(ctx.Done())
			md.Start(ctx.Done())
			typed.Start(ctx.Done())
			defer func() { cancel(); dyn.Shutdown(); md.Shutdown(); typed.Shutdown() }()
			for name, inf := range infs {
				if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
					t.Fatalf("%s informer did not sync", name)
				}
				wttest.WaitFor(t, time.Minute, func() bool {
					keys := inf.GetStore().ListKeys()
					if len(keys) != len(want) {
						return false
					}
					for _, k := range keys {
						if !want[strings.TrimPrefix(k, tc.ns+"/")] {
							return false
						}
					}
					return true
				}, "%s informer at the recording's end (%d objects)", name, len(want))
			}
		})
	}
}

// TestRecordedTranscoded: recorded responses go to a client in the
// encoding its Accept header asks for, with the recorded events in order;
// the request log says they were transcoded. A client that accepts the
// recorded encoding gets it byte for byte.
func TestRecordedTranscoded(t *testing.T) {
	proto := replay.CorpusSession(t, "protobuf")
	basic := replay.CorpusSession(t, "basic-json")
	const pw = "/api/v1/namespaces/corpus-proto/configmaps?watch=true&resourceVersion=206&timeoutSeconds=35"
	const bw = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=30"
	for _, c := range []struct {
		name, path, target, accept string
		recorded                   string // the recorded watch
		ct, transcoded             string
	}{
		// The apiserver's Content-Type does not show transformations.
		{"protobuf to JSON", proto, pw, "application/json", "allowWatchBookmarks=true", "application/json", "protobuf→json"},
		{"protobuf to a Table (kubectl get -w)", proto, pw, acceptKubectlTable, "allowWatchBookmarks=true", "application/json", "Table"},
		{"protobuf to metadata", proto, pw, acceptMetaWatch, "allowWatchBookmarks=true", "application/vnd.kubernetes.protobuf;stream=watch", "PartialObjectMetadata"},
		{"JSON to protobuf", basic, bw, "application/vnd.kubernetes.protobuf", "watch=true", "application/vnd.kubernetes.protobuf;stream=watch", "json→protobuf"},
		{"JSON as recorded", basic, bw, "application/vnd.kubernetes.protobuf, application/json", "watch=true", "application/json", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := recordedWatch(t, c.path, c.recorded)
			srv := replaytest.NewServer(t, c.path, replay.Options{Writes: replay.WritesReject, Speed: 0})
			ct, got, datas := rawWatch(t, srv.URL+c.target, c.accept)
			if ct != c.ct {
				t.Errorf("Content-Type %q; want %q", ct, c.ct)
			}
			if c.transcoded == "Table" {
				// One row per event; the column definitions in the first.
				if len(got) != len(rec) || !strings.Contains(string(datas[0]), `"columnDefinitions":[{`) {
					t.Fatalf("%d Table events for %d recorded; first %.200s", len(got), len(rec), datas[0])
				}
				for i, d := range datas {
					// A bookmark's object (its resourceVersion alone) is a
					// row too, as the apiserver's watch encoder makes it.
					if rec[i].Type != "BOOKMARK" && !strings.Contains(string(d), `"name":"`+rec[i].Name+`"`) {
						t.Fatalf("Table event %d = %.300s; want a row of %s", i, d, rec[i].Name)
					}
				}
			} else {
				if len(got) != len(rec) {
					t.Fatalf("%d events; want the %d recorded", len(got), len(rec))
				}
				for i := range rec {
					g, w := got[i], rec[i]
					if g.Type != w.Type || g.Name != w.Name || g.ResourceVersion != w.ResourceVersion {
						t.Fatalf("event %d = %s %s %s; want %s %s %s", i, g.Type, g.Name, g.ResourceVersion, w.Type, w.Name, w.ResourceVersion)
					}
				}
			}
			r := waitRequest(t, srv, func(r replay.Request) bool { return strings.Contains(r.Target, "watch=true") })
			if r.Transcoded != c.transcoded {
				t.Errorf("request log: transcoded %q; want %q", r.Transcoded, c.transcoded)
			}
		})
	}

	// A LIST: the protobuf recording to a JSON client, and as a Table.
	srv := replaytest.NewServer(t, proto, replay.Options{Writes: replay.WritesReject, Speed: 0})
	for accept, want := range map[string]string{"application/json": `"kind":"ConfigMapList"`, acceptKubectlTable: `"kind":"Table"`, acceptMetadata: ""} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/corpus-proto/configmaps", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want == "" { // protobuf PartialObjectMetadataList
			if resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !strings.Contains(string(b), "PartialObjectMetadataList") {
				t.Errorf("LIST for %s: %s %.100q", accept, resp.Header.Get("Content-Type"), b)
			}
			continue
		}
		var m map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil || !strings.Contains(string(b), want) {
			t.Errorf("LIST for %s: %d %s %.200s", accept, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}
