package world_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/testkit/wttest"
)

const (
	coreEvents   = "/api/v1/namespaces/vs/events"
	eventsEvents = "/apis/events.k8s.io/v1/namespaces/vs/events"
	hpaV1        = "/apis/autoscaling/v1/namespaces/vs/horizontalpodautoscalers"
	hpaV2        = "/apis/autoscaling/v2/namespaces/vs/horizontalpodautoscalers"
)

// versionsStore loads a session that LISTed both versions of the Events
// and of the HPAs at one resourceVersion: the same objects, each list in
// its own version.
func versionsStore(t *testing.T) *world.Store {
	t.Helper()
	lists := [][2]string{
		{coreEvents, `{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"20"},"items":[` +
			`{"metadata":{"name":"seed","namespace":"vs","uid":"u-1","resourceVersion":"10","creationTimestamp":"2026-12-01T10:00:00Z"},` +
			`"involvedObject":{"kind":"Pod","namespace":"vs","name":"p"},"reason":"Checked","message":"m","source":{"component":"wcf"},` +
			`"firstTimestamp":null,"lastTimestamp":null,"type":"Normal","eventTime":null,"reportingComponent":"","reportingInstance":""}]}`},
		{eventsEvents, `{"kind":"EventList","apiVersion":"events.k8s.io/v1","metadata":{"resourceVersion":"20"},"items":[` +
			`{"metadata":{"name":"seed","namespace":"vs","uid":"u-1","resourceVersion":"10","creationTimestamp":"2026-12-01T10:00:00Z"},` +
			`"eventTime":null,"reason":"Checked","regarding":{"kind":"Pod","namespace":"vs","name":"p"},"note":"m","type":"Normal",` +
			`"deprecatedSource":{"component":"wcf"},"deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null}]}`},
		{hpaV2, `{"kind":"HorizontalPodAutoscalerList","apiVersion":"autoscaling/v2","metadata":{"resourceVersion":"20"},"items":[` +
			`{"metadata":{"name":"seed","namespace":"vs","uid":"u-2","resourceVersion":"11","creationTimestamp":"2026-12-01T10:00:00Z"},` +
			`"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d","apiVersion":"apps/v1"},"minReplicas":1,"maxReplicas":3,` +
			`"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50}}}]},` +
			`"status":{"currentReplicas":0,"desiredReplicas":0}}]}`},
		{hpaV1, `{"kind":"HorizontalPodAutoscalerList","apiVersion":"autoscaling/v1","metadata":{"resourceVersion":"20"},"items":[` +
			`{"metadata":{"name":"seed","namespace":"vs","uid":"u-2","resourceVersion":"11","creationTimestamp":"2026-12-01T10:00:00Z"},` +
			`"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d","apiVersion":"apps/v1"},"minReplicas":1,"maxReplicas":3,` +
			`"targetCPUUtilizationPercentage":50},"status":{"currentReplicas":0,"desiredReplicas":0}}]}`},
	}
	st, err := world.Load(wttest.OpenSession(t, writeListSession(t, lists)), world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// listed is a LIST's items: apiVersion, name and the object.
type listed struct {
	APIVersion string `json:"apiVersion"`
	Items      []map[string]any
}

func listOf(t *testing.T, st *world.Store, path, query string) listed {
	t.Helper()
	r := do(t, st, "GET", path, query, nil, "")
	if r.Code != 200 {
		t.Fatalf("LIST %s?%s: %d %s", path, query, r.Code, r.Body)
	}
	var l listed
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func names(l listed) string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it["metadata"].(map[string]any)["name"].(string))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// TestVersionsShareStorage writes Events and HPAs through each version
// and reads them through the other: one object each, listed once by both
// (the recorded LISTs of both versions do not double it), in the version
// asked for.
func TestVersionsShareStorage(t *testing.T) {
	st := versionsStore(t)
	for _, w := range []struct{ path, body string }{
		{coreEvents, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"core"},"involvedObject":{"kind":"Pod","namespace":"vs","name":"p"},"reason":"R","message":"from core","type":"Normal","source":{"component":"c"}}`},
		{eventsEvents, `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"new"},"eventTime":"2026-12-01T10:00:00.000000Z","reportingController":"example.com/c","reportingInstance":"i","action":"A","reason":"R","type":"Normal","regarding":{"kind":"Pod","namespace":"vs","name":"q"},"note":"from events"}`},
		{hpaV1, `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"one"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3,"targetCPUUtilizationPercentage":40}}`},
		{hpaV2, `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"two"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3,"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"100Mi"}}}]}}`},
	} {
		if r := do(t, st, "POST", w.path, "", jsonHeader(), w.body); r.Code != 201 {
			t.Fatalf("POST %s: %d %s", w.path, r.Code, r.Body)
		}
	}
	for _, tc := range []struct{ path, apiVersion, names string }{
		{coreEvents, "v1", "core,new,seed"},
		{eventsEvents, "events.k8s.io/v1", "core,new,seed"},
		{hpaV1, "autoscaling/v1", "one,seed,two"},
		{hpaV2, "autoscaling/v2", "one,seed,two"},
	} {
		l := listOf(t, st, tc.path, "")
		if got := names(l); got != tc.names {
			t.Errorf("%s lists %s, want %s", tc.path, got, tc.names)
		}
		for _, it := range l.Items {
			if v, ok := it["apiVersion"]; ok && v != tc.apiVersion {
				t.Errorf("%s: an item of %v", tc.path, v)
			}
		}
	}
	get := func(path string) map[string]any {
		t.Helper()
		r := do(t, st, "GET", path, "", nil, "")
		if r.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Code, r.Body)
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if ev := get(eventsEvents + "/core"); ev["note"] != "from core" || ev["apiVersion"] != "events.k8s.io/v1" {
		t.Errorf("core's Event through events.k8s.io: %v", ev)
	}
	if ev := get(coreEvents + "/new"); ev["message"] != "from events" || ev["reportingComponent"] != "example.com/c" {
		t.Errorf("events.k8s.io's Event through core: %v", ev)
	}
	one := get(hpaV2 + "/one")
	if m := mustString(t, one["spec"].(map[string]any)["metrics"]); !strings.Contains(m, `"averageUtilization":40`) {
		t.Errorf("v1's HPA through v2: metrics %s", m)
	}
	two := get(hpaV1 + "/two")
	ann, _ := two["metadata"].(map[string]any)["annotations"].(map[string]any)
	if a, _ := ann["autoscaling.alpha.kubernetes.io/metrics"].(string); !strings.Contains(a, `"targetAverageValue":"100Mi"`) {
		t.Errorf("v2's HPA through v1: annotations %v", ann)
	}
	if u1, u2 := one["metadata"].(map[string]any)["uid"], get(hpaV1 + "/one")["metadata"].(map[string]any)["uid"]; u1 != u2 {
		t.Errorf("uids %v and %v", u1, u2)
	}

	// An update through v2 of v1's HPA: managedFields keep each writer's
	// apiVersion.
	up := `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"one","labels":{"l":"1"}},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":5,"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":40}}}]}}`
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"other/v1"}}
	if r := do(t, st, "PUT", hpaV2+"/one", "", h, up); r.Code != 200 {
		t.Fatalf("PUT v2: %d %s", r.Code, r.Body)
	}
	v1 := get(hpaV1 + "/one")
	if v1["spec"].(map[string]any)["maxReplicas"] != float64(5) {
		t.Errorf("v1 after v2's update: %v", v1["spec"])
	}
	var versions []string
	for _, e := range v1["metadata"].(map[string]any)["managedFields"].([]any) {
		versions = append(versions, e.(map[string]any)["apiVersion"].(string))
	}
	sort.Strings(versions)
	if strings.Join(versions, ",") != "autoscaling/v1,autoscaling/v2" {
		t.Errorf("managedFields versions %v", versions)
	}

	// A delete-collection through one version deletes the other's objects.
	if r := do(t, st, "DELETE", eventsEvents, "", nil, ""); r.Code != 200 {
		t.Fatalf("DELETE collection: %d %s", r.Code, r.Body)
	}
	if got := names(listOf(t, st, coreEvents, "")); got != "" {
		t.Errorf("core lists %s after events.k8s.io's delete-collection", got)
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVersionsWatch watches each version and writes through the other:
// each watch sees the other's writes, in its own version.
func TestVersionsWatch(t *testing.T) {
	st := versionsStore(t)
	watch := func(path string) *world.Watch {
		t.Helper()
		w, refused := st.Watch(&world.Request{Method: "GET", Path: path,
			Query: url.Values{"watch": {"1"}, "resourceVersion": {st.Point()}}, Header: http.Header{}})
		if refused != nil {
			t.Fatalf("watch %s refused: %d %s", path, refused.Code, refused.Body)
		}
		return w
	}
	we, wc := watch(eventsEvents), watch(hpaV1)
	if r := do(t, st, "POST", coreEvents, "", jsonHeader(), `{"apiVersion":"v1","kind":"Event","metadata":{"name":"w"},"involvedObject":{"kind":"Pod","namespace":"vs","name":"p"},"reason":"R","message":"hi","type":"Normal","source":{"component":"c"}}`); r.Code != 201 {
		t.Fatalf("POST: %d %s", r.Code, r.Body)
	}
	if r := do(t, st, "POST", hpaV2, "", jsonHeader(), `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"w"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3}}`); r.Code != 201 {
		t.Fatalf("POST: %d %s", r.Code, r.Body)
	}
	for _, tc := range []struct {
		w    *world.Watch
		want []string
	}{
		{we, []string{`"apiVersion":"events.k8s.io/v1"`, `"note":"hi"`}},
		{wc, []string{`"apiVersion":"autoscaling/v1"`, `"targetCPUUtilizationPercentage":80`}},
	} {
		ev, ok := tc.w.Next()
		if !ok {
			t.Fatal("no event")
		}
		b, err := tc.w.Take(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(tc.want, `"type":"ADDED"`) {
			if !strings.Contains(string(b), s) {
				t.Errorf("event %s: no %s", b, s)
			}
		}
	}
}

// TestEventsFieldSelectors selects events.k8s.io Events by its own field
// labels (regarding.*, reportingController), as the apiserver's label
// conversion maps them onto core's fields, and refuses core's.
func TestEventsFieldSelectors(t *testing.T) {
	st := versionsStore(t)
	for _, tc := range []struct {
		path, selector string
		code           int
		names          string
	}{
		{eventsEvents, "regarding.name=p", 200, "seed"},
		{eventsEvents, "regarding.name=x", 200, ""},
		{eventsEvents, "reason=Checked,type=Normal", 200, "seed"},
		{eventsEvents, "reportingController=", 200, "seed"},
		{eventsEvents, "involvedObject.name=p", 400, ""},
		{eventsEvents, "source=wcf", 400, ""},
		{coreEvents, "involvedObject.name=p", 200, "seed"},
		{coreEvents, "source=wcf", 200, "seed"},
		{coreEvents, "regarding.name=p", 400, ""},
	} {
		r := do(t, st, "GET", tc.path, "fieldSelector="+url.QueryEscape(tc.selector), nil, "")
		if r.Code != tc.code {
			t.Errorf("%s %s: %d %s", tc.path, tc.selector, r.Code, r.Body)
			continue
		}
		if r.Code == 400 {
			if want := "field label not supported: " + strings.SplitN(tc.selector, "=", 2)[0]; !strings.Contains(string(r.Body), want) {
				t.Errorf("%s %s: %s, want %q", tc.path, tc.selector, r.Body, want)
			}
			continue
		}
		var l listed
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		if got := names(l); got != tc.names {
			t.Errorf("%s %s: %s, want %s", tc.path, tc.selector, got, tc.names)
		}
	}
}

// TestEventsStorageKind fails a delete precondition and a create of an
// events.k8s.io Event: the registry's BeforeDelete and BeforeCreate name
// the storage's kind, core's Event, with no group.
func TestEventsStorageKind(t *testing.T) {
	st := versionsStore(t)
	r := do(t, st, "DELETE", eventsEvents+"/seed", "", jsonHeader(), `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`)
	if r.Code != 409 || !strings.Contains(string(r.Body), `Operation cannot be fulfilled on Event \"seed\"`) || strings.Contains(string(r.Body), `"group"`) {
		t.Errorf("precondition: %d %s", r.Code, r.Body)
	}
	r = do(t, st, "POST", eventsEvents, "", jsonHeader(), `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{}}`)
	if r.Code != 422 || !strings.Contains(string(r.Body), `Event \"\" is invalid`) || strings.Contains(string(r.Body), `"group"`) {
		t.Errorf("no name: %d %s", r.Code, r.Body)
	}
}

// TestVersionsApply writes through one group an Event another group's
// manager wrote: the apiserver's field manager cannot convert between the
// groups (it converts through the request group's internal version), so
// the other group's entries are dropped and nothing conflicts; within a
// group (autoscaling) both versions' entries stay (TestVersionsShareStorage).
func TestVersionsApply(t *testing.T) {
	st := versionsStore(t)
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"events-writer/v1"}}
	if r := do(t, st, "POST", eventsEvents, "", h, `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"x"},"eventTime":"2026-12-01T10:00:00.000000Z","reportingController":"example.com/c","reportingInstance":"i","action":"A","reason":"R","type":"Normal","regarding":{"kind":"Pod","namespace":"vs","name":"q"},"note":"events'"}`); r.Code != 201 {
		t.Fatalf("POST: %d %s", r.Code, r.Body)
	}
	apply := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"x"},"message":"applied"}`
	r := do(t, st, "PATCH", coreEvents+"/x", "fieldManager=applier", http.Header{"Content-Type": {"application/apply-patch+yaml"}}, apply)
	if r.Code != 200 {
		t.Fatalf("apply: %d %s", r.Code, r.Body)
	}
	var ev struct {
		Message  string
		Metadata struct {
			ManagedFields []struct{ Manager, APIVersion string }
		}
	}
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		t.Fatal(err)
	}
	if mf := ev.Metadata.ManagedFields; ev.Message != "applied" || len(mf) != 1 || mf[0].Manager != "applier" || mf[0].APIVersion != "v1" {
		t.Errorf("message %q, managedFields %+v", ev.Message, mf)
	}
	if got := do(t, st, "GET", eventsEvents+"/x", "", nil, ""); !strings.Contains(string(got.Body), `"note":"applied"`) {
		t.Errorf("events.k8s.io reads %s", got.Body)
	}
}

// TestVersionsRecordedAsRecorded GETs the objects the session LISTed in
// both versions through each: each version is served as recorded, not
// converted from the other.
func TestVersionsRecordedAsRecorded(t *testing.T) {
	st := versionsStore(t)
	for _, p := range []string{coreEvents, eventsEvents, hpaV1, hpaV2} {
		r := do(t, st, "GET", p+"/seed", "", nil, "")
		if r.Code != 200 || r.Transcoded {
			t.Errorf("GET %s/seed: %d, transcoded %v: %s", p, r.Code, r.Transcoded, r.Body)
		}
	}
}
