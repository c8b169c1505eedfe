package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
)

var (
	configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// capture runs fn while tcpdump captures port into the scenario's
// capture.pcap; it returns the tcpdump command line.
func (e *env) capture(port int, fn func() error) (string, error) {
	stop, cmdline, err := tcpdump(e.work, filepath.Join(e.dir, "capture.pcap"), port)
	if err != nil {
		return "", err
	}
	err = fn()
	stop()
	return cmdline, err
}

func (e *env) meta(extra map[string]any, r *recorder, ops []op, cmdline string) error {
	m := map[string]any{
		"scenario":          filepath.Base(e.dir),
		"generator":         "tools/mkcorpus (client-go " + moduleVersion("k8s.io/client-go") + ", " + goVersion() + ")",
		"apiserver_version": e.c.version,
		"apiserver_gates":   gates,
		"namespace":         e.ns,
		"capture":           map[string]any{"command": cmdline, "file": "capture.pcap"},
		"requests":          r.reqs,
		"workload":          ops,
	}
	for k, v := range extra {
		m[k] = v
	}
	return writeMeta(filepath.Join(e.dir, "meta.json"), m)
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "?"
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "?"
}

// tableWatch: kubectl get -w of configmaps and of secrets through kubectl
// proxy, the workload meanwhile, then Ctrl-C.
func tableWatch(ctx context.Context, e *env) error {
	hc := e.c.client(nil)
	if err := e.namespace(ctx, hc); err != nil {
		return err
	}
	pre, err := e.workload(ctx, hc, 11, 6) // objects for kubectl's first LIST
	if err != nil {
		return err
	}
	port, stopProxy, err := e.kubectlProxy()
	if err != nil {
		return err
	}
	defer stopProxy()
	kc := filepath.Join(e.work, "proxy.kubeconfig")
	os.WriteFile(kc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {server: \"http://127.0.0.1:%d\"}\ncontexts:\n- name: proxy\n  context: {cluster: proxy}\ncurrent-context: proxy\n", port)), 0o600)
	var ops []op
	var outputs = map[string]string{}
	cmdline, err := e.capture(port, func() error {
		var procs []*proc
		for _, res := range []string{"configmaps", "secrets"} {
			p, err := start(e.work, "kubectl-get-"+res, []string{"HOME=" + e.work}, e.kubectl,
				"--kubeconfig", kc, "get", res, "-n", e.ns, "-w")
			if err != nil {
				return err
			}
			procs = append(procs, p)
		}
		time.Sleep(4 * time.Second) // discovery, LIST, then the watch
		var err error
		ops, err = e.workload(ctx, hc, 12, 70)
		time.Sleep(time.Second)
		for _, p := range procs {
			stopProc(p, syscall.SIGINT) // Ctrl-C
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, res := range []string{"configmaps", "secrets"} {
		b, _ := os.ReadFile(filepath.Join(e.work, "kubectl-get-"+res+".log"))
		outputs["kubectl get "+res+" -w"] = string(b)
	}
	r := &recorder{}
	if err := pcapTruth(filepath.Join(e.dir, "capture.pcap"), "kubectl", r); err != nil {
		return err
	}
	if err := r.write(filepath.Join(e.dir, "truth.jsonl")); err != nil {
		return err
	}
	return e.meta(map[string]any{
		"clients":        "kubectl get configmaps -n NS -w and kubectl get secrets -n NS -w (kubectl v1.33.13, built from k8s.io/kubernetes/cmd/kubectl) through kubectl proxy; stopped with SIGINT (Ctrl-C)",
		"truth_source":   "the capture: TCP reassembled by mkcorpus, HTTP/1.1 by net/http, events by apimachinery's JSON framer; recv_unix_nano is 0",
		"kubectl_output": outputs,
		"setup_workload": pre,
	}, r, ops, cmdline)
}

// acceptJSON makes a metadata client ask for JSON only (client-go's
// metadata client offers protobuf first).
type acceptJSON struct{ rt http.RoundTripper }

func (a acceptJSON) RoundTrip(req *http.Request) (*http.Response, error) {
	var keep []string
	for _, c := range strings.Split(req.Header.Get("Accept"), ",") {
		if !strings.Contains(c, "protobuf") {
			keep = append(keep, c)
		}
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", strings.Join(keep, ","))
	return a.rt.RoundTrip(req)
}

// metadataInformer: metadata-only informers of configmaps and secrets
// through kubectl proxy, one as client-go sends it (protobuf), one JSON.
func metadataInformer(ctx context.Context, e *env) error {
	hc := e.c.client(nil)
	if err := e.namespace(ctx, hc); err != nil {
		return err
	}
	pre, err := e.workload(ctx, hc, 21, 6)
	if err != nil {
		return err
	}
	port, stopProxy, err := e.kubectlProxy()
	if err != nil {
		return err
	}
	defer stopProxy()
	r := &recorder{}
	var ops []op
	cmdline, err := e.capture(port, func() error {
		stop := make(chan struct{})
		var factories []metadatainformer.SharedInformerFactory
		for _, client := range []string{"metadata-protobuf", "metadata-json"} {
			cfg := &rest.Config{Host: fmt.Sprintf("http://127.0.0.1:%d", port)}
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				rt = r.wrap(client, rt)
				if client == "metadata-json" {
					rt = acceptJSON{rt}
				}
				return rt
			})
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				return err
			}
			f := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, e.ns, nil)
			f.ForResource(configmaps).Informer()
			f.ForResource(secrets).Informer()
			f.Start(stop)
			factories = append(factories, f)
		}
		for _, f := range factories {
			for gvr, ok := range f.WaitForCacheSync(stop) {
				if !ok {
					return fmt.Errorf("%v did not sync", gvr)
				}
			}
		}
		time.Sleep(time.Second)
		var err error
		ops, err = e.workload(ctx, hc, 22, 70)
		time.Sleep(time.Second)
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := r.write(filepath.Join(e.dir, "truth.jsonl")); err != nil {
		return err
	}
	return e.meta(map[string]any{
		"clients":        "client-go metadatainformer (configmaps, secrets) twice through kubectl proxy: metadata-protobuf as client-go sends it, metadata-json with the protobuf clauses removed from Accept",
		"truth_source":   "what the informers read, split by client-go's framers (length-delimited protobuf, JSON)",
		"setup_workload": pre,
	}, r, ops, cmdline)
}

// cborCalls creates, updates, reads, lists and deletes a Secret with the
// dynamic client, which sends and accepts CBOR.
func cborCalls(ctx context.Context, dc dynamic.Interface, ns string) error {
	sc := dc.Resource(secrets).Namespace(ns)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "cbor-written"},
		"stringData": map[string]any{"password": "mkcorpus-throwaway-cbor-password-1"}}}
	got, err := sc.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	unstructured.SetNestedField(got.Object, map[string]any{"password": "mkcorpus-throwaway-cbor-password-2"}, "stringData")
	if _, err := sc.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if _, err := sc.Get(ctx, "cbor-written", metav1.GetOptions{}); err != nil {
		return err
	}
	if _, err := sc.List(ctx, metav1.ListOptions{}); err != nil {
		return err
	}
	if _, err := dc.Resource(configmaps).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return err
	}
	return sc.Delete(ctx, "cbor-written", metav1.DeleteOptions{})
}

// cborInformer: dynamic informers of configmaps and secrets with client-go
// told to prefer CBOR, directly to the apiserver over TLS; every client
// of the process logs its TLS keys into keylog.txt.
func cborInformer(ctx context.Context, e *env) error {
	if os.Getenv("KUBE_FEATURE_ClientsAllowCBOR") != "true" || os.Getenv("KUBE_FEATURE_ClientsPreferCBOR") != "true" {
		return fmt.Errorf("run with KUBE_FEATURE_ClientsAllowCBOR=true KUBE_FEATURE_ClientsPreferCBOR=true (run does)")
	}
	keys, err := os.Create(filepath.Join(e.dir, "keylog.txt"))
	if err != nil {
		return err
	}
	defer keys.Close()
	hc := e.c.client(keys)
	if err := e.namespace(ctx, hc); err != nil {
		return err
	}
	pre, err := e.workload(ctx, hc, 31, 6)
	if err != nil {
		return err
	}
	hc.CloseIdleConnections()
	r := &recorder{}
	var ops []op
	cmdline, err := e.capture(e.c.port, func() error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(e.c.caPEM)
		cfg := &rest.Config{Host: e.c.url, BearerToken: token,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, KeyLogWriter: keys}, ForceAttemptHTTP2: true}}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return r.wrap("dynamic-cbor", rt) })
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		stop := make(chan struct{})
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, e.ns, nil)
		f.ForResource(configmaps).Informer()
		f.ForResource(secrets).Informer()
		f.Start(stop)
		for gvr, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				return fmt.Errorf("%v did not sync", gvr)
			}
		}
		time.Sleep(time.Second)
		ops, err = e.workload(ctx, hc, 32, 70)
		if err != nil {
			return err
		}
		// Writes and reads in CBOR: request and response bodies of
		// application/cbor, a Secret among them.
		if err := cborCalls(ctx, dc, e.ns); err != nil {
			return err
		}
		time.Sleep(time.Second)
		close(stop)
		f.Shutdown()
		hc.CloseIdleConnections()
		return err
	})
	if err != nil {
		return err
	}
	if err := r.write(filepath.Join(e.dir, "truth.jsonl")); err != nil {
		return err
	}
	n := 0
	for _, ev := range r.truth {
		if ev.Encoding == "cbor" {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("no CBOR watch events: did the apiserver serve CBOR?")
	}
	log.Printf("cbor-informer: %d CBOR events", n)
	return e.meta(map[string]any{
		"clients":        "client-go dynamicinformer (configmaps, secrets) with KUBE_FEATURE_ClientsAllowCBOR=true and KUBE_FEATURE_ClientsPreferCBOR=true, HTTPS (HTTP/2) to the apiserver; the workload client (JSON) in the same process; then the dynamic client creates, updates, gets, lists and deletes a Secret in CBOR; TLS keys of all in keylog.txt",
		"truth_source":   "what the informers read, split by client-go's CBOR sequence framer",
		"setup_workload": pre,
	}, r, ops, cmdline)
}
