package proxy

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// TestRealAPIServerWatchOrNot sends requests that are, or look like but
// are not, watches through the recording proxy to a real kube-apiserver:
// the session must store as watch events exactly the bodies the apiserver
// streamed as a watch (issue 24: the recorder read a request its own way,
// not as the apiserver does — internal/apipath.IsWatch now).
func TestRealAPIServerWatchOrNot(t *testing.T) {
	kc, api := startCluster(t)
	const ns = "default"
	if code, b := api.do("POST", "/api/v1/namespaces/"+ns+"/configmaps", map[string]any{"metadata": map[string]any{"name": "cm-watched"}}); code != 201 {
		t.Fatalf("create configmap: %d %s", code, b)
	}
	r := startRecording(t, kc, false, 100*time.Millisecond)
	pc := r.client()
	defer pc.CloseIdleConnections()
	base := "/api/v1/namespaces/" + ns + "/configmaps"
	targets := []string{
		base + "?watch=true&timeoutSeconds=1",
		base + "?watch=yes&timeoutSeconds=1",             // any value but false and 0
		base + "?watch&timeoutSeconds=1",                 // the empty value
		base + "?watch=FALSE&timeoutSeconds=1",           // a LIST
		base + "?watch=0",                                // a LIST
		base + "/cm-watched?watch=true&timeoutSeconds=1", // a GET of one object
		"/api/v1/watch/namespaces/" + ns + "/configmaps?timeoutSeconds=1",
		"/api/v1/%77atch/namespaces/" + ns + "/configmaps?timeoutSeconds=1",                 // the apiserver routes the decoded path
		"/api/v1/namespaces/" + ns + "/configmaps?xwatch=true&timeoutSeconds=1&watch=true%", // a pair that does not decode is left out
	}
	streamed := map[string]bool{}
	for _, target := range targets {
		req, _ := http.NewRequest("GET", r.proxy.URL+target, nil)
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
		t.Logf("GET %s: %d, watch %v", target, resp.StatusCode, streamed[target])
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
	if seen != len(targets) {
		t.Errorf("%d of the %d requests found in the session", seen, len(targets))
	}
}
