package replay

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8sdiscovery "k8s.io/client-go/discovery"
	memory "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wtrace/wtrace/frame"
)

// TestDiscoveryDocuments: the synthesized documents of the multi-watch
// session list its resources with the kinds of their objects (with
// WritesRecorded, reads only; see TestDiscoveryWriteVerbs).
func TestDiscoveryDocuments(t *testing.T) {
	srv := newTestServer(t, corpusSession(t, "multi-watch"), Options{Writes: WritesRecorded})
	resp, body := get(t, srv.Client(), srv.URL+"/api/v1",
		"Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	var rl metav1.APIResourceList
	if err := json.Unmarshal(body, &rl); err != nil {
		t.Fatalf("/api/v1: %v: %s", err, body)
	}
	var got []string
	for _, r := range rl.APIResources {
		got = append(got, r.Name+" "+r.Kind+" "+map[bool]string{true: "namespaced", false: "cluster"}[r.Namespaced]+" "+strings.Join(r.Verbs, ","))
	}
	want := []string{
		"configmaps ConfigMap namespaced get,list,watch",
		"events Event namespaced get,list,watch",
		"namespaces Namespace cluster get,list,watch",
		"secrets Secret namespaced get,list,watch",
		"services Service namespaced get,list,watch",
	}
	if !reflect.DeepEqual(got, want) || rl.GroupVersion != "v1" {
		t.Errorf("/api/v1 = %s %q; want v1 %q", rl.GroupVersion, got, want)
	}
	_, body = get(t, srv.Client(), srv.URL+"/api")
	var av metav1.APIVersions
	if err := json.Unmarshal(body, &av); err != nil || !reflect.DeepEqual(av.Versions, []string{"v1"}) {
		t.Errorf("/api = %s (%v); want versions [v1]", body, err)
	}
	_, body = get(t, srv.Client(), srv.URL+"/apis")
	var gl metav1.APIGroupList
	if err := json.Unmarshal(body, &gl); err != nil || len(gl.Groups) != 0 || gl.Kind != "APIGroupList" {
		t.Errorf("/apis = %s (%v); want an empty APIGroupList", body, err)
	}
}

// TestDiscoveryWriteVerbs: a replay that answers writes lists every verb,
// and the common built-in resources a client may create (a Deployment in a
// session of ConfigMaps).
func TestDiscoveryWriteVerbs(t *testing.T) {
	for _, mode := range []Writes{WritesAnswer, WritesApply, WritesReject} {
		srv := newTestServer(t, corpusSession(t, "multi-watch"), Options{Writes: mode})
		_, body := get(t, srv.Client(), srv.URL+"/api/v1")
		var rl metav1.APIResourceList
		if err := json.Unmarshal(body, &rl); err != nil {
			t.Fatalf("/api/v1: %v: %s", err, body)
		}
		verbs := map[string]string{}
		for _, r := range rl.APIResources {
			verbs[r.Name] = strings.Join(r.Verbs, ",")
		}
		const all = "create,delete,deletecollection,get,list,patch,update,watch"
		if verbs["configmaps"] != all || verbs["pods"] != all {
			t.Errorf("%s: /api/v1 verbs %v; want configmaps and pods with %s", mode, verbs, all)
		}
		_, body = get(t, srv.Client(), srv.URL+"/apis/apps/v1")
		if err := json.Unmarshal(body, &rl); err != nil || !strings.Contains(string(body), `"kind":"Deployment"`) {
			t.Errorf("%s: /apis/apps/v1 = %s (%v); want deployments", mode, body, err)
		}
	}
}

// TestKubectlPath drives the replay the way kubectl get -w does — discovery
// (asking for aggregated discovery first), a REST mapping, then a dynamic
// LIST and WATCH — over HTTPS with HTTP/2, through the kubeconfig the
// server writes.
func TestKubectlPath(t *testing.T) {
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	evs := sessionEvents(t, f, exchangeByTarget(t, f, "GET", "watch=true"))
	srv, err := Open(path, Options{Writes: WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.StartTLS(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("URL = %q", srv.URL)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, srv.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("loading the kubeconfig: %v\n%s", err, srv.Kubeconfig())
	}
	dc, err := k8sdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	// kubectl's mapper: discovery, and short names ("cm") expanded.
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(string) {})
	for _, res := range []string{"configmaps", "configmap", "cm"} {
		gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: res})
		if err != nil || gvr != (schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}) {
			t.Fatalf("ResourceFor(%q) = %v, %v; want v1 configmaps", res, gvr, err)
		}
	}
	m, err := mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	if err != nil || m.Scope.Name() != "namespace" {
		t.Fatalf("RESTMapping(ConfigMap) = %+v, %v; want a namespaced mapping", m, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ri := dyn.Resource(m.Resource).Namespace("corpus-basic")
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, want := range evs {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("watch closed after %d events", i)
		}
		u, _ := ev.Object.(interface{ GetResourceVersion() string })
		if string(ev.Type) != want.meta.Type || u == nil || u.GetResourceVersion() != want.meta.ResourceVersion {
			t.Fatalf("event %d = %s %v; want %s %s", i, ev.Type, ev.Object, want.meta.Type, want.meta.ResourceVersion)
		}
	}
	if ev, ok := <-w.ResultChan(); ok && ev.Type != watch.Error {
		t.Fatalf("extra event %s", ev.Type)
	}
}

// TestKubectl runs a real kubectl, if one is installed, against a replay:
// kubectl get -w prints the recorded objects.
func TestKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	path := corpusSession(t, "basic-json")
	srv, err := Open(path, Options{Writes: WritesReject, Speed: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.StartTLS(); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, srv.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --request-timeout ends the watch (a real apiserver's timeout, here
	// the replay's quiet watch past the last event).
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "get", "configmaps", "-n", "corpus-basic",
		"-w", "--request-timeout=3s", "-o", "name")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	names := map[string]bool{}
	for _, l := range lines {
		if strings.HasPrefix(l, "configmap/") {
			names[l] = true
		}
	}
	f := openSession(t, path)
	wantNames := map[string]bool{}
	for _, e := range sessionEvents(t, f, exchangeByTarget(t, f, "GET", "watch=true")) {
		wantNames["configmap/"+e.meta.Name] = true
	}
	for _, o := range listObjects(t, f, frame.JSON, exchangeByTarget(t, f, "GET", "/configmaps")) {
		wantNames["configmap/"+o.name] = true
	}
	var missing []string
	for n := range wantNames {
		if !names[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("kubectl (%v) did not print %d objects, e.g. %v; output:\n%s", err, len(missing), missing[:min(3, len(missing))], out)
	}
}
