package k8stest

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ControllerManagerBinary returns the path of kube-controller-manager
// (beside kube-apiserver: $WTRACE_K8SBIN or /tmp/k8sbin), skipping t when
// it is absent or in -short mode.
func ControllerManagerBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "kube-controller-manager")
}

// ControllerManagerOptions say which apiserver a kube-controller-manager
// talks to and which controllers it runs.
type ControllerManagerOptions struct {
	// URL is the apiserver's base URL: a real one (Cluster.URL), the
	// recording proxy's (http://…), a replay's.
	URL string
	// Token is the bearer token sent, if any (Cluster's: Token).
	Token string
	// CAPEM is the CA of the server's certificate for an https URL; with
	// none, an https URL is not verified (insecure-skip-tls-verify).
	CAPEM []byte
	// Controllers are kcm's --controllers (default deployment,replicaset).
	Controllers []string
	// Args are more flags, after the defaults (a later flag wins).
	Args []string
	// Dir is where the kubeconfig and the log (kube-controller-manager.log)
	// go; default a new t.TempDir().
	Dir string
}

// ControllerManager is a running kube-controller-manager of a test.
type ControllerManager struct {
	// Log is the path of its log (stdout and stderr).
	Log string
	// Kubeconfig is the path of the kubeconfig it was given.
	Kubeconfig string
	stop       func()
}

// StartControllerManager runs kube-controller-manager against opts.URL
// with --leader-elect=false --use-service-account-credentials=false
// --secure-port=0 and the controllers of opts, until Stop or the end of
// the test (SIGTERM, then SIGKILL after 10 s; the end of its log goes to
// the test's log if the test failed). It returns once the process has
// started: kcm then discovers the API and starts its informers and
// controllers, which takes a few seconds. kcm creates Pods only once a
// ServiceAccount "default" exists in their namespace (the apiserver's
// ServiceAccount admission; no serviceaccount controller runs unless
// asked).
func StartControllerManager(t testing.TB, opts ControllerManagerOptions) *ControllerManager {
	t.Helper()
	bin := ControllerManagerBinary(t)
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []string{"deployment", "replicaset"}
	}
	kc := writeKubeconfig(t, filepath.Join(dir, "kcm.kubeconfig"), opts.URL, opts.Token, opts.CAPEM)
	args := append([]string{"--kubeconfig=" + kc, "--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0"}, opts.Args...)
	stop := daemon(t, dir, t.Failed, "kube-controller-manager", bin, args...)
	return &ControllerManager{Log: filepath.Join(dir, "kube-controller-manager.log"), Kubeconfig: kc, stop: stop}
}

// Stop stops kcm (SIGTERM, then SIGKILL after 10 s) and waits for it to
// exit; later calls, and the test's end, do nothing more.
func (m *ControllerManager) Stop() { m.stop() }

// binary returns the path of the named binary beside kube-apiserver
// ($WTRACE_K8SBIN or /tmp/k8sbin), skipping t when it is absent or in
// -short mode (what it starts takes seconds).
func binary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv(Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s not found (set $%s, or build with ../shared/corpus/tools/build-k8s.sh): %v", bin, Env, err)
	}
	if testing.Short() {
		t.Skipf("starts %s: not in -short mode", name)
	}
	return bin
}

// writeKubeconfig writes, at path, a kubeconfig for a component talking
// to url (with token, if any, and the server's CA, if any; an https url
// without one is not verified), and returns path.
func writeKubeconfig(t testing.TB, path, url, token string, caPEM []byte) string {
	t.Helper()
	cluster := "    server: " + url + "\n"
	switch {
	case len(caPEM) > 0:
		cluster += "    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM) + "\n"
	case strings.HasPrefix(url, "https:"):
		cluster += "    insecure-skip-tls-verify: true\n"
	}
	user := "  user: {}\n"
	if token != "" {
		user = "  user:\n    token: " + token + "\n"
	}
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n%susers:\n- name: component\n%scontexts:\n- name: test\n  context: {cluster: test, user: component}\ncurrent-context: test\n", cluster, user)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
