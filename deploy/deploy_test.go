// Package deploy holds the Kubernetes manifests of wtrace (kustomize) and
// their tests: every kustomization builds, a real kube-apiserver accepts
// what it builds (kubectl apply -k DIR --dry-run=server), the manifests
// say what an operator expects of them (TestManifests, TestPodMonitors),
// and their pods replay a 65 MB session from each of their sources
// (TestSessionSources, run as a kubelet would run them: pod_test.go).
package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/wtrace/wtrace/testkit/k8stest"
)

// kustomizations are the directories users apply: the default, each
// variant of the replay, the load of the claim, and a controller with the
// record-sidecar Component (testdata/controller, in its own namespace).
var kustomizations = []string{".", "overlays/writes-answer", "overlays/session-fetch", "overlays/session-pvc/load",
	"overlays/session-pvc", "overlays/session-configmap", "testdata/controller"}

// kubectl returns the kubectl next to the test apiserver's binaries
// ($WTRACE_K8SBIN or /tmp/k8sbin), or "" without one.
func kubectl() string {
	dir := os.Getenv(k8stest.Env)
	if dir == "" {
		dir = "/tmp/k8sbin"
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestDryRunServer: `kubectl apply -k DIR --dry-run=server` is accepted
// by a real kube-apiserver (testkit/k8stest) for every kustomization, each
// object of the build. Without kubectl, the same through kustomize's
// library (krusty, the kustomize kubectl embeds) and client-go's dynamic
// client with dryRun=All; both when kubectl is there.
func TestDryRunServer(t *testing.T) {
	c := k8stest.Start(t) // skipped without the binaries
	if resp, b := c.Do("POST", "/api/v1/namespaces", http.Header{"Content-Type": {"application/json"}}, []byte(`{"metadata":{"name":"team-a"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create namespace team-a: %s %s", resp.Status, b)
	}
	kc := kubectl()
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			built := build(t, dir)
			if kc != "" {
				out, err := exec.Command(kc, "--kubeconfig", c.Kubeconfig, "apply", "-k", dir, "--dry-run=server").CombinedOutput()
				if err != nil {
					t.Fatalf("kubectl apply -k %s --dry-run=server: %v\n%s", dir, err, out)
				}
				if n := strings.Count(string(out), "(server dry run)"); n != len(objects(t, built)) {
					t.Errorf("kubectl apply: %d objects accepted, the build has %d:\n%s", n, len(objects(t, built)), out)
				}
			} else {
				t.Log("no kubectl next to the apiserver: kustomize's library and client-go only")
			}
			dryRunLibrary(t, c.Kubeconfig, built)
		})
	}
}

// build runs kustomize (krusty) on dir, as kubectl kustomize does.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	y, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// objects splits a multi-document YAML stream.
func objects(t *testing.T, y []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the build: %v", err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

// find returns the object of kind and name in objs.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the build", kind, name)
	return nil
}

// dryRunLibrary creates every object of y on the apiserver of kubeconfig
// with dryRun=All (what apply --dry-run=server does for new objects).
func dryRunLibrary(t *testing.T, kubeconfig string, y []byte) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, y) {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", gvk.Kind, o.GetName(), err)
			continue
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("create --dry-run=server %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
}

// replayPod returns the pod template of the replay's Deployment in objs
// and its replay container.
func replayPod(t *testing.T, objs []*unstructured.Unstructured) (pod, container map[string]any) {
	t.Helper()
	d := find(t, objs, "Deployment", "wtrace-replay")
	pod, _, _ = unstructured.NestedMap(d.Object, "spec", "template")
	cs, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
	return pod, cs[0].(map[string]any)
}

func args(c map[string]any) map[string]string {
	raw, _, _ := unstructured.NestedStringSlice(c, "args")
	out := map[string]string{}
	for i, a := range raw {
		k, v, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(k, "--") {
			k = fmt.Sprint(i) // positional
			v = a
		}
		out[k] = v
	}
	return out
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
}

// num reads a number at path in o (0 if absent): decoded YAML holds
// float64 or int64.
func num(o map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(o, path...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// sessionSource is what the replay container is given as its session
// (the ConfigMap key its $(WTRACE_SESSION) names).
func sessionSource(t *testing.T, objs []*unstructured.Unstructured, c map[string]any) string {
	t.Helper()
	if a := args(c)["1"]; a != "$(WTRACE_SESSION)" {
		t.Fatalf("replay args: session %q; want $(WTRACE_SESSION)", a)
	}
	es, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range es {
		e := e.(map[string]any)
		if e["name"] == "WTRACE_SESSION" {
			cm := find(t, objs, "ConfigMap", str(e, "valueFrom", "configMapKeyRef", "name"))
			return str(cm.Object, "data", str(e, "valueFrom", "configMapKeyRef", "key"))
		}
	}
	t.Fatal("no WTRACE_SESSION in the replay's env")
	return ""
}

// TestManifests: what the manifests promise an operator, read from the
// builds. The default apply is the replay alone — no placeholder workload,
// no claim — its pods labelled as their monitors and selectors expect,
// spread over zones and nodes, under a disruption budget, probed as a
// session that loads must be (the startup probe waits for /readyz), and
// stopped in order: /readyz fails (the probe notices within its period),
// the replica serves on for --shutdown-delay, longer than that, then
// drains within --shutdown-grace, inside terminationGracePeriodSeconds.
// Each variant changes what it says and nothing else; the record-sidecar
// Component makes a native sidecar of the recorder in a controller's pod,
// in the controller's namespace, with no permissions of its own.
func TestManifests(t *testing.T) {
	objs := objects(t, build(t, "."))
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+" "+strings.SplitN(o.GetName(), "-", 3)[0]+"-"+strings.SplitN(o.GetName(), "-", 3)[1])
		if img, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers"); img != nil {
			for _, c := range img {
				if i := str(c.(map[string]any), "image"); i != "wtrace:devel" {
					t.Errorf("%s %s runs image %s; the default apply runs only wtrace", o.GetKind(), o.GetName(), i)
				}
			}
		}
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap wtrace-session", "Deployment wtrace-replay", "PodDisruptionBudget wtrace-replay", "Service wtrace-replay"}; !slices.Equal(kinds, want) {
		t.Errorf("kubectl apply -k deploy makes %q; want %q", kinds, want)
	}

	pod, c := replayPod(t, objs)
	for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz", "startupProbe": "/readyz"} {
		if got := str(c, probe, "httpGet", "path"); got != path || str(c, probe, "httpGet", "port") != "http" {
			t.Errorf("%s: %s on %s; want %s on the http port", probe, got, str(c, probe, "httpGet", "port"), path)
		}
	}
	if s := num(c, "startupProbe", "periodSeconds") * num(c, "startupProbe", "failureThreshold"); s < 300 {
		t.Errorf("the startup probe gives the session %d s to be fetched and loaded; want minutes", s)
	}
	a := args(c)
	for k, want := range map[string]string{"0": "replay", "--listen": "0.0.0.0:8080", "--writes": "reject", "--log-format": "json", "--accept-hosts": ".*"} {
		if a[k] != want {
			t.Errorf("replay %s = %q; want %q (args %v)", k, a[k], want, a)
		}
	}
	if src := sessionSource(t, objs, c); !strings.HasPrefix(src, "oci://") {
		t.Errorf("the default session source %q; want a registry's artifact", src)
	}
	readinessGone := time.Duration(num(c, "readinessProbe", "periodSeconds")*max(num(c, "readinessProbe", "failureThreshold"), 1)) * time.Second
	delay, grace := duration(t, a["--shutdown-delay"]), duration(t, a["--shutdown-grace"])
	if delay < readinessGone+5*time.Second {
		t.Errorf("--shutdown-delay %v: the readiness probe fails within %v, then the endpoints must drop the pod; want at least 5 s more", delay, readinessGone)
	}
	if tg := time.Duration(num(pod, "spec", "terminationGracePeriodSeconds")) * time.Second; tg <= delay+grace {
		t.Errorf("terminationGracePeriodSeconds %v: the replay needs --shutdown-delay %v + --shutdown-grace %v", tg, delay, grace)
	}
	if str(c, "image") != "wtrace:devel" {
		t.Errorf("image %q; want wtrace:devel", str(c, "image"))
	}
	if v, _, _ := unstructured.NestedBool(pod, "spec", "securityContext", "runAsNonRoot"); !v {
		t.Error("the replay's pod may run as root")
	}
	if v, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !v {
		t.Error("the replay's root filesystem is writable")
	}
	ann, _, _ := unstructured.NestedStringMap(pod, "metadata", "annotations")
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "8080" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v", ann)
	}
	labels, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	if labels["app.kubernetes.io/part-of"] != "wtrace" || labels["app.kubernetes.io/name"] != "wtrace-replay" {
		t.Errorf("pod template labels %v; want app.kubernetes.io/name and part-of", labels)
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget"} {
		o := find(t, objs, kind, "wtrace-replay")
		path := []string{"spec", "selector"}
		if kind == "PodDisruptionBudget" {
			path = append(path, "matchLabels")
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, path...)
		if len(sel) == 0 || !matches(sel, labels) {
			t.Errorf("the %s selects %v; the pods have %v", kind, sel, labels)
		}
	}
	if v := str(find(t, objs, "PodDisruptionBudget", "wtrace-replay").Object, "spec", "unhealthyPodEvictionPolicy"); v != "AlwaysAllow" {
		t.Errorf("the PodDisruptionBudget's unhealthyPodEvictionPolicy %q", v)
	}
	spread, _, _ := unstructured.NestedSlice(pod, "spec", "topologySpreadConstraints")
	keys := map[string]bool{}
	for _, s := range spread {
		s := s.(map[string]any)
		keys[str(s, "topologyKey")] = true
		sel, _, _ := unstructured.NestedStringMap(s, "labelSelector", "matchLabels")
		if !matches(sel, labels) {
			t.Errorf("topology spread over %s selects %v; the pods have %v", str(s, "topologyKey"), sel, labels)
		}
	}
	if !keys["topology.kubernetes.io/zone"] || !keys["kubernetes.io/hostname"] {
		t.Errorf("topology spread over %v; want zones and nodes", keys)
	}

	for _, dir := range kustomizations[1:6] {
		objs := objects(t, build(t, dir))
		if dir == "overlays/session-pvc/load" {
			j := find(t, objs, "Job", "wtrace-session-load")
			cs, _, _ := unstructured.NestedSlice(j.Object, "spec", "template", "spec", "containers")
			if a := args(cs[0].(map[string]any)); a["0"] != "pull" || a["3"] != "/sessions/session.wt" {
				t.Errorf("%s: the Job runs %v; want wtrace pull … -o /sessions/session.wt", dir, a)
			}
			if pvc := find(t, objs, "PersistentVolumeClaim", "wtrace-sessions"); !slices.Contains(mustStrings(pvc.Object, "spec", "accessModes"), "ReadWriteMany") {
				t.Errorf("%s: the claim is not ReadWriteMany", dir)
			}
			continue
		}
		svc := find(t, objs, "Service", "wtrace-replay")
		_, c := replayPod(t, objs)
		writes := args(c)["--writes"]
		affinity := str(svc.Object, "spec", "sessionAffinity")
		if (writes == "answer" || writes == "apply") != (affinity == "ClientIP") {
			t.Errorf("%s: --writes=%s with sessionAffinity %q: a replay that answers writes needs ClientIP, a read-only one does not", dir, writes, affinity)
		}
		src := sessionSource(t, objs, c)
		switch dir {
		case "overlays/writes-answer":
			if writes != "answer" {
				t.Errorf("%s: --writes=%s", dir, writes)
			}
		case "overlays/session-fetch":
			if !strings.HasPrefix(src, "https://") {
				t.Errorf("%s: the session %q; want a URL", dir, src)
			}
		case "overlays/session-pvc", "overlays/session-configmap":
			if !mounted(c, src) {
				t.Errorf("%s: the session %q is on no mount of the container", dir, src)
			}
		}
	}

	objs = objects(t, build(t, "testdata/controller"))
	for _, o := range objs {
		if o.GetNamespace() != "team-a" {
			t.Errorf("%s %s in namespace %q; want the controller's, team-a", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		switch o.GetKind() {
		case "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "PersistentVolumeClaim":
			t.Errorf("the record-sidecar Component makes a %s: the recorder has the controller's permissions and keeps its recordings in the pod", o.GetKind())
		}
	}
	ctl := find(t, objs, "Deployment", "controller-manager")
	inits, _, _ := unstructured.NestedSlice(ctl.Object, "spec", "template", "spec", "initContainers")
	rec := inits[0].(map[string]any)
	if str(rec, "restartPolicy") != "Always" {
		t.Error("the recorder is not a native sidecar (restartPolicy: Always)")
	}
	ra := args(rec)
	if _, proxy := ra["--proxy"]; !proxy || ra["--listen"] != "127.0.0.1:8001" || ra["--health-listen"] != "0.0.0.0:8081" {
		t.Errorf("recorder args %v", ra)
	}
	if str(rec, "readinessProbe", "httpGet", "path") != "/readyz" || str(rec, "readinessProbe", "httpGet", "port") != "wtrace-health" {
		t.Error("the recorder's readiness probe is not /readyz on its health port")
	}
	cs, _, _ := unstructured.NestedSlice(ctl.Object, "spec", "template", "spec", "containers")
	mgr := cs[0].(map[string]any)
	if len(cs) != 1 || str(mgr, "image") != "controller:latest" {
		t.Fatalf("the controller's containers %v; want its one container, patched", cs)
	}
	kc := ""
	es, _, _ := unstructured.NestedSlice(mgr, "env")
	for _, e := range es {
		if e := e.(map[string]any); e["name"] == "KUBECONFIG" {
			kc, _ = e["value"].(string)
		}
	}
	if kc == "" || !mounted(mgr, kc) {
		t.Errorf("the controller's KUBECONFIG %q is on no mount of its container", kc)
	}
}

// mounted reports whether path lies on a volume mount of container c.
func mounted(c map[string]any, path string) bool {
	vms, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	for _, vm := range vms {
		if mp := str(vm.(map[string]any), "mountPath"); strings.HasPrefix(path, mp+"/") {
			return true
		}
	}
	return false
}

func mustStrings(o map[string]any, path ...string) []string {
	v, _, _ := unstructured.NestedStringSlice(o, path...)
	return v
}

// matches reports whether labels carry every pair of selector.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestPodMonitors: the PodMonitors of examples/podmonitor.yaml select the
// pods they are for — the replay's (of the default and of every variant)
// and those of a controller with the recorder — and scrape a port those
// pods name.
func TestPodMonitors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("examples", "podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	monitors := map[string]*unstructured.Unstructured{}
	for _, o := range objects(t, b) {
		monitors[o.GetName()] = o
	}
	check := func(dir, monitor, deployment string) {
		t.Helper()
		m := monitors[monitor]
		if m == nil {
			t.Fatalf("no PodMonitor %s", monitor)
		}
		d := find(t, objects(t, build(t, dir)), "Deployment", deployment)
		labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		sel, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || !matches(sel, labels) {
			t.Errorf("%s: PodMonitor %s selects %v; the pods of %s have %v", dir, monitor, sel, deployment, labels)
		}
		ports := map[string]bool{}
		for _, kind := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", kind)
			for _, c := range cs {
				ps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
				for _, p := range ps {
					ports[str(p.(map[string]any), "name")] = true
				}
			}
		}
		eps, _, _ := unstructured.NestedSlice(m.Object, "spec", "podMetricsEndpoints")
		for _, ep := range eps {
			if p := str(ep.(map[string]any), "port"); !ports[p] {
				t.Errorf("%s: PodMonitor %s scrapes port %s; the pods name %v", dir, monitor, p, ports)
			}
		}
	}
	for _, dir := range append([]string{"."}, "overlays/writes-answer", "overlays/session-fetch", "overlays/session-pvc", "overlays/session-configmap") {
		check(dir, "wtrace-replay", "wtrace-replay")
	}
	check("testdata/controller", "wtrace-record", "controller-manager")
}
