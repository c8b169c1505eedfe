package proxy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// Planted values of the redaction tests against the real apiserver:
// letters and digits only, and so are their base64 forms, so that no
// encoding (JSON escapes, percent-encoding) hides them from the grep.
const (
	plAppliedData   = "lastAppliedDataPw7c3e1" // a Secret's data embedded in a custom resource
	plAppliedString = "lastAppliedToken9b5d2"  // and its stringData
	plFormSecret    = "formUploadSecretA4f8e6" // a Secret sent form-encoded (answered 415)
	plFormConfig    = "formUploadOtherB2d7c9"  // the same, to a path that is not a Secret's
)

// kubectlBin returns the kubectl binary beside kube-apiserver, or "" if
// there is none.
func kubectlBin() string {
	dir := os.Getenv(k8stest.Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// plantNeedles returns the values and their base64 forms.
func plantNeedles(values ...string) []string {
	var out []string
	for _, v := range values {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return out
}

// TestRealAPIServerLastApplied applies, with client-side kubectl apply
// through the recording proxy, a custom resource that embeds a Secret (as
// a ManifestWork does): kubectl writes the whole object, Secret included,
// into its kubectl.kubernetes.io/last-applied-configuration annotation,
// which the apiserver then serves in every view of it. Issue 27: the
// Secret in spec was redacted, the copy in the annotation kept. The
// session must hold neither, whatever the view (the create, GET, LIST,
// watch events, kubectl's own reads and its patch on a second apply).
func TestRealAPIServerLastApplied(t *testing.T) {
	kc, api := startCluster(t)
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "manifestworks.work.example.com"},
		"spec": map[string]any{"group": "work.example.com", "scope": "Namespaced",
			"names": map[string]any{"kind": "ManifestWork", "plural": "manifestworks", "singular": "manifestwork", "listKind": "ManifestWorkList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}
	if code, b := api.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd); code != 201 {
		t.Fatalf("create the CRD: %d %s", code, b)
	}
	const coll = "/apis/work.example.com/v1/namespaces/default/manifestworks"
	wttest.WaitFor(t, time.Minute, func() bool { code, _ := api.do("GET", coll, nil); return code == 200 }, "the CRD was not served within a minute")

	r := startRecording(t, kc, false, 100*time.Millisecond)
	manifest := func(gen int) []byte {
		return fmt.Appendf(nil, `apiVersion: work.example.com/v1
kind: ManifestWork
metadata:
  name: mw-secret
  namespace: default
  labels: {gen: "%d"}
spec:
  workload:
    manifests:
    - apiVersion: v1
      kind: Secret
      metadata: {name: embedded, namespace: app}
      type: Opaque
      data: {password: %s}
      stringData: {token: %s}
`, gen, base64.StdEncoding.EncodeToString([]byte(plAppliedData)), plAppliedString)
	}
	pc := r.client()
	defer pc.CloseIdleConnections()
	if bin := kubectlBin(); bin != "" {
		dir := t.TempDir()
		for gen := 1; gen <= 2; gen++ { // a create, then a patch
			f := filepath.Join(dir, fmt.Sprintf("mw-%d.yaml", gen))
			if err := os.WriteFile(f, manifest(gen), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "--kubeconfig", os.DevNull, "--server", r.proxy.URL, "apply", "-f", f)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kubectl apply: %v\n%s", err, out)
			}
		}
	} else {
		// What kubectl apply sends on a create: the object, with the
		// annotation holding the object as applied.
		t.Log("no kubectl beside kube-apiserver: creating the object with kubectl's annotation by hand")
		var obj map[string]any
		applied, _ := json.Marshal(appliedObject())
		json.Unmarshal(applied, &obj)
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": string(applied) + "\n"}
		b, _ := json.Marshal(obj)
		req, _ := http.NewRequest("POST", r.proxy.URL+coll, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := pc.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("create: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	// Every view of it through the proxy.
	for _, target := range []string{coll + "/mw-secret", coll, coll + "?watch=true&timeoutSeconds=1",
		"/apis/work.example.com/v1/manifestworks"} {
		resp, err := pc.Get(r.proxy.URL + target)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte(plAppliedData))) {
			t.Fatalf("GET %s: %d, the Secret's value is not in what the apiserver answered:\n%.400s", target, resp.StatusCode, b)
		}
		if target == coll+"/mw-secret" && !strings.Contains(string(b), "last-applied-configuration") {
			t.Fatalf("GET %s: no last-applied-configuration annotation:\n%.400s", target, b)
		}
	}
	pc.CloseIdleConnections()
	r.stop(t)
	wttest.CheckNoSecrets(t, r.path, plantNeedles(plAppliedData, plAppliedString)...)
}

// appliedObject is manifest(1) as kubectl sends it (for the no-kubectl
// path).
func appliedObject() map[string]any {
	return map[string]any{"apiVersion": "work.example.com/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": "mw-secret", "namespace": "default", "labels": map[string]any{"gen": "1"}},
		"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "embedded", "namespace": "app"}, "type": "Opaque",
			"data":       map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(plAppliedData))},
			"stringData": map[string]any{"token": plAppliedString}}}}}}
}

// TestRealAPIServerFormUpload sends a Secret form-encoded (as a browser
// form or curl -d would) through the recording proxy: kube-apiserver
// answers 415 (no Kubernetes API takes a form), but the body went by, and
// the session must not keep what it holds, to a Secret's path or not.
func TestRealAPIServerFormUpload(t *testing.T) {
	kc, _ := startCluster(t)
	r := startRecording(t, kc, false, 100*time.Millisecond)
	pc := r.client()
	defer pc.CloseIdleConnections()
	for _, tc := range []struct{ path, value string }{
		{"/api/v1/namespaces/default/secrets", plFormSecret},
		{"/api/v1/namespaces/default/configmaps", plFormConfig},
	} {
		obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"form"},"data":{"password":"%s"}}`,
			base64.StdEncoding.EncodeToString([]byte(tc.value)))
		for _, body := range []string{
			url.Values{"object": {obj}}.Encode(),        // a form field holding the object
			url.Values{"password": {tc.value}}.Encode(), // a credential field
			url.QueryEscape(obj),                        // the object percent-encoded whole
		} {
			req, _ := http.NewRequest("POST", r.proxy.URL+tc.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := pc.Do(req)
			if err != nil {
				t.Fatalf("POST %s: %v", tc.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Fatalf("POST %s form-encoded: %d %s; want 415", tc.path, resp.StatusCode, b)
			}
		}
	}
	pc.CloseIdleConnections()
	r.stop(t)
	wttest.CheckNoSecrets(t, r.path, plantNeedles(plFormSecret, plFormConfig)...)
}
