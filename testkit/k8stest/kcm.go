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
	dir := os.Getenv(Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	bin := filepath.Join(dir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s not found (set $%s, or build with ../shared/corpus/tools/build-k8s.sh): %v", bin, Env, err)
	}
	if testing.Short() {
		t.Skip("starts kube-controller-manager: not in -short mode")
	}
	return bin
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
	cluster := "    server: " + opts.URL + "\n"
	switch {
	case len(opts.CAPEM) > 0:
		cluster += "    certificate-authority-data: " + base64.StdEncoding.EncodeToString(opts.CAPEM) + "\n"
	case strings.HasPrefix(opts.URL, "https:"):
		cluster += "    insecure-skip-tls-verify: true\n"
	}
	user := "  user: {}\n"
	if opts.Token != "" {
		user = "  user:\n    token: " + opts.Token + "\n"
	}
	kc := filepath.Join(dir, "kcm.kubeconfig")
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n%susers:\n- name: kcm\n%scontexts:\n- name: test\n  context: {cluster: test, user: kcm}\ncurrent-context: test\n", cluster, user)
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + kc, "--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0"}, opts.Args...)
	stop := daemon(t, dir, t.Failed, "kube-controller-manager", bin, args...)
	return &ControllerManager{Log: filepath.Join(dir, "kube-controller-manager.log"), Kubeconfig: kc, stop: stop}
}

// Stop stops kcm (SIGTERM, then SIGKILL after 10 s) and waits for it to
// exit; later calls, and the test's end, do nothing more.
func (m *ControllerManager) Stop() { m.stop() }
