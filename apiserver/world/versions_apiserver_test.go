package world_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// versionSteps write Events and HPAs through one version and read them
// through the other: the conversions' work (v1's annotations, the
// internal behavior's JSON, the storage's defaults, the field manager's
// conflicts across versions) as a real kube-apiserver shows it.
var versionSteps = []compareStep{
	{name: "v1 HPA", method: "POST", path: hpaV1, contentType: jsonCT, body: `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"one","annotations":{"autoscaling.alpha.kubernetes.io/behavior":"{\"ScaleUp\":{\"StabilizationWindowSeconds\":30,\"Policies\":[{\"Type\":\"Pods\",\"Value\":2,\"PeriodSeconds\":60}]}}"}},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3,"targetCPUUtilizationPercentage":50}}`},
	{name: "v1 HPA as v2", method: "GET", path: hpaV2 + "/one"},
	{name: "v1 HPA without target", method: "POST", path: hpaV1, contentType: jsonCT, body: `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"bare"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3}}`},
	{name: "bare as v2", method: "GET", path: hpaV2 + "/bare"},
	{name: "v2 HPA", method: "POST", path: hpaV2, contentType: jsonCT, body: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"two"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3,` +
		`"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"100Mi"}}},{"type":"Pods","pods":{"metric":{"name":"qps"},"target":{"type":"AverageValue","averageValue":"10"}}},{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":60}}}],` +
		`"behavior":{"scaleDown":{"stabilizationWindowSeconds":60,"policies":[{"type":"Pods","value":1,"periodSeconds":30}]}}}}`},
	{name: "v2 HPA as v1", method: "GET", path: hpaV1 + "/two"},
	{name: "v2 status", method: "PATCH", path: hpaV2 + "/two/status", contentType: mergeCT, body: `{"status":{"currentReplicas":1,"desiredReplicas":2,` +
		`"currentMetrics":[{"type":"Resource","resource":{"name":"cpu","current":{"averageUtilization":40,"averageValue":"20m"}}}],` +
		`"conditions":[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-12-01T10:00:00Z","reason":"ReadyForNewScale","message":"ok"}]}}`},
	{name: "status as v1", method: "GET", path: hpaV1 + "/two"},
	{name: "v1 merge patch", method: "PATCH", path: hpaV1 + "/two", contentType: mergeCT, body: `{"spec":{"maxReplicas":7}}`},
	{name: "patched as v2", method: "GET", path: hpaV2 + "/two"},
	{name: "v1 list", method: "GET", path: hpaV1},
	{name: "v2 table", method: "GET", path: hpaV2, accept: tblAcc},
	{name: "core Event", method: "POST", path: coreEvents, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"c1"},"involvedObject":{"kind":"Pod","namespace":"vs","name":"p"},"reason":"R","message":"from core","type":"Normal","source":{"component":"c","host":"h"},"count":2,"firstTimestamp":"2026-12-01T10:00:00Z","lastTimestamp":"2026-12-01T10:01:00Z"}`},
	{name: "core Event as events.k8s.io", method: "GET", path: eventsEvents + "/c1"},
	{name: "events.k8s.io Event", method: "POST", path: eventsEvents, contentType: jsonCT, body: `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e1"},"eventTime":"2026-12-01T10:00:00.000000Z","series":{"count":2,"lastObservedTime":"2026-12-01T10:02:00.000000Z"},"reportingController":"example.com/c","reportingInstance":"i","action":"A","reason":"R","type":"Normal","regarding":{"kind":"Pod","namespace":"vs","name":"q"},"related":{"kind":"Node","name":"n"},"note":"from events"}`},
	{name: "events.k8s.io Event as core", method: "GET", path: coreEvents + "/e1"},
	// (Core's v1 validates updates leniently: events.k8s.io's would refuse
	// to change the note at all.)
	{name: "apply over events.k8s.io's", method: "PATCH", path: coreEvents + "/e1", query: "fieldManager=applier", contentType: applyCT, body: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1"},"message":"applied"}`},
	{name: "forced apply over events.k8s.io's", method: "PATCH", path: coreEvents + "/e1", query: "fieldManager=applier&force=true", contentType: applyCT, body: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1"},"message":"applied"}`},
	{name: "applied as events.k8s.io", method: "GET", path: eventsEvents + "/e1"},
	{name: "core list", method: "GET", path: coreEvents},
	{name: "events.k8s.io regarding.name", method: "GET", path: eventsEvents, query: "fieldSelector=regarding.name%3Dq"},
	{name: "events.k8s.io reportingController", method: "GET", path: eventsEvents, query: "fieldSelector=reportingController%3Dexample.com%2Fc"},
	{name: "events.k8s.io involvedObject.name", method: "GET", path: eventsEvents, query: "fieldSelector=involvedObject.name%3Dq"},
	{name: "core source", method: "GET", path: coreEvents, query: "fieldSelector=source%3Dexample.com%2Fc"},
	{name: "events.k8s.io table", method: "GET", path: eventsEvents, accept: tblAcc},
	{name: "events.k8s.io precondition", method: "DELETE", path: eventsEvents + "/c1", contentType: jsonCT, body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`},
	{name: "events.k8s.io delete core's", method: "DELETE", path: eventsEvents + "/c1"},
	{name: "v2 delete-collection", method: "DELETE", path: hpaV2},
	{name: "v1 list after", method: "GET", path: hpaV1},
}

// TestVersionsAgainstAPIServer makes versionSteps on a real kube-apiserver
// and on a Store loaded from its LISTs, and compares the answers
// normalized as TestAgainstAPIServer compares them; then the watches of
// versionsWatch.
func TestVersionsAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	hdr := http.Header{"Content-Type": {jsonCT}, "User-Agent": {"wtrace-compare/1.0"}}
	if resp, b := c.Do("POST", "/api/v1/namespaces", hdr, []byte(`{"metadata":{"name":"vs"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create namespace: %d %s", resp.StatusCode, b)
	}
	var lists [][2]string
	for _, p := range []string{coreEvents, eventsEvents, hpaV1, hpaV2, "/api/v1/namespaces"} {
		resp, b := c.Do("GET", p, http.Header{"Accept": {jsonCT}}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("LIST %s: %d %s", p, resp.StatusCode, b)
		}
		lists = append(lists, [2]string{p, string(b)})
	}
	st, err := world.Load(wttest.OpenSession(t, writeListSession(t, lists)), world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer t.Run("watch", func(t *testing.T) { versionsWatch(t, c) })
	real, mine := newSide(), newSide()
	for _, s := range versionSteps {
		t.Run(s.name, func(t *testing.T) {
			h := http.Header{"User-Agent": {"wtrace-compare/1.0"}}
			if s.contentType != "" {
				h.Set("Content-Type", s.contentType)
			}
			if s.accept != "" {
				h.Set("Accept", s.accept)
			}
			resp, gotReal := c.Do(s.method, s.path+"?"+s.query, h, []byte(real.body(s.body)))
			q, _ := url.ParseQuery(s.query)
			r, ok := st.Serve(&world.Request{Method: s.method, Path: s.path, Query: q, Header: h, Body: []byte(mine.body(s.body))})
			if !ok {
				t.Fatalf("the store does not serve %s %s", s.method, s.path)
			}
			if r.Code != resp.StatusCode {
				t.Errorf("status %d; the apiserver answered %d\nmine: %s\nreal: %s", r.Code, resp.StatusCode, r.Body, gotReal)
			}
			sameBody(t, real, mine, s.skip, resp.Header.Get("Content-Type"), gotReal, r)
		})
	}
}

// versionWatchWrites write through one version of each storage while
// watches of the other are open.
var versionWatchWrites = []compareStep{
	{method: "POST", path: coreEvents, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"w1"},"involvedObject":{"kind":"Pod","namespace":"vs","name":"p"},"reason":"R","message":"m","type":"Normal","source":{"component":"c"}}`},
	{method: "PATCH", path: coreEvents + "/w1", contentType: mergeCT, body: `{"count":3,"metadata":{"labels":{"l":"1"}}}`},
	{method: "DELETE", path: coreEvents + "/w1"},
	{method: "POST", path: hpaV2, contentType: jsonCT, body: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"w2"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":3,"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"1Gi"}}}]}}`},
	{method: "PATCH", path: hpaV2 + "/w2", contentType: mergeCT, body: `{"spec":{"behavior":{"scaleUp":{"stabilizationWindowSeconds":10}}}}`},
	{method: "POST", path: hpaV1, contentType: jsonCT, body: `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"w3"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":2}}`},
	{method: "DELETE", path: hpaV2 + "/w2"},
}

// versionsWatch watches each storage through the version
// versionWatchWrites do not write through, on c and on a Store loaded
// from c's LISTs, and compares the events.
func versionsWatch(t *testing.T, c *k8stest.Cluster) {
	var lists [][2]string
	rvs := map[string]string{}
	for _, p := range []string{coreEvents, eventsEvents, hpaV1, hpaV2, "/api/v1/namespaces"} {
		resp, b := c.Do("GET", p, http.Header{"Accept": {jsonCT}}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("LIST %s: %d %s", p, resp.StatusCode, b)
		}
		var lm struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.Unmarshal(b, &lm); err != nil {
			t.Fatal(err)
		}
		rvs[p] = lm.Metadata.ResourceVersion
		lists = append(lists, [2]string{p, string(b)})
	}
	st, err := world.Load(wttest.OpenSession(t, writeListSession(t, lists)), world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type opened struct {
		name string
		real chan []watchEv
		mine *world.Watch
	}
	var ws []opened
	for _, wc := range []struct{ path, accept string }{{eventsEvents, jsonCT}, {hpaV1, jsonCT}, {hpaV1, pbAcc}} {
		h := http.Header{"User-Agent": {"wtrace-compare/1.0"}, "Accept": {wc.accept}}
		q := "resourceVersion=" + rvs[wc.path]
		o := opened{name: wc.path + " " + wc.accept, real: make(chan []watchEv, 1)}
		go func(path string) { o.real <- readWatch(t, c, path, h) }(wc.path + "?watch=true&timeoutSeconds=8&" + q)
		qq, _ := url.ParseQuery(q)
		qq.Set("watch", "true")
		w, refused := st.Watch(&world.Request{Method: "GET", Path: wc.path, Query: qq, Header: h})
		if refused != nil || w == nil {
			t.Fatalf("%s: the store refused the watch: %+v", o.name, refused)
		}
		o.mine = w
		ws = append(ws, o)
	}
	time.Sleep(500 * time.Millisecond) // the apiserver's watches are established
	for _, s := range versionWatchWrites {
		h := http.Header{"User-Agent": {"wtrace-compare/1.0"}, "Content-Type": {s.contentType}}
		if resp, b := c.Do(s.method, s.path, h, []byte(s.body)); resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, b)
		}
		if r, ok := st.Serve(&world.Request{Method: s.method, Path: s.path, Query: url.Values{}, Header: h, Body: []byte(s.body)}); !ok || r.Code >= 300 {
			t.Fatalf("store: %s %s: %+v", s.method, s.path, r)
		}
	}
	real, mine := newSide(), newSide()
	for _, o := range ws {
		var got []watchEv
		for _, b := range takeAll(t, o.mine) {
			got = append(got, splitEvents(t, o.mine.ContentType(), b)...)
		}
		var want []watchEv
		select {
		case want = <-o.real:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the apiserver's watch did not end", o.name)
		}
		if len(want) < 3 {
			t.Errorf("%s: the apiserver sent %d events", o.name, len(want))
		}
		if a, b := real.events(t, want), mine.events(t, got); !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Errorf("%s: events differ\nmine: %s\nreal: %s", o.name, jb, ja)
		}
	}
}
