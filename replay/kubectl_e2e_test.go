package replay_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/kcmtest"
)

// kubectlBinary returns the path of kubectl beside kube-apiserver, skipping
// t without it.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(k8stest.Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s not found (.ci/run builds it beside kube-apiserver): %v", bin, err)
	}
	return bin
}

// TestKubectlOnReplay: kubectl against a replay of a controller's session,
// as a user debugging it would use it. kube-controller-manager is recorded
// with a kubelet stand-in in the environment (Pods reported ready), the
// session replayed to a new kcm — the recorded kubelet's changes to the
// recorded Pods follow the run's Pods, so the run's Deployments become
// available — and kubectl gets, describes, waits for a rollout, scales,
// applies client-side and server-side with validation, as against an
// apiserver.
func TestKubectlOnReplay(t *testing.T) {
	kubectl := kubectlBinary(t)
	k8stest.ControllerManagerBinary(t)
	recorded := kcmtest.Record(t, kcmtest.RecordOptions{Controllers: kcmControllers,
		Scenario: kcmtest.Options{Kubelet: 300 * time.Millisecond}})
	srv := replaytest.NewServer(t, recorded.Path, replay.Options{Pace: replay.PaceQuiet})
	kcm := k8stest.StartControllerManager(t, k8stest.ControllerManagerOptions{URL: srv.URL, Controllers: kcmControllers})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !srv.Settle(ctx.Done(), 2*time.Second) {
		t.Fatalf("the run did not settle (kcm log: %s)", kcm.Log)
	}
	env := srv.Environment()
	t.Logf("%s", env)
	for _, d := range env.Dropped {
		t.Errorf("dropped %s %s %s: %s", d.Type, d.Resource.Resource, d.Change.Key, d.Reason)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, srv.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := kcmtest.Namespace
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc, "-n", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	must := func(want string, args ...string) {
		t.Helper()
		out, err := run("", args...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("kubectl %s: %v; want output with %q", strings.Join(args, " "), err, want)
		}
	}
	must("web", "get", "deployments")
	must("2/2", "get", "deployment", "web")
	must("Replicas:", "describe", "deployment", "web")
	must("successfully rolled out", "rollout", "status", "deployment/web", "--timeout=60s")
	must("scaled", "scale", "deployment/api", "--replicas=3")
	must("3", "get", "deployment", "api", "-o", "jsonpath={.spec.replicas}")

	manifest := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: extra
spec:
  replicas: 1
  selector:
    matchLabels: {app: extra}
  template:
    metadata:
      labels: {app: extra}
    spec:
      containers:
      - name: c
        image: nginx:1.27
`
	for _, tc := range []struct {
		stdin, want string
		args        []string
	}{
		{manifest, "created", []string{"apply", "-f", "-"}},
		{strings.Replace(manifest, "replicas: 1", "replicas: 2", 1), "configured", []string{"apply", "-f", "-"}},
		{strings.Replace(manifest, "replicas: 2", "replicas: 1", 1), "serverside-applied", []string{"apply", "--server-side", "--force-conflicts", "-f", "-"}},
	} {
		out, err := run(tc.stdin, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("kubectl %s: %v; want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Validation: an unknown field is refused, as by the apiserver.
	bad := strings.Replace(manifest, "  replicas: 1\n", "  replicas: 1\n  replicaz: 2\n", 1)
	if out, err := run(bad, "apply", "-f", "-"); err == nil || !strings.Contains(out, "unknown field") {
		t.Errorf("kubectl apply of an unknown field: %v; want it refused naming the field", err)
	}
}
