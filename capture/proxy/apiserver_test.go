package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// apiClient talks to the apiserver directly, as the workload.
type apiClient struct {
	t *testing.T
	c *k8stest.Cluster
}

func (a *apiClient) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	resp, rb := a.c.Do(method, path, http.Header{"Content-Type": {"application/json"}}, b)
	return resp.StatusCode, rb
}

// startCluster runs etcd and kube-apiserver (testkit/k8stest) and returns
// a kubeconfig for them and a client for the workload.
func startCluster(t *testing.T) (kubeconfig string, api *apiClient) {
	c := k8stest.Start(t)
	return c.Kubeconfig, &apiClient{t: t, c: c}
}

// clientEvent is an event as the watching client received it.
type clientEvent struct {
	data []byte
	sha  [32]byte
}

// watch reads a JSON watch through the proxy until it holds n events,
// splitting the body at newlines (the apiserver writes one event per line).
func watch(t *testing.T, c *http.Client, url string, n int, out chan<- []clientEvent) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer not-a-real-token-a1b2c3d4")
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("watch %s: %v", url, err)
		out <- nil
		return
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var evs []clientEvent
	for len(evs) < n {
		l, err := br.ReadBytes('\n')
		if err != nil {
			t.Errorf("watch %s: %v after %d events", url, err, len(evs))
			break
		}
		l = bytes.TrimSuffix(l, []byte("\n"))
		evs = append(evs, clientEvent{data: l, sha: sha256.Sum256(l)})
	}
	out <- evs
}

// TestRealAPIServer records, through the proxy, watches of a real
// kube-apiserver while a workload changes configmaps and a Secret; the
// session must hold exactly the events the watching clients received
// (sha256 per event; Secrets redacted to the same length) and none of the
// Secret's values.
func TestRealAPIServer(t *testing.T) {
	kc, api := startCluster(t)
	const ns = "wtrace-e2e"
	if code, b := api.do("POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": ns}}); code != 201 {
		t.Fatalf("create namespace: %d %s", code, b)
	}
	r := startRecording(t, kc, false, 100*time.Millisecond)
	pc := &http.Client{Transport: &http.Transport{}}
	defer pc.CloseIdleConnections()
	// LISTs through the proxy give the resourceVersions to watch from.
	rv := func(resource string) string {
		resp, err := pc.Get(r.proxy.URL + "/api/v1/namespaces/" + ns + "/" + resource)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 {
			t.Fatalf("LIST %s through the proxy: %d, %v", resource, resp.StatusCode, err)
		}
		return l.Metadata.ResourceVersion
	}
	const configmaps = 12
	cmEvents, secEvents := 3*configmaps, 3
	cmCh, secCh := make(chan []clientEvent, 1), make(chan []clientEvent, 1)
	go watch(t, pc, r.proxy.URL+"/api/v1/namespaces/"+ns+"/configmaps?watch=true&timeoutSeconds=120&resourceVersion="+rv("configmaps"), cmEvents, cmCh)
	go watch(t, pc, r.proxy.URL+"/api/v1/namespaces/"+ns+"/secrets?watch=true&timeoutSeconds=120&resourceVersion="+rv("secrets"), secEvents, secCh)
	// Give the watches a moment to be established at the apiserver; they
	// start from the LIST's resourceVersion, so nothing is missed anyway.
	time.Sleep(200 * time.Millisecond)

	secretA, secretB := "real-apiserver-secret-one-7f31", "real-apiserver-secret-two-c94e"
	for i := range configmaps {
		body := map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("cm-%02d", i)}, "data": map[string]string{"k": strings.Repeat("v", 50*i)}}
		if code, b := api.do("POST", "/api/v1/namespaces/"+ns+"/configmaps", body); code != 201 {
			t.Fatalf("create configmap: %d %s", code, b)
		}
	}
	if code, b := api.do("POST", "/api/v1/namespaces/"+ns+"/secrets", map[string]any{"metadata": map[string]any{"name": "creds"},
		"stringData": map[string]string{"password": secretA}}); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}
	for i := range configmaps {
		body := map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("cm-%02d", i)}, "data": map[string]string{"k": "updated", "i": fmt.Sprint(i)}}
		if code, b := api.do("PUT", fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%02d", ns, i), body); code != 200 {
			t.Fatalf("update configmap: %d %s", code, b)
		}
	}
	if code, b := api.do("PUT", "/api/v1/namespaces/"+ns+"/secrets/creds", map[string]any{"metadata": map[string]any{"name": "creds"},
		"data": map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(secretB))}}); code != 200 {
		t.Fatalf("update secret: %d %s", code, b)
	}
	for i := range configmaps {
		if code, b := api.do("DELETE", fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%02d", ns, i), nil); code != 200 {
			t.Fatalf("delete configmap: %d %s", code, b)
		}
	}
	if code, b := api.do("DELETE", "/api/v1/namespaces/"+ns+"/secrets/creds", nil); code != 200 {
		t.Fatalf("delete secret: %d %s", code, b)
	}
	var cms, secs []clientEvent
	for cms == nil || secs == nil {
		select {
		case cms = <-cmCh:
		case secs = <-secCh:
		case <-time.After(2 * time.Minute):
			t.Fatal("the watches did not receive their events within 2 minutes")
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	// The clients got the Secret's values; the session must not.
	for _, s := range []string{secretA, secretB} {
		found := false
		for _, e := range secs {
			found = found || bytes.Contains(e.data, []byte(base64.StdEncoding.EncodeToString([]byte(s))))
		}
		if !found {
			t.Errorf("the secrets watch never carried %q", s)
		}
	}
	// Let the last events reach the session, then stop.
	deadline := time.Now().Add(time.Minute)
	for r.tee.Stats().Events < int64(cmEvents+secEvents) {
		if time.Now().After(deadline) {
			t.Fatalf("the tee saw %d events; want %d", r.tee.Stats().Events, cmEvents+secEvents)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pc.CloseIdleConnections()
	r.stop(t)

	v := readSession(t, r.path)
	byTarget := func(sub string) []*formats.Frame {
		for id, req := range v.requests {
			if strings.Contains(req.Target, sub) {
				return v.frames[id]
			}
		}
		t.Fatalf("no exchange with target containing %q", sub)
		return nil
	}
	got := byTarget("configmaps?watch=true")
	if len(got) != len(cms) {
		t.Fatalf("session: %d configmap events; the client got %d", len(got), len(cms))
	}
	for i := range cms {
		if sha256.Sum256(got[i].Data) != cms[i].sha {
			t.Errorf("configmap event %d differs:\nsession %s\nclient  %s", i, got[i].Data, cms[i].data)
		}
	}
	got = byTarget("secrets?watch=true")
	if len(got) != len(secs) {
		t.Fatalf("session: %d secret events; the client got %d", len(got), len(secs))
	}
	for i := range secs {
		if len(got[i].Data) != len(secs[i].data) || len(got[i].Redacted) == 0 || sha256.Sum256(got[i].Data) == secs[i].sha {
			t.Errorf("secret event %d: %d bytes (redacted %v); the client got %d bytes; want a redacted copy", i, len(got[i].Data), got[i].Redacted, len(secs[i].data))
		}
	}
	wttest.CheckNoSecrets(t, r.path, secretA, secretB, base64.StdEncoding.EncodeToString([]byte(secretA)),
		base64.StdEncoding.EncodeToString([]byte(secretB)), k8stest.Token, "not-a-real-token-a1b2c3d4")
}
