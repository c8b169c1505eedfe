// Command mkcorpus records the repository's own real captures: scenarios
// the shared corpus (../shared/corpus) lacks, taken from a real
// kube-apiserver and etcd on loopback, with real clients, and the ground
// truth of what those clients received. Its output is committed under
// testdata/corpus; tests need neither the binaries nor this command.
//
//	go run ./tools/mkcorpus -kubectl /path/to/kubectl            # every scenario
//	go run ./tools/mkcorpus -kubectl … -scenarios table-watch
//
// It needs root (or CAP_NET_RAW) for tcpdump on lo, kube-apiserver and
// etcd ($WTRACE_K8SBIN, or /tmp/k8sbin as ../shared/corpus/tools/build-k8s.sh
// builds them) and, for table-watch, a kubectl binary (built the same way:
// go build k8s.io/kubernetes/cmd/kubectl). The cluster runs on free ports
// in a temporary directory, with the feature gates WatchList and
// CBORServingAndStorage on.
//
// Scenarios (each writes testdata/corpus/<name>/capture.pcap, truth.jsonl,
// meta.json, and keylog.txt when its traffic is TLS):
//
//   - table-watch: kubectl get -w (configmaps and secrets) through
//     kubectl proxy, plain HTTP/1.1: LISTs and watches of Tables
//     (Accept application/json;as=Table;v=v1;g=meta.k8s.io,…), whose rows
//     carry PartialObjectMetadata. The truth comes from the capture
//     itself: TCP reassembled here, HTTP parsed by net/http, events split
//     by apimachinery's JSON framer and decoded by encoding/json.
//   - metadata-informer: client-go metadata-only informers (configmaps and
//     secrets) through kubectl proxy: one as client-go sends it (protobuf
//     PartialObjectMetadata), one told to accept only JSON. The truth is
//     what the clients read, split by client-go's own framers.
//   - cbor-informer: client-go dynamic informers (configmaps and secrets)
//     with KUBE_FEATURE_ClientsAllowCBOR and KUBE_FEATURE_ClientsPreferCBOR,
//     directly to the apiserver over TLS (HTTP/2), every client logging its
//     TLS keys: CBOR lists and application/cbor-seq watches. The truth is
//     what the informers read, split by client-go's CBOR framer.
//
// A workload client creates, updates and deletes configmaps and secrets
// (with throwaway values) in the scenario's namespace meanwhile.
//
// Not among the defaults, for measurements rather than tests (its capture
// is about 100 MB, not committed):
//
//   - long-soak: half an hour (-duration) of informers and raw watches
//     of configmaps and secrets, JSON and protobuf, through kubectl proxy
//     under a steady workload (soak.go); docs/BENCHMARKS.md measures
//     session sizes on it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("mkcorpus: ")
	var (
		k8sbin    = flag.String("k8sbin", envOr("WTRACE_K8SBIN", "/tmp/k8sbin"), "directory of kube-apiserver and etcd")
		kubectl   = flag.String("kubectl", "", "kubectl binary (table-watch, and kubectl proxy)")
		out       = flag.String("out", filepath.Join("testdata", "corpus"), "directory the scenarios are written into")
		scenarios = flag.String("scenarios", "table-watch,metadata-informer,cbor-informer", "scenarios to record, comma-separated")
		child     = flag.Bool("child", false, "record the one scenario in this process (set by mkcorpus itself)")
	)
	flag.DurationVar(&soakDuration, "duration", soakDuration, "how long long-soak's workload runs")
	flag.Parse()
	var err error
	if *child {
		err = run(*k8sbin, *kubectl, *out, *scenarios)
	} else {
		err = spawn(*k8sbin, *kubectl, *out, strings.Split(*scenarios, ","))
	}
	if err != nil {
		log.Fatal(err)
	}
}

// spawn records each scenario in a process of its own: client-go reads its
// feature gates from the environment once per process, and only
// cbor-informer runs with the CBOR ones on.
func spawn(k8sbin, kubectl, out string, names []string) error {
	for _, name := range names {
		if _, ok := scenarios[name]; !ok {
			return fmt.Errorf("no scenario %q", name)
		}
		c := exec.Command(os.Args[0], "-child", "-k8sbin", k8sbin, "-kubectl", kubectl, "-out", out, "-scenarios", name, "-duration", soakDuration.String())
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.Env = os.Environ()
		if name == "cbor-informer" {
			c.Env = append(c.Env, "KUBE_FEATURE_ClientsAllowCBOR=true", "KUBE_FEATURE_ClientsPreferCBOR=true")
		}
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(k8sbin, kubectl, out string, name string) error {
	ctx := context.Background()
	{
		sc, ok := scenarios[name]
		if !ok {
			return fmt.Errorf("no scenario %q", name)
		}
		if sc.needsKubectl && kubectl == "" {
			return fmt.Errorf("%s needs -kubectl", name)
		}
		dir := filepath.Join(out, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		work, err := os.MkdirTemp("", "mkcorpus-")
		if err != nil {
			return err
		}
		c, err := startCluster(ctx, k8sbin, work)
		if err != nil {
			return err
		}
		env := &env{c: c, kubectl: kubectl, dir: dir, work: work, ns: "wtrace-" + name}
		log.Printf("%s: cluster up at %s", name, c.url)
		err = sc.run(ctx, env)
		c.stop()
		if err != nil {
			log.Printf("%s: failed; cluster logs in %s", name, work)
			return fmt.Errorf("%s: %w", name, err)
		}
		os.RemoveAll(work)
		log.Printf("%s: written to %s", name, dir)
	}
	return nil
}

type scenario struct {
	needsKubectl bool
	run          func(ctx context.Context, e *env) error
}

var scenarios = map[string]scenario{
	"table-watch":       {true, tableWatch},
	"metadata-informer": {true, metadataInformer},
	"cbor-informer":     {false, cborInformer},
	"long-soak":         {true, longSoak},
}
