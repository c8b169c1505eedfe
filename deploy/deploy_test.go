// Package deploy holds the Kubernetes manifests of wtrace (kustomize) and
// their test: every kustomization builds, and a real kube-apiserver
// accepts what it builds (apply --dry-run=server).
package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

// kustomizations are the directories users apply: the whole, and each
// variant of the replay.
var kustomizations = []string{".", "overlays/writes-answer", "overlays/session-pvc", "overlays/session-fetch"}

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

// TestDryRunServer: `kubectl kustomize DIR | kubectl apply --dry-run=server
// -f -` is accepted by a real kube-apiserver (testkit/k8stest) for every
// kustomization. Without kubectl, the same through kustomize's library
// (krusty, the kustomize kubectl embeds) and client-go's dynamic client
// with dryRun=All; both when kubectl is there.
func TestDryRunServer(t *testing.T) {
	c := k8stest.Start(t) // skipped without the binaries
	kc := kubectl()
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			if kc != "" {
				built, err := exec.Command(kc, "kustomize", dir).Output()
				if err != nil {
					t.Fatalf("kubectl kustomize %s: %v", dir, stderrOf(err))
				}
				apply := exec.Command(kc, "--kubeconfig", c.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
				apply.Stdin = bytes.NewReader(built)
				out, err := apply.CombinedOutput()
				if err != nil {
					t.Fatalf("kubectl kustomize %s | kubectl apply --dry-run=server -f -: %v\n%s", dir, err, out)
				}
				if n := strings.Count(string(out), "(server dry run)"); n != len(objects(t, built)) {
					t.Errorf("kubectl apply: %d objects accepted, the build has %d:\n%s", n, len(objects(t, built)), out)
				}
			} else {
				t.Log("no kubectl next to the apiserver: kustomize's library and client-go only")
			}
			dryRunLibrary(t, c.Kubeconfig, build(t, dir))
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
			ri = dyn.Resource(m.Resource).Namespace("default")
		}
		if _, err := ri.Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("create --dry-run=server %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
}

// TestManifests: what the manifests promise, read from the build: the
// replay's probes on /livez and /readyz of its port, its Prometheus
// annotations, a non-root read-only container of the wtrace image, the
// session from the ConfigMap at the path the replay is given, the
// Service selecting its pods; ClientIP affinity exactly when writes are
// answered; the recorder a native sidecar with probes on its own port.
func TestManifests(t *testing.T) {
	find := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s in the build", kind, name)
		return nil
	}
	str := func(o map[string]any, path ...string) string {
		v, _, _ := unstructured.NestedString(o, path...)
		return v
	}
	for _, dir := range kustomizations[1:] {
		objs := objects(t, build(t, dir))
		svc := find(objs, "Service", "wtrace-replay")
		d := find(objs, "Deployment", "wtrace-replay")
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		writes := ""
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--writes="); ok {
				writes = v
			}
		}
		affinity := str(svc.Object, "spec", "sessionAffinity")
		if (writes == "answer" || writes == "apply") != (affinity == "ClientIP") {
			t.Errorf("%s: --writes=%s with sessionAffinity %q: a replay that answers writes needs ClientIP, a read-only one does not", dir, writes, affinity)
		}
	}

	objs := objects(t, build(t, "."))
	d := find(objs, "Deployment", "wtrace-replay")
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
	containers, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
	c := containers[0].(map[string]any)
	for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz", "startupProbe": "/livez"} {
		if got := str(c, probe, "httpGet", "path"); got != path || str(c, probe, "httpGet", "port") != "http" {
			t.Errorf("%s: %s on %s; want %s on the http port", probe, got, str(c, probe, "httpGet", "port"), path)
		}
	}
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	if p := ports[0].(map[string]any); p["name"] != "http" || fmt.Sprint(p["containerPort"]) != "8080" {
		t.Errorf("ports %v; want http 8080", ports)
	}
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	joined := strings.Join(args, " ")
	for _, want := range []string{"replay /session/session.wt", "--listen=0.0.0.0:8080", "--writes=reject", "--log-format=json"} {
		if !strings.Contains(joined, want) {
			t.Errorf("replay args %q lack %q", joined, want)
		}
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
	volumes, _, _ := unstructured.NestedSlice(pod, "spec", "volumes")
	cmName := str(volumes[0].(map[string]any), "configMap", "name")
	cm := find(objs, "ConfigMap", cmName)
	if b, _, _ := unstructured.NestedString(cm.Object, "binaryData", "session.wt"); len(b) == 0 {
		t.Errorf("ConfigMap %s has no binaryData session.wt", cmName)
	}
	svc := find(objs, "Service", "wtrace-replay")
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	labels, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%s; the pods have %v", k, v, labels)
		}
	}

	ctl := find(objs, "Deployment", "example-controller")
	inits, _, _ := unstructured.NestedSlice(ctl.Object, "spec", "template", "spec", "initContainers")
	rec := inits[0].(map[string]any)
	if str(rec, "restartPolicy") != "Always" {
		t.Error("the recorder is not a native sidecar (restartPolicy: Always)")
	}
	rargs, _, _ := unstructured.NestedStringSlice(rec, "args")
	if j := strings.Join(rargs, " "); !strings.Contains(j, "record --proxy --listen=127.0.0.1:8001") || !strings.Contains(j, "--health-listen=0.0.0.0:8081") {
		t.Errorf("recorder args %q", j)
	}
	if str(rec, "readinessProbe", "httpGet", "path") != "/readyz" || str(rec, "readinessProbe", "httpGet", "port") != "health" {
		t.Error("the recorder's readiness probe is not /readyz on its health port")
	}
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return err.Error() + ": " + string(ee.Stderr)
	}
	return err.Error()
}
