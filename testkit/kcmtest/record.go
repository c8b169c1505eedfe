package kcmtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
)

// DeploymentControllers are the controllers a Deployment's scenario
// needs: the deployment and replicaset controllers, and the garbage
// collector and namespace controller that end it.
var DeploymentControllers = []string{"deployment", "replicaset", "garbagecollector", "namespace"}

// RecordOptions configure Record.
type RecordOptions struct {
	// Controllers are kcm's --controllers (default deployment,replicaset).
	Controllers []string
	// Args are more kcm flags.
	Args []string
	// Scenario is what plays while kcm is recorded (its Logf defaults to
	// t.Logf).
	Scenario Options
	// Path is the session file (default recorded.wt in a t.TempDir()).
	Path string
	// Cluster is the apiserver to use (default: a new k8stest.Start(t)).
	// Its namespace of the scenario must not exist yet.
	Cluster *k8stest.Cluster
	// Workloads, if set, plays the workloads scenario (PlayWorkloads)
	// instead of Scenario's; Controllers then default to
	// WorkloadControllers.
	Workloads *WorkloadOptions
}

// Recording is what Record made.
type Recording struct {
	// Path is the session file of kcm's traffic.
	Path string
	// Results are the scenario's steps, how each ended (Workloads: the
	// workloads scenario's).
	Results   []Result
	Workloads []WorkloadResult
	// Cluster is the apiserver it ran against (still running until the
	// test ends).
	Cluster *k8stest.Cluster
	// Log is kcm's log.
	Log string
}

// Record records kube-controller-manager through the recording proxy
// (proxytest.Record, as `wtrace record --proxy`) in front of a real
// apiserver while the scenario plays against the apiserver directly, as
// a user's kubectl would: the session holds kcm's requests and what it
// was answered, the scenario's changes reaching it through its watches.
// It waits, before the scenario starts, until kcm's controllers have
// synced their caches (its log says so; 2 minutes at most), so that kcm
// meets every change of the scenario as a watch event, not in an initial
// LIST; after the scenario, kcm and the proxy are stopped and the session
// file is closed. It fails t on any error, and skips it without the
// binaries.
func Record(t testing.TB, opts RecordOptions) Recording {
	t.Helper()
	k8stest.ControllerManagerBinary(t)
	c := opts.Cluster
	if c == nil {
		c = k8stest.Start(t)
	}
	path := opts.Path
	if path == "" {
		path = filepath.Join(t.TempDir(), "recorded.wt")
	}
	controllers := opts.Controllers
	if opts.Workloads != nil && controllers == nil {
		controllers = WorkloadControllers
	}
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: path}})
	kcm := k8stest.StartControllerManager(t, k8stest.ControllerManagerOptions{URL: px.URL, Controllers: controllers, Args: opts.Args})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := &rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}}
	rec := Recording{Path: path, Cluster: c, Log: kcm.Log}
	if opts.Workloads != nil {
		// Every controller's informers start at once: their Pod watch,
		// then two seconds without a new request, say they synced.
		px.WaitWatching(2*time.Minute, 2*time.Second, "/api/v1/pods")
		wo := *opts.Workloads
		if wo.Logf == nil {
			wo.Logf = t.Logf
		}
		res, err := PlayWorkloads(ctx, cfg, wo)
		if err != nil {
			t.Fatal(err)
		}
		rec.Workloads = res
	} else {
		WaitSynced(t, kcm.Log, controllers, 2*time.Minute)
		sc := opts.Scenario
		if sc.Logf == nil {
			sc.Logf = t.Logf
		}
		res, err := Play(ctx, cfg, sc)
		if err != nil {
			t.Fatal(err)
		}
		rec.Results = res
	}
	kcm.Stop()
	px.Stop()
	return rec
}

// syncedName is the name a controller of --controllers goes by in kcm's
// "Caches are synced" log lines, where it differs.
var syncedName = map[string]string{"garbagecollector": "garbage collector", "replicaset": "ReplicaSet"}

// WaitSynced waits until kcm's log at path says that each of controllers
// (default deployment,replicaset) has synced its informers' caches
// (`"Caches are synced" controller="deployment"`), failing t after d.
func WaitSynced(t testing.TB, path string, controllers []string, d time.Duration) {
	t.Helper()
	if len(controllers) == 0 {
		controllers = []string{"deployment", "replicaset"}
	}
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(path)
		var missing []string
		for _, c := range controllers {
			name := c
			if n, ok := syncedName[c]; ok {
				name = n
			}
			if !bytes.Contains(b, []byte(`"Caches are synced" controller="`+name+`"`)) {
				missing = append(missing, c)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: kube-controller-manager's log (%s) does not say that %s synced", d, path, strings.Join(missing, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
