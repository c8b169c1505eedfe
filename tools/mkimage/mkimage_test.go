package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage checks the image the daemonless build makes ($WTRACE_IMAGE,
// which .ci/run builds with `go run ./tools/mkimage`, else one built
// here): its configuration is the Dockerfile's (entrypoint, command, a
// non-root user, working directory, environment, port), its one layer
// holds exactly what the Dockerfile copies (the binary, /tmp, /data, with
// their owners and modes), the binary in the layer runs (--version) and
// is static (no interpreter, no libraries; built with CGO_ENABLED=0,
// -trimpath, without symbols or DWARF), by the Go version the Dockerfile's golang image
// names, and is byte for byte what tools/build-static.sh — the
// Dockerfile's build stage — makes: so the Dockerfile builds the same
// binary.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wtrace")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary runs on linux")
	}
	root := filepath.Join("..", "..")
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Parse(df)
	if err != nil {
		t.Fatalf("Parse(Dockerfile): %v", err)
	}
	path := os.Getenv("WTRACE_IMAGE")
	if path == "" {
		path = filepath.Join(t.TempDir(), "image.tar")
		if err := run(filepath.Join(root, "Dockerfile"), path, "wtrace:test", "devel"); err != nil {
			t.Fatalf("mkimage: %v", err)
		}
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	// The configuration: the Dockerfile's, run as a non-root user.
	c := cf.Config
	if want := []string{"/usr/local/bin/wtrace"}; !reflect.DeepEqual(c.Entrypoint, want) || !reflect.DeepEqual(c.Entrypoint, spec.Config.Entrypoint) {
		t.Errorf("Entrypoint = %q; want %q (the Dockerfile's %q)", c.Entrypoint, want, spec.Config.Entrypoint)
	}
	if !reflect.DeepEqual(c.Cmd, spec.Config.Cmd) {
		t.Errorf("Cmd = %q; want the Dockerfile's %q", c.Cmd, spec.Config.Cmd)
	}
	if c.User != "65532:65532" || c.User != spec.Config.User {
		t.Errorf("User = %q; want 65532:65532 (non-root; the Dockerfile's %q)", c.User, spec.Config.User)
	}
	if c.WorkingDir != "/data" {
		t.Errorf("WorkingDir = %q; want /data", c.WorkingDir)
	}
	if !contains(c.Env, "TMPDIR=/tmp") {
		t.Errorf("Env = %q; want TMPDIR=/tmp", c.Env)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("ExposedPorts = %v; want 8080/tcp", c.ExposedPorts)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s; want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}

	// The layer: what the Dockerfile copies onto scratch, and no more.
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers; want 1 (FROM scratch, one layer of copies)", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type entry struct {
		mode     int64
		uid, gid int
	}
	got := map[string]entry{}
	var bin []byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = entry{h.Mode, h.Uid, h.Gid}
		if h.Name == "usr/local/bin/wtrace" {
			if bin, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]entry{
		"usr/":                 {0o755, 0, 0},
		"usr/local/":           {0o755, 0, 0},
		"usr/local/bin/":       {0o755, 0, 0},
		"usr/local/bin/wtrace": {0o755, 0, 0},
		"tmp/":                 {0o1777, 65532, 65532},
		"data/":                {0o755, 65532, 65532},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries:\n%v\nwant\n%v", got, want)
	}
	if bin == nil {
		t.Fatal("no /usr/local/bin/wtrace in the layer")
	}

	// The binary runs, and is static.
	exe := filepath.Join(t.TempDir(), "wtrace")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "wtrace version ") {
		t.Errorf("wtrace --version from the layer: %v, %q", err, out)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an interpreter: not static")
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v: not static", libs)
	}
	// -ldflags "-s -w" (which -trimpath keeps out of the build info): no
	// symbol table, no DWARF.
	for _, sec := range []string{".symtab", ".debug_info", ".zdebug_info"} {
		if ef.Section(sec) != nil {
			t.Errorf("the binary has a %s section: not built with -ldflags \"-s -w\"", sec)
		}
	}
	ef.Close()
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != "linux" {
		t.Errorf("build settings %v; want CGO_ENABLED=0, -trimpath, GOOS=linux", settings)
	}
	// The Dockerfile's golang image builds with the Go version that built
	// this one: the same compiler, so the same binary.
	tagVersion := strings.TrimPrefix(spec.GoImage, "golang:")
	tagVersion, _, _ = strings.Cut(tagVersion, "-")
	if bi.GoVersion != "go"+tagVersion {
		t.Errorf("the image's binary was built by %s, the Dockerfile's build stage (%s) builds with go%s: update one of them", bi.GoVersion, spec.GoImage, tagVersion)
	}

	// The Dockerfile's build stage (tools/build-static.sh) makes this
	// binary, byte for byte.
	again := filepath.Join(t.TempDir(), "out")
	if err := BuildStage(root, again, "devel"); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(again, "wtrace"))
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(b2) != sha256.Sum256(bin) && os.Getenv("WTRACE_IMAGE") == "" {
		t.Errorf("tools/build-static.sh built another binary (%d bytes) than the image's (%d bytes): the build is not reproducible", len(b2), len(bin))
	}
	if !bytes.Equal(b2[:4], []byte("\x7fELF")) {
		t.Error("not an ELF binary")
	}
}

// TestParse: the Dockerfile instructions mkimage follows, and what it
// refuses.
func TestParse(t *testing.T) {
	good := "FROM golang:1.26.8 AS build\nRUN sh tools/build-static.sh /out\nFROM scratch\n" +
		"COPY --from=build --chown=1:2 /out/wtrace /bin/wtrace\nUSER 1:2\nENV A=b\nEXPOSE 80\n" +
		"LABEL a=\"x y\" \\\n  b=\"z\"\nENTRYPOINT [\"/bin/wtrace\"]\nCMD [\"--help\"]\n"
	s, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.BuildOut != "/out" || len(s.Copies) != 1 || s.Copies[0] != (Copy{Src: "wtrace", Dst: "/bin/wtrace", UID: 1, GID: 2}) ||
		s.Config.User != "1:2" || s.Config.Labels["a"] != "x y" || s.Config.Labels["b"] != "z" || s.Config.Env[0] != "A=b" {
		t.Errorf("Parse = %+v", s)
	}
	for _, bad := range []string{
		"FROM debian\nFROM scratch\n",
		"FROM golang:1 AS build\nRUN go build\nFROM scratch\n",
		"FROM golang:1 AS build\nRUN sh tools/build-static.sh /out\nFROM scratch\nRUN true\n",
		"FROM golang:1 AS build\nRUN sh tools/build-static.sh /out\nFROM scratch\nCOPY --from=build /elsewhere/x /x\n",
		"FROM golang:1 AS build\nRUN sh tools/build-static.sh /out\nFROM scratch\nENTRYPOINT /bin/sh -c x\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
