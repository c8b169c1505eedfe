package k8stest

import (
	"os"
	"path/filepath"
	"testing"
)

// SchedulerBinary returns the path of kube-scheduler (beside
// kube-apiserver: $WTRACE_K8SBIN or /tmp/k8sbin), skipping t when it is
// absent or in -short mode.
func SchedulerBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "kube-scheduler")
}

// SchedulerOptions say which apiserver a kube-scheduler talks to and how
// it scores.
type SchedulerOptions struct {
	// URL, Token and CAPEM are as ControllerManagerOptions'.
	URL   string
	Token string
	CAPEM []byte
	// Profile, if not "", is the YAML of the default profile's members
	// after schedulerName (indented as a member of a list element: two
	// spaces), as in a KubeSchedulerConfiguration (v1):
	//
	//	  pluginConfig:
	//	  - name: NodeResourcesFit
	//	    args:
	//	      scoringStrategy: {type: MostAllocated}
	Profile string
	// Args are more flags.
	Args []string
	// Dir is where the kubeconfig, the configuration and the log
	// (kube-scheduler.log) go; default a new t.TempDir().
	Dir string
}

// Scheduler is a running kube-scheduler of a test.
type Scheduler struct {
	// Log is the path of its log (stdout and stderr).
	Log string
	// Config is the path of its KubeSchedulerConfiguration.
	Config string
	stop   func()
}

// StartScheduler runs kube-scheduler against opts.URL, configured by a
// KubeSchedulerConfiguration (leader election off, the default profile
// with opts.Profile) and --secure-port=0, until Stop or the end of the
// test (SIGTERM, then SIGKILL after 10 s; the end of its log goes to the
// test's log if the test failed). It returns once the process has
// started: the scheduler then lists and watches what it schedules with
// (Pods, Nodes, volumes, …) and schedules once its caches are synced.
func StartScheduler(t testing.TB, opts SchedulerOptions) *Scheduler {
	t.Helper()
	bin := SchedulerBinary(t)
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	kc := writeKubeconfig(t, filepath.Join(dir, "scheduler.kubeconfig"), opts.URL, opts.Token, opts.CAPEM)
	cfg := filepath.Join(dir, "scheduler.yaml")
	body := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection:\n  kubeconfig: " + kc + "\nleaderElection:\n  leaderElect: false\n" +
		"profiles:\n- schedulerName: default-scheduler\n" + opts.Profile
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config=" + cfg, "--secure-port=0"}, opts.Args...)
	stop := daemon(t, dir, t.Failed, "kube-scheduler", bin, args...)
	return &Scheduler{Log: filepath.Join(dir, "kube-scheduler.log"), Config: cfg, stop: stop}
}

// Stop stops the scheduler (SIGTERM, then SIGKILL after 10 s) and waits
// for it to exit; later calls, and the test's end, do nothing more.
func (s *Scheduler) Stop() { s.stop() }
