package schedtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/proxytest"
)

// RecordOptions configure Record.
type RecordOptions struct {
	// Profile is the scheduler's profile (k8stest.SchedulerOptions.Profile;
	// "" the default scoring).
	Profile string
	// Scenario is what plays while the scheduler is recorded (its Logf
	// defaults to t.Logf).
	Scenario Options
	// Path is the session file (default recorded.wt in a t.TempDir()).
	Path string
	// Cluster is the apiserver to use (default: a new k8stest.Start(t));
	// the scenario's namespace and Nodes must not exist in it yet.
	Cluster *k8stest.Cluster
}

// Recording is what Record made.
type Recording struct {
	// Path is the session file of the scheduler's traffic.
	Path string
	// Bindings are where the scheduler bound each Pod.
	Bindings []Binding
	// Cluster is the apiserver it ran against (running until the test
	// ends).
	Cluster *k8stest.Cluster
	// Log is the scheduler's log.
	Log string
}

// Record records kube-scheduler through the recording proxy
// (proxytest.Record, as `wtrace record --proxy`) in front of a real
// apiserver while the scenario plays against the apiserver directly: the
// session holds the scheduler's requests — its LISTs and watches, its
// bindings and Events — and what it was answered. It waits, before the
// scenario starts, until the scheduler has synced its caches (WaitReady),
// so that it meets every change of the scenario as a watch event; after
// the scenario the scheduler and the proxy are stopped and the session
// file is closed. It fails t on any error, and skips it without the
// binaries.
func Record(t testing.TB, opts RecordOptions) Recording {
	t.Helper()
	k8stest.SchedulerBinary(t)
	c := opts.Cluster
	if c == nil {
		c = k8stest.Start(t)
	}
	path := opts.Path
	if path == "" {
		path = filepath.Join(t.TempDir(), "recorded.wt")
	}
	px := proxytest.Record(t, c.Kubeconfig, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: path}})
	s := k8stest.StartScheduler(t, k8stest.SchedulerOptions{URL: px.URL, Profile: opts.Profile})
	// kube-scheduler logs nothing once its caches are synced: its watches
	// of Pods and Nodes, then a second without a new request, say so.
	px.WaitWatching(2*time.Minute, time.Second, "/api/v1/pods", "/api/v1/nodes")
	sc := opts.Scenario
	if sc.Logf == nil {
		sc.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := Play(ctx, &rest.Config{Host: c.URL, BearerToken: k8stest.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}}, sc)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	px.Stop()
	return Recording{Path: path, Bindings: b, Cluster: c, Log: s.Log}
}
