package main

import (
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/internal/hostfilter"
)

// TestReplicaArgs: the replicas get the replay container's arguments of
// the manifests, and those accept the Host the watchers send (the
// Service's name), as a replica in the cluster does.
func TestReplicaArgs(t *testing.T) {
	args, err := replicaArgs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	accept := hostfilter.DefaultAcceptHosts
	for _, a := range args {
		if strings.HasPrefix(a, "--listen") {
			t.Errorf("args %q keep --listen", args)
		}
		if v, ok := strings.CutPrefix(a, "--accept-hosts="); ok {
			accept = v
		}
	}
	f, err := hostfilter.New(hostfilter.Split(accept), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", watchTarget, nil)
	r.Host = serviceHost
	if err := f.Check(r); err != nil {
		t.Errorf("the manifests' replay (%q) refuses Host %s: %v", args, serviceHost, err)
	}
}

// TestRun: a small run against replicas as deployed delivers every
// event and succeeds; against replicas that refuse the watchers' Host
// (the replay's loopback-only default) it fails, after printing the
// table. Skipped without haproxy.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed (apt-get install haproxy)")
	}
	if testing.Short() {
		t.Skip("builds wtrace and runs replicas behind haproxy")
	}
	bin := filepath.Join(t.TempDir(), "wtrace")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/wtrace/wtrace/cmd/wtrace").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	deployed, err := replicaArgs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{replicas: "2", watchers: "6", duration: time.Second, gap: 100 * time.Millisecond, rounds: 1, bin: bin, args: deployed}
	var out strings.Builder
	if err := run(&out, cfg); err != nil {
		t.Fatalf("run as deployed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "(0 failed)") || !strings.Contains(out.String(), "60 received, want 60") {
		t.Errorf("run as deployed:\n%s", out.String())
	}
	cfg.args = []string{"--writes=reject", "--log-format=json"} // loopback Hosts only
	out.Reset()
	err = run(&out, cfg)
	if !errors.Is(err, errWatchers) || !strings.Contains(err.Error(), "403") {
		t.Errorf("run against replicas refusing the Host: %v; want the watchers' 403s\n%s", err, out.String())
	}
	t.Logf("%v", err)
}
