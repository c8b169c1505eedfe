package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wtrace/wtrace"

// layerOf is the picture of docs/ARCHITECTURE.md: each package of the
// module, its layer, and the modules outside the standard library it may
// import. A package imports only packages of lower layers; test-only
// packages are imported by tests alone. A new package, or a new
// dependency of a package, goes here and into docs/ARCHITECTURE.md.
var layerOf = map[string]struct {
	layer    int
	testOnly bool
	modules  []string
}{
	"internal/jsonscan":   {0, false, nil},
	"internal/cborscan":   {0, false, nil},
	"internal/selfsigned": {0, false, nil},
	"internal/apipath":    {0, false, nil},
	"internal/healthz":    {0, false, []string{modPrometheus}},
	"internal/kscheme":    {0, false, []string{modK8sAPIMachinery, modK8sClientGo, modK8sAPIExtensions, modK8sAggregator}},
	"internal/outfile":    {0, false, nil},
	"internal/hostfilter": {0, false, nil},
	"internal/units":      {0, false, nil},
	"internal/logline":    {0, false, nil},
	"internal/progress":   {0, false, nil},
	"internal/ident":      {0, false, nil},
	"chunked":             {1, false, nil},
	"frame":               {1, false, []string{modProtobuf}},
	"formats":             {2, false, []string{modZstd, modXsys}},
	"apiserver/openapi":   {2, false, []string{modZstd}},
	"apiserver/codec":     {2, false, []string{modGoautoneg, modK8sAPI, modK8sAPIMachinery, modK8sAggregator, modSigsYAML}},
	"apiserver/world": {3, false, []string{modZstd, modUuid, modJsonPatch, modGoCmp, modK8sAPI, modK8sAPIMachinery, modK8sClientGo,
		modK8sAPIExtensions, modK8sAggregator, modK8sUtils, modSmd, modSigsYAML, modSigsJSON}},
	"capture/pcapfile":          {3, false, []string{modZstd}},
	"capture/tlsdec":            {3, false, []string{modXcrypto}},
	"capture/redact":            {3, false, []string{modProtobuf}},
	"diff":                      {3, false, []string{modZstd}},
	"artifact":                  {3, false, []string{modGGCR}},
	"replay/internal/tape":      {3, false, nil},
	"replay/internal/pace":      {3, false, nil},
	"replay/internal/metrics":   {3, false, []string{modPrometheus}},
	"replay/internal/discovery": {4, false, []string{modK8sAPI, modK8sAPIMachinery}},
	"replay/internal/stream":    {4, false, nil},
	"replay/perturb":            {2, false, nil},
	"replay/perturb/plan":       {3, false, nil},
	"replay/perturb/runner":     {9, false, nil},
	"replay/internal/fromworld": {5, false, []string{modK8sAPIMachinery}},
	"replay/internal/fromtape":  {6, false, []string{modZstd, modGoautoneg, modK8sAPIMachinery}},
	"capture":                   {4, false, []string{modXxhash, modZstd, modXnet}},
	"replay":                    {7, false, []string{modPrometheus, modK8sAPI, modK8sAPIMachinery}},
	"export":                    {4, false, []string{modZstd, modXnet}},
	"edit":                      {4, false, []string{modZstd, modK8sAPIMachinery}},
	"capture/live":              {5, false, []string{modXnet, modXsys}},
	"capture/proxy":             {5, false, []string{modXnet, modK8sClientGo, modPrometheus}},
	"report":                    {5, false, []string{modZstd}},
	"replay/record":             {8, false, nil},
	"cmd/wtrace":                {10, false, []string{modZstd, modCobra, modXterm, modK8sClientGo, modGGCR}},
	"testkit/pcaptest":          {0, true, []string{modGopacket}},
	"testkit/k8stest":           {0, true, nil},
	"apiserver/conformance":     {3, true, []string{modK8sAPI, modK8sAPIMachinery, modSigsYAML}},
	"testkit/ctrltest":          {0, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo, modK8sUtils}},
	"testkit/bugctl":            {0, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo}},
	"testkit/kubelettest":       {1, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo}},
	"diff/difftest":             {6, true, nil},
	"testkit/wttest":            {5, true, []string{modZstd}},
	"testkit/proxytest":         {6, true, nil},
	"replay/replaytest":         {9, true, nil},
	"testkit/kcmtest":           {7, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo}},
	"testkit/schedtest":         {7, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo}},
	"replay/perturb/e2e":        {0, true, nil},
	"testkit/crtest":            {0, true, []string{modK8sAPI, modK8sAPIMachinery, modK8sClientGo, modControllerRuntime}},
	"tools/pcapcat":             {6, true, nil},
	"tools/pcapgen":             {6, true, []string{modGopacket}},
	"tools/mkopenapi":           {6, true, []string{modZstd, modK8sClientGo}},
	"tools/mkcorpus":            {6, true, []string{modGopacket, modK8sAPIMachinery, modK8sClientGo}},
	"tools/mkimage":             {6, true, []string{modGGCR}},
	"tools/scaleout":            {6, true, []string{modPromModel, modPromCommon, modKustomizeAPI, modKyaml}},
	"tools/funclen":             {6, true, nil},
	"deploy":                    {6, true, nil},
	"testkit/moduletest":        {0, true, nil},
}

// The modules outside the standard library that packages import.
const (
	modCobra             = "github.com/spf13/cobra"
	modControllerRuntime = "sigs.k8s.io/controller-runtime"
	modGoautoneg         = "github.com/munnerz/goautoneg"
	modGoCmp             = "github.com/google/go-cmp"
	modK8sAPIExtensions  = "k8s.io/apiextensions-apiserver"
	modK8sAggregator     = "k8s.io/kube-aggregator"
	modGopacket          = "github.com/google/gopacket"
	modGGCR              = "github.com/google/go-containerregistry"
	modJsonPatch         = "gopkg.in/evanphx/json-patch.v4"
	modK8sAPI            = "k8s.io/api"
	modK8sAPIMachinery   = "k8s.io/apimachinery"
	modK8sClientGo       = "k8s.io/client-go"
	modK8sUtils          = "k8s.io/utils"
	modKustomizeAPI      = "sigs.k8s.io/kustomize/api"
	modKyaml             = "sigs.k8s.io/kustomize/kyaml"
	modProtobuf          = "google.golang.org/protobuf"
	modPrometheus        = "github.com/prometheus/client_golang"
	modPromModel         = "github.com/prometheus/client_model"
	modPromCommon        = "github.com/prometheus/common"
	modSigsYAML          = "sigs.k8s.io/yaml"
	modSigsJSON          = "sigs.k8s.io/json"
	modSmd               = "sigs.k8s.io/structured-merge-diff/v6"
	modUuid              = "github.com/google/uuid"
	modXcrypto           = "golang.org/x/crypto"
	modXnet              = "golang.org/x/net"
	modXsys              = "golang.org/x/sys"
	modXterm             = "golang.org/x/term"
	modXxhash            = "github.com/cespare/xxhash/v2"
	modZstd              = "github.com/klauspost/compress"
)

// kubernetesFree are the packages that read the wire and the session file:
// they never import a Kubernetes module, so that recording links none.
var kubernetesFree = []string{"chunked", "frame", "formats", "capture", "capture/pcapfile", "capture/tlsdec", "capture/redact"}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs go list -json on patterns from the module root.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is needed: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list", "-json"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayers: no package imports one from its own layer or above, no
// program or library imports a test-only package, and every package is in
// the picture.
func TestLayers(t *testing.T) {
	pkgs := goList(t, "./...")
	seen := map[string]bool{}
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[name] = true
		me, ok := layerOf[name]
		if !ok {
			t.Errorf("package %s is not in the layer picture (layers_test.go, docs/ARCHITECTURE.md)", name)
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				if !stdlib(imp) && !slices.ContainsFunc(me.modules, func(m string) bool { return imp == m || strings.HasPrefix(imp, m+"/") }) {
					t.Errorf("%s imports %s, a module its row of the layer picture does not allow", name, imp)
				}
				if slices.Contains(kubernetesFree, name) && (strings.HasPrefix(imp, "k8s.io/") || strings.HasPrefix(imp, "sigs.k8s.io/")) {
					t.Errorf("%s imports %s: the packages that read the wire and the session file never import Kubernetes", name, imp)
				}
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			them, ok := layerOf[dep]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is not in the layer picture", name, dep)
			case them.testOnly && !me.testOnly:
				t.Errorf("%s imports the test-only package %s", name, dep)
			case them.layer >= me.layer:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go down", name, me.layer, dep, them.layer)
			}
		}
	}
	for name := range layerOf {
		if !seen[name] {
			t.Errorf("the layer picture names %s, which go list does not know", name)
		}
	}
}

// stdlib reports whether import path p is in the standard library (its
// first element has no dot).
func stdlib(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// TestBinaryWithoutTesting: package testing is not linked into wtrace.
func TestBinaryWithoutTesting(t *testing.T) {
	pkgs := goList(t, "-deps", "./cmd/wtrace")
	for _, p := range pkgs {
		if p.ImportPath == "testing" {
			var via []string
			for _, q := range pkgs {
				if slices.Contains(q.Imports, "testing") {
					via = append(via, q.ImportPath)
				}
			}
			t.Fatalf("package testing is linked into wtrace, imported by %v", via)
		}
	}
}
