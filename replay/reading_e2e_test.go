package replay_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestReadingAgainstAPIServer: the requests whose reading wtrace's
// packages once disagreed on (k8stest.ReadingTargets: ?watch=yes, a bare
// ?watch, ?watch=1, a GET of one object with ?watch=1, the legacy watch
// paths, …), recorded through the proxy from a real kube-apiserver, are
// replayed as it answered them: a watch stream exactly where it streamed
// one, from the tape (--writes reject) and from the world (the default),
// and the replay's metrics label them with RequestInfo's verb
// (apipath.Parse, itself checked against the apiserver).
func TestReadingAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	if resp, b := c.Do("POST", "/api/v1/namespaces/"+k8stest.ReadingNamespace+"/configmaps", nil,
		[]byte(`{"metadata":{"name":"`+k8stest.ReadingConfigMap+`"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create configmap: %d %s", resp.StatusCode, b)
	}
	path := filepath.Join(t.TempDir(), "reading.wt")
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: path}})
	want := map[string]bool{} // target: the apiserver streamed a watch
	verbWatch := 0
	for _, tc := range k8stest.ReadingTargets {
		streamed, status := streamedFrom(t, http.DefaultClient, tc.Method, px.URL+tc.Target)
		t.Logf("%s %s: %d, watch %v", tc.Method, tc.Target, status, streamed)
		want[tc.Method+" "+tc.Target] = streamed
		if r, _ := apipath.Parse(tc.Method, tc.Target); r.Verb == "watch" {
			verbWatch++
		}
	}
	http.DefaultClient.CloseIdleConnections()
	px.Stop()

	for _, mode := range []replay.Writes{replay.WritesReject, replay.WritesAnswer} {
		t.Run(string(mode), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			srv := replaytest.NewServer(t, path, replay.Options{Writes: mode, Metrics: reg})
			cl := srv.Client()
			defer cl.CloseIdleConnections()
			for _, tc := range k8stest.ReadingTargets {
				got, status := streamedFrom(t, cl, tc.Method, srv.URL+tc.Target)
				if w := want[tc.Method+" "+tc.Target]; got != w {
					t.Errorf("%s %s: replayed as a watch %v (%d); kube-apiserver streamed a watch %v", tc.Method, tc.Target, got, status, w)
				}
			}
			// A handler counts its request once the client read the
			// answer: the last ones may be counted a moment later.
			wttest.WaitFor(t, time.Minute, func() bool { return requestsOf(t, reg, "watch") == verbWatch },
				"wtrace_replay_requests_total{verb=\"watch\"} to be %d (now %d)", verbWatch, requestsOf(t, reg, "watch"))
		})
	}
}

// streamedFrom sends method to url and reports whether the answer is a
// watch stream (a 200 whose body is watch events), and its status.
func streamedFrom(t *testing.T, cl *http.Client, method, url string) (bool, int) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode == 200 && bytes.HasPrefix(body, []byte(`{"type":`)), resp.StatusCode
}

// requestsOf is the sum of wtrace_replay_requests_total over the series
// of verb.
func requestsOf(t *testing.T, reg *prometheus.Registry, verb string) int {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range fams {
		if f.GetName() != "wtrace_replay_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" && l.GetValue() == verb {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
