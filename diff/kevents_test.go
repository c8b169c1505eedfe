package diff

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseKEvent(t *testing.T) {
	var n names
	n.register(pods, "web-7b84c5f95f-", "ReplicaSet", "web-7b84c5f95f", "", "web-7b84c5f95f-kwr78", 1)
	for _, tc := range []struct {
		name, doc string
		want      kevent
	}{
		{"core/v1 create", `{"kind":"Event","apiVersion":"v1","metadata":{"name":"web-7b84c5f95f.18ebe7f5bced6957"},
			"involvedObject":{"kind":"ReplicaSet","namespace":"demo","name":"web-7b84c5f95f","uid":"u"},"reason":"SuccessfulCreate",
			"message":"Created pod: web-7b84c5f95f-kwr78","type":"Normal","count":1,"source":{"component":"replicaset-controller"}}`,
			kevent{name: "web-7b84c5f95f.18ebe7f5bced6957", identity: "Normal SuccessfulCreate ReplicaSet demo/web-7b84c5f95f: Created pod: web-7b84c5f95f-#1 (replicaset-controller)", count: 1, hasCount: true}},
		{"about a generated object", `{"metadata":{"name":"web-7b84c5f95f-kwr78.18ebe7f5bced6957"},
			"involvedObject":{"kind":"Pod","namespace":"demo","name":"web-7b84c5f95f-kwr78"},"reason":"Scheduled","message":"ok","type":"Normal"}`,
			kevent{name: "web-7b84c5f95f-kwr78.18ebe7f5bced6957", identity: "Normal Scheduled Pod demo/web-7b84c5f95f-#1: ok", count: 1}},
		{"core/v1 count patch", `{"count":3,"lastTimestamp":"2026-11-27T12:00:00Z","message":"x"}`, kevent{count: 3, hasCount: true}},
		{"events.k8s.io", `{"metadata":{"name":"n"},"regarding":{"kind":"Node","name":"n1"},"reason":"Ready","note":"up","type":"Normal",
			"reportingController":"kubelet","series":{"count":4}}`,
			kevent{name: "n", identity: "Normal Ready Node n1: up (kubelet)", count: 4, hasCount: true}},
		{"events.k8s.io series patch", `{"series":{"count":5,"lastObservedTime":"2026-11-27T12:00:00.000000Z"}}`, kevent{count: 5, hasCount: true}},
		{"not JSON", `{`, kevent{}},
	} {
		if got := parseKEvent([]byte(tc.doc), &n); got != tc.want {
			t.Errorf("%s: parseKEvent = %+v; want %+v", tc.name, got, tc.want)
		}
	}
}

// TestEventPatchOfGeneratedObject: an Event about an object whose name
// the server generated (a Pod of a ReplicaSet) is named after it and a
// time, both different in every run; its count PATCH is the same Event's
// in both sessions, paired by what the Event says.
func TestEventPatchOfGeneratedObject(t *testing.T) {
	session := func(name, pod, stamp string) string {
		ev := "/api/v1/namespaces/demo/events"
		event := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"%s.%s","namespace":"demo"},"involvedObject":{"kind":"Pod","namespace":"demo","name":%q},"reason":"BackOff","message":"Back-off restarting failed container","type":"Warning","count":1,"source":{"component":"kubelet"}}`, pod, stamp, pod)
		return writeSession(t, name,
			sx{method: "POST", target: "/api/v1/namespaces/demo/pods", status: 201,
				body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-","namespace":"demo"}}`),
				resp: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + pod + `","generateName":"web-","namespace":"demo","uid":"u-` + pod + `"}}`)},
			sx{method: "POST", target: ev, status: 201, body: []byte(event), resp: []byte(event)},
			sx{method: "PATCH", target: ev + "/" + pod + "." + stamp, ctype: "application/strategic-merge-patch+json", status: 200,
				body: []byte(`{"count":2,"lastTimestamp":"2026-12-02T10:00:00Z"}`), resp: []byte(event)},
		)
	}
	a := session("a.wt", "web-aaaaa", "18ebe7f5bced0001")
	b := session("b.wt", "web-bbbbb", "18ebe7f5bced0002")
	rep := mustDiff(t, a, b, Options{})
	if !rep.Same {
		var sb strings.Builder
		rep.WriteText(&sb, TextOptions{})
		t.Fatalf("one Event, patched once, in two runs:\n%s", sb.String())
	}
}
