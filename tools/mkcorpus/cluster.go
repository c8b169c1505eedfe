package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// token is the static bearer token of the cluster's admin. It lives only as
// long as one run of mkcorpus; captures hold it only inside TLS (or not at
// all behind kubectl proxy), and wtrace never stores it.
const token = "wtrace-mkcorpus-admin-token-3b1f9c07d2"

// gates are the feature gates of the apiserver.
const gates = "WatchList=true,CBORServingAndStorage=true"

type cluster struct {
	url     string
	port    int
	dir     string
	caPEM   []byte
	version string
	procs   []*proc
}

// proc is a running process; done is closed when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

type env struct {
	c       *cluster
	kubectl string
	dir     string // the scenario's output directory
	work    string // scratch
	ns      string
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs a process, its output in dir/name.log.
func start(dir, name string, env []string, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = logf, logf
	c.Env = append(os.Environ(), env...)
	if err := c.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: c, done: make(chan struct{})}
	go func() { c.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

// stopProc sends sig (SIGINT is Ctrl-C) and waits, killing after 15s.
func stopProc(p *proc, sig syscall.Signal) {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func startCluster(ctx context.Context, bin, dir string) (*cluster, error) {
	caPEM, err := pki(dir)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,wtrace-admin,wtrace-admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	c := &cluster{port: ports[2], dir: dir, caPEM: caPEM, url: fmt.Sprintf("https://127.0.0.1:%d", ports[2])}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p, err := start(dir, "etcd", nil, filepath.Join(bin, "etcd"), "--name", "wtrace", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "wtrace="+peerURL, "--initial-cluster-state", "new")
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	p, err = start(dir, "kube-apiserver", nil, filepath.Join(bin, "kube-apiserver"), "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(dir, "apiserver.key"),
		"--client-ca-file="+filepath.Join(dir, "ca.crt"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--profiling=false",
		"--feature-gates="+gates, "--cert-dir="+filepath.Join(dir, "certs"))
	if err != nil {
		c.stop()
		return nil, err
	}
	c.procs = append(c.procs, p)
	hc := c.client(nil)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, b, err := c.do(ctx, hc, "GET", "/readyz", "", nil)
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("kube-apiserver not ready within 3 minutes (%d %s %v); logs in %s", code, b, err, dir)
		}
		time.Sleep(300 * time.Millisecond)
	}
	_, v, _ := c.do(ctx, hc, "GET", "/version", "", nil)
	c.version = string(v)
	if err := c.kubeconfig(filepath.Join(dir, "admin.kubeconfig")); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		stopProc(c.procs[i], syscall.SIGTERM)
	}
}

// client returns an HTTP client of the apiserver; keyLog, when set,
// receives its TLS keys (NSS key log format).
func (c *cluster) client(keyLog io.Writer) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, KeyLogWriter: keyLog}, ForceAttemptHTTP2: true}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// do sends one request with the admin token.
func (c *cluster) do(ctx context.Context, hc *http.Client, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *cluster) kubeconfig(path string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: mkcorpus
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: mkcorpus
  context: {cluster: mkcorpus, user: admin}
current-context: mkcorpus
`, c.url, filepath.Join(c.dir, "ca.crt"), token)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// pki writes a CA, a serving certificate for 127.0.0.1 signed by it and a
// service-account key pair into dir; it returns the CA in PEM.
func pki(dir string) ([]byte, error) {
	key := func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) }
	write := func(name, typ string, der []byte) error {
		return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	caKey, err := key()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wtrace-mkcorpus-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, err := key()
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost", "kubernetes", "kubernetes.default"}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := key()
	if err != nil {
		return nil, err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	for _, f := range []struct {
		name, typ string
		der       []byte
	}{
		{"ca.crt", "CERTIFICATE", caDER},
		{"apiserver.crt", "CERTIFICATE", srvDER},
		{"apiserver.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey)},
		{"sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
		{"sa.pub", "PUBLIC KEY", saPub},
	} {
		if err := write(f.name, f.typ, f.der); err != nil {
			return nil, err
		}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// tcpdump captures loopback traffic of one TCP port into path, as the
// shared corpus does (snap length unlimited, packets written at once).
// stop ends it and waits until the file is complete.
func tcpdump(dir, path string, port int) (stop func(), cmdline string, err error) {
	args := []string{"-i", "lo", "-w", path, "-s", "0", "-B", "262144", "-U", "-n", "tcp", "port", fmt.Sprint(port)}
	c := exec.Command("tcpdump", args...)
	stderr, err := c.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := c.Start(); err != nil {
		return nil, "", fmt.Errorf("tcpdump (needs root or CAP_NET_RAW): %w", err)
	}
	p := &proc{cmd: c, done: make(chan struct{})}
	ready := make(chan struct{})
	logf, _ := os.Create(filepath.Join(dir, "tcpdump.log"))
	go func() {
		defer close(p.done)
		defer c.Wait()
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !once && strings.Contains(sc.Text(), "listening on") {
				once = true
				close(ready)
			}
		}
		logf.Close()
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		return nil, "", fmt.Errorf("tcpdump did not start listening within 20s")
	}
	time.Sleep(200 * time.Millisecond)
	stop = func() {
		time.Sleep(500 * time.Millisecond) // the last packets reach the file
		stopProc(p, syscall.SIGINT)
	}
	return stop, "tcpdump " + strings.Join(args[:len(args)-3], " ") + " tcp port " + fmt.Sprint(port), nil
}

// kubectlProxy runs kubectl proxy on a free port in front of the cluster.
func (e *env) kubectlProxy() (port int, stop func(), err error) {
	port, err = freePort()
	if err != nil {
		return 0, nil, err
	}
	p, err := start(e.work, "kubectl-proxy", []string{"HOME=" + e.work}, e.kubectl, "proxy", "--port", fmt.Sprint(port),
		"--address", "127.0.0.1", "--kubeconfig", filepath.Join(e.c.dir, "admin.kubeconfig"))
	if err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/version", port))
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stopProc(p, syscall.SIGTERM)
			return 0, nil, fmt.Errorf("kubectl proxy not serving within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Printf("kubectl proxy on 127.0.0.1:%d", port)
	return port, func() { stopProc(p, syscall.SIGINT) }, nil
}
