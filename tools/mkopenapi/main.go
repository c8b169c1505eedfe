// Command mkopenapi copies a real kube-apiserver's OpenAPI documents into
// apiserver/openapi, which the replay serves when a session did not record
// them: the v3 index (/openapi/v3), every group-version document it names,
// and the v2 document (in JSON and in protobuf), each zstd'd.
//
//	go run ./tools/mkopenapi -kubeconfig /tmp/kcorpus/kubeconfig
//
// ../shared/corpus/tools/cluster.sh starts the kube-apiserver v1.33 this
// was made from. The documents of custom resources and aggregated APIs are
// left out: a replay serves only the built-in ones.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// openAPIProtobuf is the media type of the v2 document in protobuf.
const openAPIProtobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the apiserver to copy from")
	out := flag.String("o", filepath.Join("apiserver", "openapi", "docs"), "directory to write into")
	flag.Parse()
	if err := run(*kubeconfig, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkopenapi:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, out string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: tr}
	getAs := func(path, accept string) ([]byte, error) {
		req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, nil
	}
	get := func(path string) ([]byte, error) { return getAs(path, "application/json") }
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return err
	}
	write := func(name string, b []byte) error {
		return os.WriteFile(filepath.Join(out, name+".json.zst"), enc.EncodeAll(b, nil), 0o644)
	}
	root, err := get("/openapi/v3")
	if err != nil {
		return err
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(root, &index); err != nil {
		return err
	}
	var names []string
	for p, ref := range index.Paths {
		if p != "api" && p != "apis" && p != "api/v1" && !builtinGroup(p) {
			delete(index.Paths, p)
			continue
		}
		b, err := get(ref.ServerRelativeURL)
		if err != nil {
			return err
		}
		names = append(names, p)
		if err := write("v3-"+strings.ReplaceAll(p, "/", "_"), b); err != nil {
			return err
		}
	}
	sort.Strings(names)
	kept, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := write("v3", kept); err != nil {
		return err
	}
	v2, err := get("/openapi/v2")
	if err != nil {
		return err
	}
	if err := write("v2", v2); err != nil {
		return err
	}
	// v2 in protobuf too: kubectl's fallback when a kind is not in v3.
	v2pb, err := getAs("/openapi/v2", openAPIProtobuf)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "v2.pb.zst"), enc.EncodeAll(v2pb, nil), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %d v3 documents and v2 into %s\n", len(names), out)
	return nil
}

// builtinGroup reports whether a v3 path names a built-in API group
// (a group of kube-apiserver itself: no dot, or *.k8s.io).
func builtinGroup(p string) bool {
	if !strings.HasPrefix(p, "apis/") {
		return false
	}
	g := strings.Split(strings.TrimPrefix(p, "apis/"), "/")[0]
	return !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io")
}
