package deploy

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/k8stest"
)

// The largest session overlays/session-configmap carries, as measured by
// TestConfigMapLimit against kube-apiserver v1.33 (to the byte, in the
// default namespace; a longer namespace name takes a few bytes off the
// first): with `kubectl apply -k` (client-side apply: the
// last-applied-configuration annotation holds the whole ConfigMap, its
// session in base64, and annotations are limited to 256 KiB in all) and
// with `kubectl apply --server-side -k` (a ConfigMap's data is limited to
// 1 MiB). The README and the overlay state them.
const (
	configMapLimitClientSide = 190_992
	configMapLimitServerSide = 1_048_576
)

// TestConfigMapLimit: a session of the documented limit's size goes into
// the ConfigMap of overlays/session-configmap through `kubectl apply -k`
// (client side, and --server-side), one byte more is refused, against a
// real kube-apiserver (--dry-run=server: the apiserver validates as for
// a real apply). The ConfigMap is generated as the overlay generates it
// (configMapGenerator, files: session.wt). -v with WTRACE_MEASURE=1
// searches the limits instead of checking them.
func TestConfigMapLimit(t *testing.T) {
	c := k8stest.Start(t)
	kc := kubectl()
	if kc == "" {
		t.Skip("no kubectl next to the apiserver")
	}
	apply := func(size int, serverSide bool) (bool, string) {
		dir := t.TempDir()
		b := make([]byte, size)
		rand.Read(b)
		writeFile(t, filepath.Join(dir, "session.wt"), b)
		writeFile(t, filepath.Join(dir, "kustomization.yaml"), []byte("configMapGenerator:\n  - name: wtrace-session-file\n    files:\n      - session.wt\n"))
		args := []string{"--kubeconfig", c.Kubeconfig, "apply", "-k", dir, "--dry-run=server"}
		if serverSide {
			args = append(args, "--server-side")
		}
		out, err := exec.Command(kc, args...).CombinedOutput()
		return err == nil, string(out)
	}
	for _, tc := range []struct {
		name       string
		serverSide bool
		limit      int
	}{{"client-side", false, configMapLimitClientSide}, {"server-side", true, configMapLimitServerSide}} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Getenv("WTRACE_MEASURE") != "" {
				lo, hi := 1000, 4<<20 // lo passes, hi fails
				for hi-lo > 1 {
					mid := (lo + hi) / 2
					if ok, _ := apply(mid, tc.serverSide); ok {
						lo = mid
					} else {
						hi = mid
					}
				}
				_, why := apply(hi, tc.serverSide)
				t.Logf("%s: %d bytes pass, %d fail: %s", tc.name, lo, hi, strings.TrimSpace(why))
				return
			}
			if ok, out := apply(tc.limit, tc.serverSide); !ok {
				t.Errorf("kubectl apply -k of a %d-byte session (%s): refused\n%s", tc.limit, tc.name, out)
			}
			if ok, _ := apply(tc.limit+1, tc.serverSide); ok {
				t.Errorf("kubectl apply -k of a %d-byte session (%s): accepted; the documented limit is %d", tc.limit+1, tc.name, tc.limit)
			}
		})
	}
}
