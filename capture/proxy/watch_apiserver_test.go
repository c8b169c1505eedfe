package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/k8stest"
)

// TestRealAPIServerWatchOrNot sends requests that are, or look like but
// are not, watches through the recording proxy to a real kube-apiserver:
// the session must store as watch events exactly the bodies the apiserver
// streamed as a watch (issue 24: the recorder read a request its own way,
// not as the apiserver does — internal/apipath.IsWatch now).
func TestRealAPIServerWatchOrNot(t *testing.T) {
	kc, api := startCluster(t)
	const ns = k8stest.ReadingNamespace
	if code, b := api.do("POST", "/api/v1/namespaces/"+ns+"/configmaps", map[string]any{"metadata": map[string]any{"name": k8stest.ReadingConfigMap}}); code != 201 {
		t.Fatalf("create configmap: %d %s", code, b)
	}
	r := startRecording(t, kc, false, 100*time.Millisecond)
	pc := r.client()
	defer pc.CloseIdleConnections()
	streamed := map[string]bool{}
	for _, tc := range k8stest.ReadingTargets {
		target := tc.Target
		req, _ := http.NewRequest(tc.Method, r.proxy.URL+target, nil)
		resp, err := pc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		// A watch answers events, the first one the configmap's ADDED.
		streamed[target] = resp.StatusCode == 200 && bytes.HasPrefix(body, []byte(`{"type":`))
		t.Logf("%s %s: %d, watch %v", tc.Method, target, resp.StatusCode, streamed[target])
		if got := isWatch(httptest.NewRequest(tc.Method, target, nil)); got != streamed[target] {
			t.Errorf("%s %s: the proxy counts it as a watch %v; the apiserver streamed a watch %v", tc.Method, target, got, streamed[target])
		}
	}
	pc.CloseIdleConnections()
	r.stop(t)

	v := readSession(t, r.path)
	seen := 0
	for _, x := range v.exchanges {
		req := v.requests[x.Request.Exchange]
		if req == nil {
			continue
		}
		want, ok := streamed[req.Target]
		if !ok {
			continue
		}
		seen++
		got := x.Response != nil && x.Response.Events != frame.Unknown
		if got != want || got && len(v.frames[x.Request.Exchange]) == 0 {
			t.Errorf("GET %s: recorded as a watch %v (%d events); the apiserver answered a watch %v", req.Target, got, len(v.frames[x.Request.Exchange]), want)
		}
	}
	if seen != len(k8stest.ReadingTargets) {
		t.Errorf("%d of the %d requests found in the session", seen, len(k8stest.ReadingTargets))
	}
}
