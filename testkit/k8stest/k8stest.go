// Package k8stest starts a real kube-apiserver and etcd for tests, on
// loopback, free ports and a temporary directory of the test, so that
// several can run at once and none touches the corpus cluster's fixed
// ports. The binaries come from $WTRACE_K8SBIN, or /tmp/k8sbin where
// ../shared/corpus/tools/build-k8s.sh puts them; without them (or with
// -short) the test is skipped.
//
// The one harness for tests against a real apiserver: the recording
// proxy's (capture/proxy), the world's comparisons (apiserver/world), the
// controller's (testkit/ctrltest), a recording replayed to a controller
// (replay/record). Everything here is for tests; nothing in the wtrace
// binary imports it.
package k8stest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names the directory holding kube-apiserver and etcd.
const Env = "WTRACE_K8SBIN"

// Token is the static bearer token of the test apiserver's admin (in
// system:masters).
const Token = "wtrace-k8stest-token-0f9e5d21"

// UserName, UserUID and UserGroups are who Token authenticates as (the
// apiserver adds system:authenticated to the groups of the token file).
const (
	UserName = "wtrace-admin"
	UserUID  = "wtrace-admin-uid"
)

// UserGroups: see UserName.
var UserGroups = []string{"system:masters", "system:authenticated"}

// Cluster is a running etcd + kube-apiserver; both stop when the test
// ends.
type Cluster struct {
	// URL is the apiserver's base URL (https://127.0.0.1:port).
	URL string
	// Kubeconfig is the path of a kubeconfig for the admin.
	Kubeconfig string
	// CAPEM is the CA of the apiserver's serving certificate.
	CAPEM []byte
	// Client talks to the apiserver (it trusts the CA; requests need
	// the bearer Token, which Do adds).
	Client *http.Client
	t      testing.TB
}

// Binaries returns the paths of kube-apiserver and etcd, skipping t when
// they are absent or in -short mode.
func Binaries(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	dir := os.Getenv(Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, b := range []string{apiserver, etcd} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not found (set $%s, or build with ../shared/corpus/tools/build-k8s.sh): %v", b, Env, err)
		}
	}
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver: not in -short mode")
	}
	return apiserver, etcd
}

// Start runs etcd and kube-apiserver (v1.33 flags as the corpus cluster's,
// WatchList on) and waits until the apiserver is ready (3 minutes at
// most).
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiserverBin, etcdBin := Binaries(t)
	dir := t.TempDir()
	caPEM := pki(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(Token+","+UserName+","+UserUID+`,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	ready := false
	dumpLogs := func() bool { return !ready }
	daemon(t, dir, dumpLogs, "etcd", etcdBin, "--name", "wtrace", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "wtrace="+peerURL, "--initial-cluster-state", "new")
	daemon(t, dir, dumpLogs, "kube-apiserver", apiserverBin, "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(dir, "apiserver.key"),
		"--client-ca-file="+filepath.Join(dir, "ca.crt"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--profiling=false",
		"--feature-gates=WatchList=true", "--cert-dir="+filepath.Join(dir, "certs"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &Cluster{URL: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), CAPEM: caPEM, t: t,
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}}
	t.Cleanup(c.Client.CloseIdleConnections)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		req, _ := http.NewRequest("GET", c.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+Token)
		if resp, err := c.Client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ready = true
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("kube-apiserver not ready within 3 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
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
`, c.URL, base64.StdEncoding.EncodeToString(caPEM), Token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// Do sends one request with the admin's token and returns the response
// (its body read).
func (c *Cluster) Do(method, path string, header http.Header, body []byte) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := c.Client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, b
}

// freePorts returns n TCP ports free on 127.0.0.1 (a race with other
// processes is possible but unlikely).
func freePorts(t testing.TB, n int) []int {
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
func pki(t testing.TB, dir string) []byte {
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
// it (SIGTERM, then SIGKILL) when the test ends or when the returned func
// is called, whichever comes first (the other does nothing); the end of
// its log goes to the test's log if dump says so then.
func daemon(t testing.TB, dir string, dump func() bool, name string, bin string, args ...string) (stop func()) {
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
	var once sync.Once
	stop = func() {
		once.Do(func() {
			c.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				c.Process.Kill()
				<-done
			}
			if dump() {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("%s log (end):\n%s", name, b)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
