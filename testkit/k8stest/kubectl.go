package k8stest

import (
	"os"
	"path/filepath"
	"testing"
)

// Kubectl returns the path of kubectl beside kube-apiserver ($WTRACE_K8SBIN,
// or /tmp/k8sbin), skipping t when it is absent: the reference for what
// wtrace does as kubectl does (kubectl proxy's filter).
func Kubectl(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found (set $%s, or build with ../shared/corpus/tools/build-k8s.sh): %v", p, Env, err)
	}
	return p
}
