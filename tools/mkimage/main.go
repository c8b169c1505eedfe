// Command mkimage builds the wtrace container image without a container
// engine (CI has no Docker daemon), from the repository's Dockerfile, with
// go-containerregistry:
//
//	go run ./tools/mkimage -o wtrace-image.tar      # docker load < wtrace-image.tar
//	go run ./tools/mkimage -o wtrace-image.tar -version v0.5.0 -tag wtrace:v0.5.0
//
// It does what the Dockerfile does, the same way: its build stage's
// command (tools/build-static.sh OUTDIR, run here with the local Go, which
// must be the version the Dockerfile's golang image names), then its final
// stage — FROM scratch, each COPY --from=build of OUTDIR's files (with
// their --chown), USER, WORKDIR, ENV, EXPOSE, LABEL, ENTRYPOINT and CMD —
// read from the Dockerfile itself, so that the two cannot drift apart. An
// instruction it does not know is an error. The result is one layer on an
// empty base, written as a docker-loadable tarball (also read by crane
// and skopeo).
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	out := flag.String("o", "wtrace-image.tar", "the image tarball to write (`file`)")
	tag := flag.String("tag", "wtrace:devel", "the image's `name` in the tarball")
	version := flag.String("version", "devel", "the version compiled in (the Dockerfile's VERSION build argument)")
	dockerfile := flag.String("f", "Dockerfile", "the `Dockerfile` to follow")
	flag.Parse()
	if err := run(*dockerfile, *out, *tag, *version); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(dockerfile, out, tag, version string) error {
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		return err
	}
	spec, err := Parse(df)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mkimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stage := filepath.Join(dir, "out")
	if err := BuildStage(filepath.Dir(dockerfile), stage, version); err != nil {
		return err
	}
	img, err := Image(spec, stage, time.Unix(0, 0))
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// BuildStage runs the Dockerfile's build stage here: the build script
// into outDir, from the repository root, with $WTRACE_VERSION.
func BuildStage(root, outDir, version string) error {
	cmd := exec.Command("sh", "tools/build-static.sh", outDir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "WTRACE_VERSION="+version)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tools/build-static.sh: %w", err)
	}
	return nil
}

// Spec is what the Dockerfile says of the image.
type Spec struct {
	// GoImage is the build stage's base ("golang:1.26.8-bookworm").
	GoImage string
	// BuildOut is the directory the build stage's script writes
	// ("/out"), which COPY --from=build reads.
	BuildOut string
	Copies   []Copy
	Config   v1.Config
}

// Copy is one COPY --from=build of the final stage.
type Copy struct {
	Src, Dst string // Src below BuildOut
	UID, GID int
}

// Parse reads a Dockerfile of two stages: "FROM golang:… AS build" whose
// RUN calls tools/build-static.sh OUTDIR, then "FROM scratch".
func Parse(df []byte) (*Spec, error) {
	lines, err := logicalLines(df)
	if err != nil {
		return nil, err
	}
	s := &Spec{}
	stage := 0
	for _, l := range lines {
		instr, args, _ := strings.Cut(l, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			stage++
			switch {
			case stage == 1 && strings.HasSuffix(args, " AS build"):
				s.GoImage = strings.TrimSuffix(args, " AS build")
			case stage == 2 && args == "scratch":
			default:
				return nil, fmt.Errorf("FROM %s: mkimage builds a golang build stage (AS build), then FROM scratch", args)
			}
			continue
		}
		if stage == 1 {
			if strings.ToUpper(instr) == "RUN" && strings.Contains(args, "tools/build-static.sh ") {
				_, after, _ := strings.Cut(args, "tools/build-static.sh ")
				s.BuildOut = strings.Fields(after)[0]
			}
			continue // WORKDIR, COPY of the sources, go mod download, ARG
		}
		if err := s.finalInstr(strings.ToUpper(instr), args); err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
	}
	switch {
	case stage != 2:
		return nil, errors.New("the Dockerfile has not two stages")
	case s.BuildOut == "":
		return nil, errors.New("the build stage does not run tools/build-static.sh OUTDIR")
	}
	return s, nil
}

func (s *Spec) finalInstr(instr, args string) error {
	c := &s.Config
	switch instr {
	case "COPY":
		f := strings.Fields(args)
		cp := Copy{}
		var rest []string
		from := false
		for _, a := range f {
			switch {
			case a == "--from=build":
				from = true
			case strings.HasPrefix(a, "--chown="):
				u, g, _ := strings.Cut(strings.TrimPrefix(a, "--chown="), ":")
				var err error
				if cp.UID, err = strconv.Atoi(u); err != nil {
					return fmt.Errorf("--chown: numeric ids only")
				}
				if cp.GID, err = strconv.Atoi(g); err != nil {
					return fmt.Errorf("--chown: numeric ids only")
				}
			case strings.HasPrefix(a, "--"):
				return fmt.Errorf("COPY option %s not supported", a)
			default:
				rest = append(rest, a)
			}
		}
		if !from || len(rest) != 2 {
			return errors.New("want COPY --from=build [--chown=UID:GID] SRC DST")
		}
		rel, ok := strings.CutPrefix(rest[0], s.BuildOut+"/")
		if !ok {
			return fmt.Errorf("%s is not in the build stage's %s", rest[0], s.BuildOut)
		}
		cp.Src, cp.Dst = rel, rest[1]
		s.Copies = append(s.Copies, cp)
	case "USER":
		c.User = args
	case "WORKDIR":
		c.WorkingDir = args
	case "ENV":
		k, v, ok := strings.Cut(args, "=")
		if !ok {
			return errors.New("want ENV KEY=VALUE")
		}
		c.Env = append(c.Env, k+"="+v)
	case "EXPOSE":
		if c.ExposedPorts == nil {
			c.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range strings.Fields(args) {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			c.ExposedPorts[p] = struct{}{}
		}
	case "LABEL":
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for rest := args; rest != ""; {
			k, after, ok := strings.Cut(rest, "=")
			if !ok {
				return errors.New("want LABEL KEY=\"VALUE\" …")
			}
			v, tail, err := quoted(after)
			if err != nil {
				return err
			}
			c.Labels[strings.TrimSpace(k)] = v
			rest = strings.TrimSpace(tail)
		}
	case "ENTRYPOINT", "CMD":
		var v []string
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			return fmt.Errorf("%s: the exec form only (a JSON array): %w", instr, err)
		}
		if instr == "ENTRYPOINT" {
			c.Entrypoint = v
		} else {
			c.Cmd = v
		}
	default:
		return fmt.Errorf("instruction %s is not supported by mkimage", instr)
	}
	return nil
}

// quoted reads a double-quoted string at the start of s.
func quoted(s string) (v, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		v, rest, _ = strings.Cut(s, " ")
		return v, rest, nil
	}
	end := strings.Index(s[1:], `"`)
	if end < 0 {
		return "", "", errors.New("unterminated quote")
	}
	return s[1 : 1+end], s[2+end:], nil
}

// logicalLines joins continued lines (a trailing backslash) and drops
// comments and blank lines.
func logicalLines(df []byte) ([]string, error) {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(df))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(l, `\`); ok {
			cur.WriteString(strings.TrimSpace(c) + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, errors.New("the Dockerfile ends inside a continued line")
	}
	return out, sc.Err()
}

// Image is the final stage: the COPYs of spec from the build stage's
// directory stage, as one layer on an empty base, with spec's
// configuration; every file's time is mtime.
func Image(spec *Spec, stage string, mtime time.Time) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDirs := func(p string) error {
		var parents []string
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			parents = append(parents, d)
		}
		sort.Strings(parents) // outermost first
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, cp := range spec.Copies {
		src := filepath.Join(stage, cp.Src)
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("COPY %s: %w", cp.Src, err)
		}
		if err := addDirs(cp.Dst); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: strings.TrimPrefix(cp.Dst, "/"), Mode: int64(fi.Mode().Perm()), ModTime: mtime,
			Uid: cp.UID, Gid: cp.GID, Format: tar.FormatPAX}
		if fi.Mode()&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch {
		case fi.IsDir():
			entries, err := os.ReadDir(src)
			if err != nil {
				return nil, err
			}
			if len(entries) > 0 {
				return nil, fmt.Errorf("COPY %s: only empty directories are copied", cp.Src)
			}
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			dirs[cp.Dst] = true
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			f, err := os.Open(src)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("COPY %s: not a file or directory", cp.Src)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: mtime}
	cf.Config = spec.Config
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.Config.Env...)
	return mutate.ConfigFile(img, cf)
}
