package world_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// sessionExchange is one exchange of a session written by writeExchanges:
// its request at Time, its response head Head after it, its frames (watch
// events) or body at the times given, its end after the last of them.
type sessionExchange struct {
	Method, Target string
	Time           int64
	Status         int
	Body           []byte // an opaque response body, at Time+Head
	Head           int64  // ns after Time (default 1 ms)
	Frames         []timedFrame
}

type timedFrame struct {
	Time int64
	Data []byte
}

// writeExchanges writes a session recorded through the proxy (every
// client under test) holding exs, each on a connection of its own, and
// returns its path. Records go out in time order, as a recorder writes
// them.
func writeExchanges(t testing.TB, exs ...sessionExchange) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.wt")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type timed struct {
		at int64
		r  formats.Record
	}
	var recs []timed
	jsonCT := []formats.Header{{Name: "Content-Type", Value: "application/json"}}
	for i, x := range exs {
		id := int64(i)
		head := x.Head
		if head == 0 {
			head = int64(time.Millisecond)
		}
		status := x.Status
		if status == 0 {
			status = 200
		}
		resp := &formats.Response{Exchange: id, Time: x.Time + head, Proto: "HTTP/1.1", Status: status, Header: jsonCT}
		end := x.Time + head
		recs = append(recs,
			timed{x.Time, &formats.Conn{ID: uint64(i), Time: x.Time, Client: fmt.Sprintf("127.0.0.1:%d", 50000+i), Server: "127.0.0.1:6443", Proto: "http/1.1"}},
			timed{x.Time, &formats.Request{Exchange: id, Conn: uint64(i), Time: x.Time, Method: x.Method, Target: x.Target, Proto: "HTTP/1.1",
				Header: []formats.Header{{Name: "User-Agent", Value: "kube-scheduler/v1.33.13"}}}},
			timed{x.Time, &formats.End{Exchange: id, Dir: formats.ClientToServer, Time: x.Time}})
		var size int64
		if len(x.Frames) > 0 {
			resp.Events, resp.Framing = frame.JSON, formats.FramingChunked
			for j, fr := range x.Frames {
				recs = append(recs, timed{fr.Time, &formats.Frame{Exchange: id, Seq: int64(j), Time: fr.Time, Offset: size, Data: fr.Data}})
				size += int64(len(fr.Data))
				end = max(end, fr.Time)
			}
		} else if len(x.Body) > 0 {
			resp.Framing = formats.FramingLength
			recs = append(recs, timed{x.Time + head, &formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: x.Time + head, Data: x.Body}})
			size = int64(len(x.Body))
		}
		recs = append(recs, timed{x.Time + head, resp},
			timed{end + 1, &formats.End{Exchange: id, Dir: formats.ServerToClient, Time: end + 1, Size: size}})
	}
	// Stable by time: a response head before its frames, the request before both.
	for i := 1; i < len(recs); i++ {
		for j := i; j > 0 && recs[j].at < recs[j-1].at; j-- {
			recs[j], recs[j-1] = recs[j-1], recs[j]
		}
	}
	must := func(r formats.Record) {
		t.Helper()
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	must(&formats.Meta{Tool: "wtrace test", Source: formats.SourceProxy})
	for _, r := range recs {
		must(r.r)
	}
	must(&formats.Summary{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// podJSON is a Pod at resourceVersion rv, bound to node (none: "").
func podJSON(name string, rv int, node string) string {
	spec := `{"containers":[{"name":"c","image":"pause"}]}`
	if node != "" {
		spec = `{"containers":[{"name":"c","image":"pause"}],"nodeName":"` + node + `"}`
	}
	return fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":"%d"},"spec":%s}`,
		name, name, rv, spec)
}

func watchEvent(typ, obj string) []byte {
	return []byte(`{"type":"` + typ + `","object":` + obj + "}\n")
}

// TestEnvironmentCreateBeforeBinding: kube-scheduler's binding of a Pod
// that kubectl created is stamped (its request, on the scheduler's own
// connection) a few hundred nanoseconds before the recording's ADDED of
// that Pod (the frame of the scheduler's watch that carried it): the
// recorder's clocks of two connections disagree by that much, 2 of 11
// real scheduler recordings have it. The Pod's creation is still the
// environment's — a binding cannot create a Pod — and its binding the
// scheduler's behaviour: the ADDED is applied, the bound version left
// out, and the Pod exists in the run's world.
func TestEnvironmentCreateBeforeBinding(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixNano()
	status := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}`)
	for _, tc := range []struct {
		name    string
		binding int64 // the binding's request, ns after the ADDED's frame (negative: before it)
	}{
		{"binding stamped before the ADDED", -400},
		{"binding stamped after the ADDED", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added := at + int64(10*time.Millisecond)
			path := writeExchanges(t,
				sessionExchange{Method: "GET", Target: "/api/v1/pods?limit=500&resourceVersion=0", Time: at, Body: []byte(
					`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)},
				sessionExchange{Method: "GET", Target: "/api/v1/pods?allowWatchBookmarks=true&resourceVersion=5&watch=true", Time: at + 2e6, Frames: []timedFrame{
					{added, watchEvent("ADDED", podJSON("p", 10, ""))},
					{added + 2e6, watchEvent("MODIFIED", podJSON("p", 11, "n1"))},
				}},
				sessionExchange{Method: "POST", Target: "/api/v1/namespaces/ns/pods/p/binding", Time: added + tc.binding, Head: 1e6, Status: 201, Body: status},
			)
			st, err := world.Load(wttest.OpenSession(t, path), world.Options{Live: true})
			if err != nil {
				t.Fatal(err)
			}
			env := st.Environment()
			if len(env.Changes) != 1 || env.Changes[0].Type != world.Added || env.Changes[0].RV != "10" || env.Behaviour != 1 {
				var got []string
				for _, c := range env.Changes {
					got = append(got, fmt.Sprintf("%s %s rv %s", c.Type, c.Key, c.RV))
				}
				t.Fatalf("environment changes %v, behaviour %d; want the ADDED at 10 alone, the bound version (11) the scheduler's", got, env.Behaviour)
			}
			for {
				a, ok := st.ApplyNext()
				if !ok {
					break
				}
				if a.Outcome == world.AppliedDropped {
					t.Fatalf("environment change dropped: %s %s: %s", a.Type, a.Key, a.Reason)
				}
			}
			st.ObserveN(1 << 62)
			r := do(t, st, "GET", "/api/v1/namespaces/ns/pods/p", "", nil, "")
			if r.Code != 200 || strings.Contains(string(r.Body), "nodeName") {
				t.Errorf("GET the Pod after the environment = %d %s; want it, unbound (binding it is the scheduler's part)", r.Code, clip(r.Body))
			}
		})
	}
}

// dsPod is a DaemonSet's Pod for node, as the DaemonSet controller
// creates it (a required node affinity naming the node), with its status
// phase if not "".
func dsPod(name string, rv int, node, phase string) string {
	meta := `"generateName":"agent-","namespace":"ns","ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"agent","uid":"ds-uid","controller":true}]`
	if name != "" {
		meta += fmt.Sprintf(`,"name":%q,"uid":"uid-%s","resourceVersion":"%d"`, name, name, rv)
	}
	status := ""
	if phase != "" {
		status = `,"status":{"phase":"` + phase + `"}`
	}
	return `{"kind":"Pod","apiVersion":"v1","metadata":{` + meta + `},"spec":{"containers":[{"name":"c","image":"pause"}],` +
		`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":` +
		`[{"key":"metadata.name","operator":"In","values":["` + node + `"]}]}]}}}}` + status + `}`
}

// TestEnvironmentPairsByNode: a DaemonSet's Pods are paired with the
// run's by their node, not by the order they were created in: the
// recorded controller created n1's Pod first, the run's creates n2's
// first, and the kubelet's change to the recorded n1 Pod lands on the
// run's n1 Pod.
func TestEnvironmentPairsByNode(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixNano()
	ms := int64(time.Millisecond)
	path := writeExchanges(t,
		sessionExchange{Method: "GET", Target: "/api/v1/namespaces/ns/pods?resourceVersion=0", Time: at, Body: []byte(
			`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)},
		sessionExchange{Method: "GET", Target: "/api/v1/namespaces/ns/pods?resourceVersion=5&watch=true", Time: at + 2*ms, Frames: []timedFrame{
			{at + 11*ms, watchEvent("ADDED", dsPod("agent-aaaaa", 10, "n1", ""))},
			{at + 21*ms, watchEvent("ADDED", dsPod("agent-bbbbb", 11, "n2", ""))},
			{at + 40*ms, watchEvent("MODIFIED", dsPod("agent-aaaaa", 12, "n1", "Running"))},
		}},
		sessionExchange{Method: "POST", Target: "/api/v1/namespaces/ns/pods", Time: at + 10*ms, Status: 201, Body: []byte(dsPod("agent-aaaaa", 10, "n1", ""))},
		sessionExchange{Method: "POST", Target: "/api/v1/namespaces/ns/pods", Time: at + 20*ms, Status: 201, Body: []byte(dsPod("agent-bbbbb", 11, "n2", ""))},
	)
	st, err := world.Load(wttest.OpenSession(t, path), world.Options{Live: true})
	if err != nil {
		t.Fatal(err)
	}
	st.ObserveN(1 << 62)
	h := http.Header{"Content-Type": {"application/json"}}
	names := map[string]string{}
	// The recording shows both creates before the kubelet's change: the
	// run is 2 writes behind, then 1, then none.
	if n := st.WritesBehind(); n != 2 {
		t.Errorf("WritesBehind before the run's creates = %d; want 2", n)
	}
	for i, node := range []string{"n2", "n1"} {
		if n := st.WritesBehind(); n != 2-i {
			t.Errorf("WritesBehind after %d creates = %d; want %d", i, n, 2-i)
		}
		r := do(t, st, "POST", "/api/v1/namespaces/ns/pods", "", h, dsPod("", 0, node, ""))
		if r.Code != 201 {
			t.Fatalf("create the Pod of %s: %d %s", node, r.Code, clip(r.Body))
		}
		var p struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		names[node] = p.Metadata.Name
	}
	if n := st.WritesBehind(); n != 0 {
		t.Errorf("WritesBehind after the run's creates = %d; want 0", n)
	}
	env := st.Environment()
	if len(env.Changes) != 1 {
		t.Fatalf("%d environment changes; want the kubelet's one", len(env.Changes))
	}
	a, _ := st.ApplyNext()
	if a.Outcome == world.AppliedDropped || a.Key.Name != names["n1"] {
		t.Fatalf("the kubelet's change of the recorded n1 Pod: %s to %s (%s); want it on the run's n1 Pod %s (n2's: %s)",
			a.Outcome, a.Key, a.Reason, names["n1"], names["n2"])
	}
	for node, want := range map[string]bool{"n1": true, "n2": false} {
		r := do(t, st, "GET", "/api/v1/namespaces/ns/pods/"+names[node], "", nil, "")
		if got := strings.Contains(string(r.Body), `"Running"`); got != want {
			t.Errorf("the run's Pod of %s running: %v; want %v (%s)", node, got, want, clip(r.Body))
		}
	}
}

// TestPodEnvFieldRefDefault: an env var's fieldRef without apiVersion
// (the job controller's JOB_COMPLETION_INDEX of an indexed Job's Pod)
// gets "v1", as kube-apiserver's SetDefaults_ObjectFieldSelector gives it.
func TestPodEnvFieldRefDefault(t *testing.T) {
	st, _ := load(t, "basic-json")
	st.ObserveN(1 << 62)
	h := http.Header{"Content-Type": {"application/json"}}
	r := do(t, st, "POST", "/api/v1/namespaces/corpus-basic/pods", "", h, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},`+
		`"spec":{"containers":[{"name":"c","image":"pause","env":[{"name":"I","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}]}}`)
	if r.Code != 201 || !strings.Contains(string(r.Body), `"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}`) {
		t.Errorf("create = %d %s; want the fieldRef's apiVersion v1", r.Code, clip(r.Body))
	}
}

// cmJSON is a ConfigMap of namespace ns labelled app=app.
func cmJSON(name, uid string, rv int, app string) string {
	return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d","labels":{"app":%q}}}`,
		name, uid, rv, app)
}

// TestLabelSelectedDeletion: a client that lists and watches ConfigMaps
// by label (app=x) sees a DELETED for each one that goes, and for each
// one that leaves its selector; kube-apiserver's watch sends both with
// the object as it was last in scope, so the event cannot tell. The
// rest of the session does: an object it shows again with the same uid
// only left the selector's scope (cm-b: back with app=x later); one it
// never shows again, or shows recreated with another uid (cm-c), was
// deleted. The deletions are the environment's changes: the run's world
// loses the object.
func TestLabelSelectedDeletion(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixNano()
	const coll = "/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dx"
	path := writeExchanges(t,
		sessionExchange{Method: "GET", Target: coll + "&limit=500&resourceVersion=0", Time: at, Body: []byte(
			`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"11"},"items":[` +
				cmJSON("cm-a", "uid-a", 10, "x") + "," + cmJSON("cm-b", "uid-b", 11, "x") + "," + cmJSON("cm-c", "uid-c", 8, "x") + `]}`)},
		sessionExchange{Method: "GET", Target: coll + "&allowWatchBookmarks=true&resourceVersion=11&watch=true", Time: at + 2e6, Frames: []timedFrame{
			{at + 10e6, watchEvent("DELETED", cmJSON("cm-a", "uid-a", 12, "x"))},
			{at + 20e6, watchEvent("DELETED", cmJSON("cm-b", "uid-b", 13, "x"))},
			{at + 30e6, watchEvent("DELETED", cmJSON("cm-c", "uid-c", 14, "x"))},
			{at + 40e6, watchEvent("ADDED", cmJSON("cm-b", "uid-b", 15, "x"))},
			{at + 50e6, watchEvent("ADDED", cmJSON("cm-c", "uid-c2", 16, "x"))},
		}},
	)
	st, err := world.Load(wttest.OpenSession(t, path), world.Options{Live: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range st.Environment().Changes {
		got = append(got, fmt.Sprintf("%s %s@%s", c.Type, c.Key.Name, c.RV))
	}
	if want := "DELETED cm-a@12 DELETED cm-c@14 ADDED cm-b@15 ADDED cm-c@16"; strings.Join(got, " ") != want {
		t.Errorf("environment changes %q, want %q", strings.Join(got, " "), want)
	}
	for {
		a, ok := st.ApplyNext()
		if !ok {
			break
		}
		if a.Outcome == world.AppliedDropped {
			t.Errorf("environment change dropped: %s %s: %s", a.Type, a.Key, a.Reason)
		}
	}
	st.ObserveN(1 << 62)
	for name, want := range map[string]string{"cm-a": "", "cm-b": "uid-b", "cm-c": "uid-c2"} {
		r := do(t, st, "GET", "/api/v1/namespaces/ns/configmaps/"+name, "", nil, "")
		switch {
		case want == "" && r.Code != http.StatusNotFound:
			t.Errorf("GET %s after the environment = %d %s; want 404 (deleted)", name, r.Code, clip(r.Body))
		case want != "" && (r.Code != http.StatusOK || !strings.Contains(string(r.Body), want)):
			t.Errorf("GET %s after the environment = %d %s; want it, uid %s", name, r.Code, clip(r.Body), want)
		}
	}
}
