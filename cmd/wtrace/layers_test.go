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
// module and its layer. A package imports only packages of lower layers;
// test-only packages are imported by tests alone. A new package goes here
// and into docs/ARCHITECTURE.md.
var layerOf = map[string]struct {
	layer    int
	testOnly bool
}{
	"internal/jsonscan":     {0, false},
	"internal/cborscan":     {0, false},
	"internal/selfsigned":   {0, false},
	"internal/apipath":      {0, false},
	"internal/kscheme":      {0, false},
	"chunked":               {1, false},
	"frame":                 {1, false},
	"formats":               {2, false},
	"replay/codec":          {2, false},
	"replay/state":          {3, false},
	"capture/pcapfile":      {3, false},
	"capture/tlsdec":        {3, false},
	"diff":                  {3, false},
	"capture/redact":        {3, false},
	"capture":               {4, false},
	"replay":                {4, false},
	"export":                {4, false},
	"capture/live":          {5, false},
	"capture/proxy":         {5, false},
	"edit":                  {5, false},
	"replay/record":         {5, false},
	"cmd/wtrace":            {6, false},
	"internal/cmd/pcapcat":  {6, true},
	"internal/cmd/pcapgen":  {6, true},
	"internal/cmd/mkcorpus": {6, true},
	"internal/pcaptest":     {0, true},
	"diff/difftest":         {4, true},
	"replay/replaytest":     {6, true},
	"internal/proxytest":    {6, true},
	"internal/wttest":       {5, true},
	"internal/k8stest":      {0, true},
	"internal/ctrltest":     {0, true},
}

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
