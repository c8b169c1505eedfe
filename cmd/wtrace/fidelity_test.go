package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// truthLine is what the tests read of a corpus truth.jsonl line.
type truthLine struct {
	Type, Kind, Namespace, Name, ResourceVersion string
	EventSHA256                                  string `json:"event_sha256"`
}

func readTruthLines(t *testing.T, scenario string) []truthLine {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus(scenario), "truth.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []truthLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var l truthLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestTableWatch: kubectl get -w and metadata-only informers, recorded
// from a real apiserver (the table-watch and metadata-informer captures).
// Their events are Tables and PartialObjectMetadata (JSON and protobuf);
// events reports the kind as sent and the namespace, name and
// resourceVersion of each row's object (or of the metadata), exactly as
// the clients read them, and filters on them; inspect names the object of
// the event that ended the longest silence.
func TestTableWatch(t *testing.T) {
	for _, c := range []struct{ scenario, kind, namespace string }{
		{"table-watch", "Table", "wtrace-table-watch"},
		{"metadata-informer", "PartialObjectMetadata", "wtrace-metadata-informer"},
	} {
		t.Run(c.scenario, func(t *testing.T) { testTableWatch(t, c.scenario, c.kind, c.namespace) })
	}
}

func testTableWatch(t *testing.T, scenario, kind, namespace string) {
	wt := filepath.Join(t.TempDir(), "tw.wt")
	if _, stderr, code := wtrace(t, "record", "--pcap", filepath.Join(corpus(scenario), "capture.pcap"), "-o", wt); code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	wttest.CheckNoSecrets(t, wt)
	truth := readTruthLines(t, scenario)
	byHash := map[string]truthLine{}
	for _, l := range truth {
		byHash[l.EventSHA256] = l
	}
	stdout, _, code := wtrace(t, "events", wt)
	evs := parseEvents(t, stdout)
	if code != 0 || len(evs) != len(truth) {
		t.Fatalf("events: exit %d, %d events; want %d", code, len(evs), len(truth))
	}
	for _, e := range evs {
		w, ok := byHash[e.SHA256]
		if !ok || e.Kind != kind || e.Kind != w.Kind || e.Namespace != w.Namespace || e.Name != w.Name || e.ResourceVersion != w.ResourceVersion || e.Name == "" && e.Type != "BOOKMARK" {
			t.Fatalf("event %+v; truth %+v", e, w)
		}
	}
	name := truth[len(truth)/2].Name
	stdout, _, _ = wtrace(t, "events", wt, "--namespace", namespace, "--name", name, "--kind", kind)
	got := parseEvents(t, stdout)
	want := 0
	for _, l := range truth {
		if l.Name == name {
			want++
		}
	}
	if len(got) != want || want == 0 {
		t.Errorf("events --name %s: %d events; want %d", name, len(got), want)
	}
	for _, l := range got {
		if l.Name != name {
			t.Errorf("filter let through %+v", l)
		}
	}
	if stdout, _, _ = wtrace(t, "events", wt, "--namespace", "elsewhere"); stdout != "" {
		t.Errorf("events --namespace elsewhere: %q", stdout)
	}
	stdout, _, _ = wtrace(t, "inspect", wt)
	if !strings.Contains(stdout, kind+" "+namespace+"/") {
		t.Errorf("inspect names no %s object:\n%s", kind, stdout)
	}
}
