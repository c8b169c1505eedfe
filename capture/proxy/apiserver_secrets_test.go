package proxy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestRealAPIServerSecretShapes records, through the proxy, every shape in
// which a real kube-apiserver hands out Secret values and tokens — JSON and
// protobuf lists, gzip'd (a list over the apiserver's 128 KiB compression
// threshold) and not, Tables with full objects and with metadata only, a
// Table watch (kubectl get -w), PartialObjectMetadataList in JSON and
// protobuf, a percent-encoded path, a TokenRequest and the TokenReview of
// its token, merge and JSON patches and a YAML server-side apply, a token
// in the query — and checks that none of the values is in the session, and
// that replay of it still syncs a Secret informer.
func TestRealAPIServerSecretShapes(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	kc, api := startCluster(t)
	const ns = "wtrace-secrets"
	const (
		password = "real-pw-8e31c07d5a"
		applied  = "real-applied-49b2f6e1"
		patched  = "real-patched-d07a35c9"
		yamlVal  = "real-yaml-61e8b2a4f0"
		query    = "real-query-7c5d19e3b8"
		bearer   = "real-client-bearer-2f9a6c14"
	)
	blob := make([]byte, 150<<10)
	rand.Read(blob)
	for _, req := range []struct {
		path string
		body any
	}{
		{"/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": ns}}},
		{"/api/v1/namespaces/" + ns + "/serviceaccounts", map[string]any{"metadata": map[string]any{"name": "bot"}}},
		{"/api/v1/namespaces/" + ns + "/secrets", map[string]any{
			"metadata": map[string]any{"name": "db", "annotations": map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(`{"apiVersion":"v1","data":{"password":%q},"kind":"Secret","metadata":{"annotations":{},"name":"db","namespace":%q}}`+"\n",
					base64.StdEncoding.EncodeToString([]byte(applied)), ns)}},
			"stringData": map[string]string{"password": password}}},
		{"/api/v1/namespaces/" + ns + "/secrets", map[string]any{"metadata": map[string]any{"name": "big"},
			"data": map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)}}},
		{"/api/v1/namespaces/" + ns + "/secrets", map[string]any{"metadata": map[string]any{"name": "bootstrap-token-abcdef"},
			"type": "bootstrap.kubernetes.io/token", "stringData": map[string]string{"token-id": "abcdef", "token-secret": password + "-boot"}}},
	} {
		if code, b := api.do("POST", req.path, req.body); code != 201 {
			t.Fatalf("POST %s: %d %s", req.path, code, b)
		}
	}

	r := startRecording(t, kc, false, 2*time.Second)
	pc := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 30 * time.Second}
	defer pc.CloseIdleConnections()
	do := func(method, path, accept, enc, ct, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, r.proxy.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := pc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 && !strings.Contains(path, "access_token") {
			t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
		}
		return b
	}
	const (
		js    = "application/json"
		pb    = "application/vnd.kubernetes.protobuf"
		tbl   = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
		pomPB = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
		pomJS = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	)
	secrets := "/api/v1/namespaces/" + ns + "/secrets"
	for _, enc := range []string{"identity", "gzip"} {
		for _, accept := range []string{js, pb, tbl, pomPB, pomJS} {
			do("GET", secrets, accept, enc, "", "")
		}
		do("GET", secrets+"?includeObject=Object", tbl, enc, "", "")
		do("GET", "/api/v1/namespaces/"+ns+"/%73ecrets/db", js, enc, "", "")
	}
	// kubectl create token, then the TokenReview of that token.
	var tr struct{ Status struct{ Token string } }
	if err := json.Unmarshal(do("POST", "/api/v1/namespaces/"+ns+"/serviceaccounts/bot/token", js, "", js,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["https://kubernetes.default.svc.cluster.local"]}}`), &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("TokenRequest: %v, token %q", err, tr.Status.Token)
	}
	do("POST", "/apis/authentication.k8s.io/v1/tokenreviews", js, "", js,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+tr.Status.Token+`"}}`)
	do("PATCH", secrets+"/db", js, "", "application/merge-patch+json",
		fmt.Sprintf(`{"data":{"password":%q}}`, base64.StdEncoding.EncodeToString([]byte(patched))))
	do("PATCH", secrets+"/db", js, "", "application/json-patch+json",
		fmt.Sprintf(`[{"op":"replace","path":"/data/password","value":%q}]`, base64.StdEncoding.EncodeToString([]byte(patched+"-2"))))
	do("PATCH", secrets+"/applied?fieldManager=kubectl&force=true", js, "", "application/apply-patch+yaml",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied\n  namespace: "+ns+"\nstringData:\n  value: "+yamlVal+"\n")
	do("GET", "/api/v1/namespaces/"+ns+"/configmaps?access_token="+query, js, "", "", "")
	// kubectl get secrets -w: a Table watch, fed by a change.
	rv := do("GET", secrets+"?limit=1", js, "", "", "")
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	json.Unmarshal(rv, &l)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		req, _ := http.NewRequest("GET", r.proxy.URL+secrets+"?watch=true&includeObject=Object&timeoutSeconds=3&resourceVersion="+l.Metadata.ResourceVersion, nil)
		req.Header.Set("Accept", tbl)
		if resp, err := pc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if code, b := api.do("PUT", secrets+"/db", map[string]any{"metadata": map[string]any{"name": "db"},
		"stringData": map[string]string{"password": password + "-w"}}); code != 200 {
		t.Fatalf("update secret: %d %s", code, b)
	}
	select {
	case <-watchDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the Table watch did not end within 30s of its 3s timeout")
	}
	// An informer, so that the session holds what a replay serves it.
	informerSync(t, &rest.Config{Host: r.proxy.URL, BearerToken: bearer}, ns, 4)
	pc.CloseIdleConnections()
	r.stop(t)

	var needles []string
	for _, v := range []string{password, password + "-boot", password + "-w", applied, patched, patched + "-2", yamlVal} {
		needles = append(needles, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	needles = append(needles, query, bearer, k8stest.Token, tr.Status.Token, tr.Status.Token[len(tr.Status.Token)-40:],
		base64.StdEncoding.EncodeToString(blob[:4096])[:64])
	wttest.CheckNoSecrets(t, r.path, needles...)
	if keep := os.Getenv("WTRACE_E2E_KEEP"); keep != "" {
		b, _ := os.ReadFile(r.path) // a directory to keep the session in, to look at
		os.WriteFile(filepath.Join(keep, "real-apiserver.wt"), b, 0o644)
	}

	f, err := formats.Open(r.path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[formats.RedactReason]int64{}
	for _, x := range f.Index().Exchanges {
		for _, e := range []*formats.End{x.RequestEnd, x.End} {
			if e != nil {
				for _, rd := range e.Redactions {
					reasons[rd.Reason] += rd.Count
				}
			}
		}
	}
	f.Close()
	for _, want := range []formats.RedactReason{formats.RedactSecretValue, formats.RedactLastApplied, formats.RedactToken, formats.RedactQuery} {
		if reasons[want] == 0 {
			t.Errorf("no %v redaction in the session: %v", want, reasons)
		}
	}

	// Replay: the redacted Secrets still decode, and hold none of the values.
	srv, err := replay.Open(r.path, replay.Options{Writes: replay.WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// Replay serves the informer one of the recorded LISTs of the
	// namespace's Secrets (the first ones were taken before the apply):
	// three or four Secrets.
	for _, s := range informerSync(t, &rest.Config{Host: srv.URL}, ns, -3) {
		for k, v := range s.Data {
			for _, n := range needles {
				if string(v) == n {
					t.Errorf("replayed Secret %s data.%s holds a planted value", s.Name, k)
				}
			}
		}
	}
}

// informerSync runs a Secret informer in ns until it has synced and holds
// n Secrets (at least -n if n < 0), and returns them.
func informerSync(t *testing.T, cfg *rest.Config, ns string, n int) []*corev1.Secret {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Secrets().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	if !k8scache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		t.Fatalf("Secret informer on %s did not sync within 60s", cfg.Host)
	}
	var out []*corev1.Secret
	for _, o := range inf.GetStore().List() {
		out = append(out, o.(*corev1.Secret))
	}
	if n >= 0 && len(out) != n || n < 0 && len(out) < -n {
		var names []string
		for _, s := range out {
			names = append(names, s.Name)
		}
		t.Fatalf("Secret informer on %s holds %d Secrets (%v); want %d", cfg.Host, len(out), names, n)
	}
	return out
}
