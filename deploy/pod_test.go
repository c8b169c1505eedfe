package deploy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// No kubelet or container runtime runs here: a pod of the manifests is
// run as a kubelet runs it, with its containers as local processes of the
// wtrace binary (the image the manifests name) — their args with $(VAR)
// expanded from their env (values, ConfigMap keys of the build, the
// memory limit, the pod's name), their volumes as directories (an
// emptyDir a new one, a ConfigMap its keys as files, an absent optional
// Secret an empty one, a claim the directory the test gives for it) at
// their mount paths (each path of a mount in an argument or a value is
// the directory's), its init containers to completion in order, then its
// container, whose probes are then polled as the kubelet polls them. What
// only a node does is not done: the image's file system and user, the
// security context, resource limits; the listener's 0.0.0.0 becomes
// 127.0.0.1 and a free port.

// wtraceBinary builds the wtrace command once for the tests.
var wtraceBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "wtrace-deploy-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "wtrace")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/wtrace/wtrace/cmd/wtrace").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	bin, err := wtraceBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// pod is a pod template of the build being run.
type pod struct {
	t       *testing.T
	name    string
	objs    []*unstructured.Unstructured
	spec    map[string]any
	mounts  map[string]string // volume name → host directory
	claims  map[string]string // claim name → host directory
	ports   map[string]string // container port (name and number) → 127.0.0.1:port
	running []*proc
	// deferred: the test that made the pod leaves its stop to stopAll.
	deferred bool
}

// proc is a container running.
type proc struct {
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{} // closed once it exited; err then says how
	err  error
}

// newPod prepares the pod template of the workload kind/name of objs;
// claims gives the directories of its persistent volume claims.
func newPod(t *testing.T, objs []*unstructured.Unstructured, kind, name string, claims map[string]string) *pod {
	t.Helper()
	w := find(t, objs, kind, name)
	spec, _, _ := unstructured.NestedMap(w.Object, "spec", "template", "spec")
	p := &pod{t: t, name: name + "-7d9c5-x2k4q", objs: objs, spec: spec, mounts: map[string]string{}, claims: claims, ports: map[string]string{}}
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		p.volume(v.(map[string]any))
	}
	t.Cleanup(p.stop)
	return p
}

// stopAll stops pods whose stop was deferred (deferStop) at once — each
// waits its shutdown delay, in parallel — reporting to t.
func stopAll(t *testing.T, pods []*pod) {
	done := make(chan struct{}, len(pods))
	for _, p := range pods {
		p.t, p.deferred = t, false
		go func() {
			p.stop()
			done <- struct{}{}
		}()
	}
	for range pods {
		<-done
	}
}

func (p *pod) volume(v map[string]any) {
	t := p.t
	name := v["name"].(string)
	dir := t.TempDir()
	switch {
	case v["emptyDir"] != nil:
	case v["configMap"] != nil:
		cm := find(t, p.objs, "ConfigMap", str(v, "configMap", "name"))
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		bin, _, _ := unstructured.NestedStringMap(cm.Object, "binaryData")
		for k, s := range data {
			writeFile(t, filepath.Join(dir, k), []byte(s))
		}
		for k, s := range bin {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("ConfigMap %s binaryData %s: %v", cm.GetName(), k, err)
			}
			writeFile(t, filepath.Join(dir, k), b)
		}
	case v["secret"] != nil:
		if opt, _, _ := unstructured.NestedBool(v, "secret", "optional"); !opt {
			t.Fatalf("volume %s: a Secret that is not optional (none exists here)", name)
		}
	case v["persistentVolumeClaim"] != nil:
		c := str(v, "persistentVolumeClaim", "claimName")
		if p.claims[c] == "" {
			t.Fatalf("volume %s: claim %s has no directory", name, c)
		}
		dir = p.claims[c]
	default:
		t.Fatalf("volume %s: %v is not one the test can give", name, v)
	}
	p.mounts[name] = dir
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// command is how a container of the pod runs here: the wtrace binary
// with its args, its environment, its mounts' paths.
func (p *pod) command(c map[string]any) *exec.Cmd {
	t := p.t
	if img := str(c, "image"); !strings.HasPrefix(img, "wtrace:") {
		t.Fatalf("container %s: image %s; only wtrace runs here", str(c, "name"), img)
	}
	// Mount paths, longest first, and what they are here.
	type mount struct{ path, dir string }
	var ms []mount
	vms, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	for _, vm := range vms {
		vm := vm.(map[string]any)
		dir, ok := p.mounts[vm["name"].(string)]
		if !ok {
			t.Fatalf("container %s mounts %v, no volume of the pod", str(c, "name"), vm["name"])
		}
		ms = append(ms, mount{vm["mountPath"].(string), dir})
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i].path) > len(ms[j].path) })
	local := func(s string) string {
		for _, m := range ms {
			if s == m.path || strings.HasPrefix(s, m.path+"/") {
				return m.dir + strings.TrimPrefix(s, m.path)
			}
			if i := strings.Index(s, "="+m.path); i >= 0 && (len(s) == i+1+len(m.path) || s[i+1+len(m.path)] == '/') {
				return s[:i+1] + m.dir + s[i+1+len(m.path):]
			}
		}
		return s
	}
	env := map[string]string{}
	var environ []string
	es, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range es {
		e := e.(map[string]any)
		n := e["name"].(string)
		v, ok := e["value"].(string)
		switch {
		case ok:
		case str(e, "valueFrom", "configMapKeyRef", "name") != "":
			cm := find(t, p.objs, "ConfigMap", str(e, "valueFrom", "configMapKeyRef", "name"))
			v = str(cm.Object, "data", str(e, "valueFrom", "configMapKeyRef", "key"))
		case str(e, "valueFrom", "resourceFieldRef", "resource") == "limits.memory":
			q := resource.MustParse(str(c, "resources", "limits", "memory"))
			v = strconv.FormatInt(q.Value(), 10)
		case str(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.name":
			v = p.name
		default:
			t.Fatalf("env %s: %v is not one the test can give", n, e)
		}
		v = local(expand(v, env))
		env[n] = v
		environ = append(environ, n+"="+v)
	}
	for _, m := range ms {
		if m.path == "/tmp" {
			environ = append(environ, "TMPDIR="+m.dir)
		}
	}
	raw, _, _ := unstructured.NestedStringSlice(c, "args")
	var args []string
	for _, a := range raw {
		a = expand(local(a), env) // env's values are local already
		if v, ok := strings.CutPrefix(a, "--listen=0.0.0.0:"); ok {
			addr := freeAddr(t)
			p.ports[v] = addr
			ports, _, _ := unstructured.NestedSlice(c, "ports")
			for _, port := range ports {
				port := port.(map[string]any)
				if fmt.Sprint(port["containerPort"]) == v {
					p.ports[fmt.Sprint(port["name"])] = addr
				}
			}
			a = "--listen=" + addr
		}
		args = append(args, a)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), environ...)
	return cmd
}

// expand replaces $(VAR) with env's value, as the kubelet does for the
// variables the container defines (others are left as they are).
func expand(s string, env map[string]string) string {
	for k, v := range env {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runInit runs the pod's init containers, each to its end (exit 0).
func (p *pod) runInit() {
	t := p.t
	inits, _, _ := unstructured.NestedSlice(p.spec, "initContainers")
	for _, c := range inits {
		c := c.(map[string]any)
		if str(c, "restartPolicy") == "Always" {
			t.Fatalf("init container %s is a sidecar: not run here", str(c, "name"))
		}
		out, err := p.command(c).CombinedOutput()
		if err != nil {
			t.Fatalf("init container %s: %v\n%s", str(c, "name"), err, out)
		}
	}
}

// run runs the pod's container to its end (a Job's) and returns its log.
func (p *pod) run() string {
	p.t.Helper()
	p.runInit()
	cs, _, _ := unstructured.NestedSlice(p.spec, "containers")
	out, err := p.command(cs[0].(map[string]any)).CombinedOutput()
	if err != nil {
		p.t.Fatalf("container %s: %v\n%s", str(cs[0].(map[string]any), "name"), err, out)
	}
	return string(out)
}

// start starts the pod's container and waits until its startup probe,
// then its readiness probe, pass; it returns the address of port.
func (p *pod) start(port string) string {
	t := p.t
	t.Helper()
	p.runInit()
	cs, _, _ := unstructured.NestedSlice(p.spec, "containers")
	c := cs[0].(map[string]any)
	cmd := p.command(c)
	pr := &proc{cmd: cmd, log: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = pr.log, pr.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.running = append(p.running, pr)
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	for _, probe := range []string{"startupProbe", "readinessProbe"} {
		p.probe(c, probe, pr)
	}
	return p.ports[port]
}

// probe polls a probe as the kubelet does, within its periods × its
// failure threshold (each period at most a second here).
func (p *pod) probe(c map[string]any, name string, pc *proc) {
	t := p.t
	t.Helper()
	pr, _, _ := unstructured.NestedMap(c, name)
	if pr == nil {
		return
	}
	period, failures := num(pr, "periodSeconds"), num(pr, "failureThreshold")
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	addr := p.ports[str(pr, "httpGet", "port")]
	if addr == "" {
		t.Fatalf("%s: port %s is not the replay's", name, str(pr, "httpGet", "port"))
	}
	deadline := time.Now().Add(time.Duration(period*failures) * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + addr + str(pr, "httpGet", "path"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-pc.done:
			t.Fatalf("the container exited (%v) before its %s passed:\n%s", pc.err, name, pc.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not pass within %d × %d s:\n%s", name, failures, period, pc.log.String())
		}
		time.Sleep(min(time.Duration(period)*time.Second, 200*time.Millisecond))
	}
}

// stop sends the running container SIGTERM and waits for it (the pod's
// terminationGracePeriodSeconds at most).
func (p *pod) stop() {
	if p.deferred {
		return
	}
	grace := num(p.spec, "terminationGracePeriodSeconds")
	for _, pr := range p.running {
		pr.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-pr.done:
			if pr.err != nil {
				p.t.Errorf("the container exited with %v after SIGTERM:\n%s", pr.err, pr.log.String())
			}
		case <-time.After(time.Duration(max(grace, 30)) * time.Second):
			pr.cmd.Process.Kill()
			<-pr.done
			p.t.Errorf("the container did not stop within its grace period:\n%s", pr.log.String())
		}
	}
	p.running = nil
}

// str reads a string at path in o ("" if absent).
func str(o map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedString(o, path...)
	return v
}
