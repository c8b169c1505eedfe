// Package moduletest checks what adopting the test API costs a controller
// module: testdata/controller is one, as an operator's repository holds it
// — pinned to client-go v0.33.13 and Go 1.24, tidy — that adds the module
// github.com/wtrace/wtrace/wtracetest (this repository's wtracetest/) and
// a regression test written with it (regression_test.go.txt), replaying
// the session testkit/ctrltest's controller recorded (diff/testdata).
//
// The module is tidied and tested offline, from the module cache
// (GOFLAGS=-mod=mod, GOPROXY=off): .ci/run fills the cache first (go mod
// tidy -diff in testdata/controller).
package moduletest

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// offline is the environment of every go command here: the module cache
// only, this toolchain, no checksum database (go.sum has every sum).
func offline(dir string) []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOSUMDB=off", "GOWORK=off", "PWD="+dir)
}

func gocmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command: %v", err)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "GOPROXY=off") || strings.Contains(string(out), "module lookup disabled") {
			t.Skipf("go %s: a module is not in the cache (run .ci/run's cache warming: cd testkit/moduletest/testdata/controller && go mod tidy -diff):\n%s", strings.Join(args, " "), out)
		}
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// modFile is what go mod edit -json says of a go.mod.
type modFile struct {
	Go        string
	Toolchain *struct{ Name string }
	Require   []struct {
		Path     string
		Version  string
		Indirect bool
	}
}

func readMod(t *testing.T, dir string) modFile {
	t.Helper()
	var m modFile
	if err := json.Unmarshal([]byte(gocmd(t, dir, offline(dir), "mod", "edit", "-json")), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdoption: the controller module adds wtracetest (go get, as a user
// does; a replace here, to this repository's copy) and its regression
// test; `go mod tidy` then changes none of its requirements, not its go
// line, adds no toolchain line — the one new requirement is wtracetest —
// and `go test ./...` passes: the controller, started against the replay
// of its recorded session (wtrace replay as a process, found through
// $WTRACE_BINARY), makes the writes the recording holds (wtrace diff
// --only write --collapse-repeats: the same).
func TestAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("builds client-go v0.33 and wtrace")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctl, api := filepath.Join(tmp, "controller"), filepath.Join(tmp, "wtracetest")
	copyDir(t, filepath.Join("testdata", "controller"), ctl)
	copyDir(t, filepath.Join(root, "wtracetest"), api)
	os.MkdirAll(filepath.Join(ctl, "testdata"), 0o755)
	b, err := os.ReadFile(filepath.Join(root, "diff", "testdata", "controller.wt"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ctl, "testdata", "controller.wt"), b, 0o644)

	env := offline(ctl)
	before := readMod(t, ctl)
	if !strings.HasPrefix(before.Go, "1.24") || !slices.ContainsFunc(before.Require, func(r struct {
		Path     string
		Version  string
		Indirect bool
	}) bool {
		return r.Path == "k8s.io/client-go" && strings.HasPrefix(r.Version, "v0.33.")
	}) {
		t.Fatalf("the fixture is not a client-go v0.33, Go 1.24 module: %+v", before)
	}
	gocmd(t, ctl, env, "mod", "tidy")
	if again := readMod(t, ctl); !same(before, again) {
		t.Fatalf("the fixture itself is not tidy: go mod tidy made %+v of %+v", again, before)
	}

	// What a user does: go get the module, write the test.
	if err := os.Rename(filepath.Join(ctl, "regression_test.go.txt"), filepath.Join(ctl, "regression_test.go")); err != nil {
		t.Fatal(err)
	}
	gocmd(t, ctl, env, "mod", "edit", "-require=github.com/wtrace/wtrace/wtracetest@v0.0.0", "-replace=github.com/wtrace/wtrace/wtracetest=../wtracetest")
	gocmd(t, ctl, env, "mod", "tidy")
	after := readMod(t, ctl)
	if after.Go != before.Go || after.Toolchain != nil {
		t.Errorf("go mod tidy made the go line %q (toolchain %v); it was %q", after.Go, after.Toolchain, before.Go)
	}
	old := map[string]string{}
	for _, r := range before.Require {
		old[r.Path] = r.Version
	}
	for _, r := range after.Require {
		switch v, ok := old[r.Path]; {
		case r.Path == "github.com/wtrace/wtrace/wtracetest":
		case !ok:
			t.Errorf("adding wtracetest requires %s %s", r.Path, r.Version)
		case v != r.Version:
			t.Errorf("adding wtracetest moved %s from %s to %s", r.Path, v, r.Version)
		}
		delete(old, r.Path)
	}
	for p, v := range old {
		t.Errorf("adding wtracetest dropped %s %s", p, v)
	}

	bin := filepath.Join(tmp, "wtrace")
	gocmd(t, root, os.Environ(), "build", "-o", bin, "./cmd/wtrace")
	gocmd(t, ctl, env, "vet", "./...")
	out := gocmd(t, ctl, append(env, "WTRACE_BINARY="+bin), "test", "-count=1", "-v", "./...")
	if !strings.Contains(out, "--- PASS: TestRegression") {
		t.Errorf("the controller's regression test:\n%s", out)
	}
	t.Logf("go test ./... in the controller module:\n%s", out)

	// A build that writes another annotation value fails, with the diff.
	src := filepath.Join(ctl, "controller.go")
	code, _ := os.ReadFile(src)
	changed := strings.Replace(string(code), `"reconciled:" + cm.Name`, `"new-build:" + cm.Name`, 1)
	if changed == string(code) {
		t.Fatal("the fixture's annotation value moved: update this test")
	}
	os.WriteFile(src, []byte(changed), 0o644)
	cmd := exec.Command("go", "test", "-count=1", "./...")
	cmd.Dir, cmd.Env = ctl, append(env, "WTRACE_BINARY="+bin)
	b, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "--- FAIL: TestRegression") || !strings.Contains(string(b), `+      "wtrace.test/seen": "new-build:cm-0"`) {
		t.Errorf("a changed build's regression test: %v\n%s", err, b)
	}
}

// same reports whether two go.mod files have the same go line, toolchain
// and requirements.
func same(a, b modFile) bool {
	if a.Go != b.Go || (a.Toolchain == nil) != (b.Toolchain == nil) || len(a.Require) != len(b.Require) {
		return false
	}
	for i := range a.Require {
		if a.Require[i] != b.Require[i] {
			return false
		}
	}
	return true
}
