package proxy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/wttest"
)

// The real-apiserver test needs kube-apiserver and etcd binaries:
// $WTRACE_K8SBIN, or /tmp/k8sbin where ../shared/corpus/tools/build-k8s.sh
// puts them. Without them it is skipped.
const k8sbinEnv = "WTRACE_K8SBIN"

func k8sBinaries(t *testing.T) (apiserver, etcd string) {
	t.Helper()
	dir := os.Getenv(k8sbinEnv)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, b := range []string{apiserver, etcd} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not found (set $%s, or build with ../shared/corpus/tools/build-k8s.sh): %v", b, k8sbinEnv, err)
		}
	}
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver: not in -short mode")
	}
	return apiserver, etcd
}

// freePorts returns n TCP ports free on 127.0.0.1 (a race with other
// processes is possible but unlikely).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// pki writes a CA, a serving certificate for 127.0.0.1 signed by it, and
// a service-account key pair into dir; it returns the CA in PEM.
func pki(t *testing.T, dir string) []byte {
	t.Helper()
	key := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wtrace-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey := key()
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	saKey := key()
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	write("ca.crt", "CERTIFICATE", caDER)
	write("apiserver.crt", "CERTIFICATE", srvDER)
	write("apiserver.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey))
	write("sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	write("sa.pub", "PUBLIC KEY", saPub)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// daemon starts a process of the test, logging to dir/name.log, and stops
// it (SIGTERM, then SIGKILL) when the test ends.
func daemon(t *testing.T, dir, name string, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = logf, logf
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (end):\n%s", name, b)
		}
	})
}

// apiserverToken is the static token of the test apiserver's admin.
const apiserverToken = "wtrace-apiserver-test-token-6c2e81f0"

// apiClient talks to the apiserver directly, as the workload.
type apiClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (a *apiClient) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, r)
	req.Header.Set("Authorization", "Bearer "+apiserverToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// startCluster runs etcd and kube-apiserver on loopback in a temp dir and
// returns a kubeconfig for them and a client for the workload.
func startCluster(t *testing.T) (kubeconfig string, api *apiClient) {
	apiserverBin, etcdBin := k8sBinaries(t)
	dir := t.TempDir()
	caPEM := pki(t, dir)
	os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(apiserverToken+`,wtrace-admin,wtrace-admin-uid,"system:masters"`+"\n"), 0o600)
	ports := freePorts(t, 3)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	daemon(t, dir, "etcd", etcdBin, "--name", "wtrace", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "wtrace="+peerURL, "--initial-cluster-state", "new")
	daemon(t, dir, "kube-apiserver", apiserverBin, "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(dir, "apiserver.key"),
		"--client-ca-file="+filepath.Join(dir, "ca.crt"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--profiling=false",
		"--cert-dir="+filepath.Join(dir, "certs"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	api = &apiClient{t: t, base: fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		c: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}}
	t.Cleanup(api.c.CloseIdleConnections)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		req, _ := http.NewRequest("GET", api.base+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+apiserverToken)
		if resp, err := api.c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("kube-apiserver not ready within 3 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, api.base, base64.StdEncoding.EncodeToString(caPEM), apiserverToken)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, api
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
		base64.StdEncoding.EncodeToString([]byte(secretB)), apiserverToken, "not-a-real-token-a1b2c3d4")
}
