package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/artifact"
	"github.com/wtrace/wtrace/internal/units"
)

type pushOptions struct {
	s               streams
	path, ref       string
	plainHTTP       bool
	allowUnredacted bool
}

func newPushCmd(s streams, runF func(*pushOptions) error) *cobra.Command {
	o := &pushOptions{s: s}
	c := &cobra.Command{
		Use:   "push SESSION.wt REF",
		Short: "Push a session to a container registry as an OCI artifact",
		Long: `Push uploads a session file to a container registry as an OCI artifact, as
ORAS writes one: an image manifest of artifactType
application/vnd.wtrace.session.v1, the empty config, and one layer holding
the file byte for byte (media type application/vnd.wtrace.session.v1.wt,
its file name in org.opencontainers.image.title), annotated with where the
session was recorded from, its redaction and its events. Sessions of any
size are streamed. Pushing the same file again gives the same digest.

It prints the reference by digest on stdout (registry/repository@sha256:…),
for 'wtrace replay oci://…', 'wtrace pull' or 'oras pull'. Credentials come
from the Docker configuration ($DOCKER_CONFIG/config.json or
~/.docker/config.json: docker login, oras login). Registries on loopback and
private addresses are spoken to over plain HTTP, others over HTTPS unless
--plain-http.

A session recorded with --keep-secrets (its Secret values kept) is refused
unless --allow-unredacted: a registry is shared further than a file.`,
		Example: `  wtrace push testdata/controller.wt ghcr.io/me/sessions/controller:v1
  wtrace replay oci://ghcr.io/me/sessions/controller:v1
  oras pull ghcr.io/me/sessions/controller:v1     # the same file, as session.wt`,
		Args: exactArgs(2, "a session file and a registry reference"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path, o.ref = args[0], args[1]
			if _, err := artifact.ParseReference(o.ref, artifact.Options{}); err != nil {
				return &usageError{fmt.Errorf("%v\nSee 'wtrace push --help'.", err)}
			}
			if runF != nil {
				return runF(o)
			}
			return runPush(o)
		},
	}
	c.Flags().BoolVar(&o.plainHTTP, "plain-http", false, "speak plain HTTP to the registry (loopback and private addresses do anyway)")
	c.Flags().BoolVar(&o.allowUnredacted, "allow-unredacted", false, "push a session recorded with --keep-secrets (its Secret values kept)")
	return c
}

func runPush(o *pushOptions) error {
	start := time.Now()
	res, err := artifact.Push(context.Background(), o.path, o.ref, artifact.PushOptions{
		Options: artifact.Options{PlainHTTP: o.plainHTTP, UserAgent: "wtrace/" + toolVersion()}, AllowUnredacted: o.allowUnredacted})
	switch {
	case errors.Is(err, artifact.ErrUnredacted):
		return withHint(err, "push a recording made without --keep-secrets, or add --allow-unredacted")
	case errors.Is(err, artifact.ErrNotSession):
		return withHint(err, "make one with: wtrace record --pcap capture.pcap -o %s", o.path)
	case err != nil:
		return withHint(err, "check the reference and your registry login (docker login, oras login)")
	}
	fmt.Fprintf(o.s.err, "Pushed %s (%s, %s) in %s.\n", o.path, units.Bytes(res.Size), res.Digest, time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(o.s.out, res.Reference)
	return nil
}

type pullOptions struct {
	s         streams
	source    string
	out       string
	plainHTTP bool
	maxSize   string
}

func newPullCmd(s streams, runF func(*pullOptions) error) *cobra.Command {
	o := &pullOptions{s: s}
	c := &cobra.Command{
		Use:   "pull oci://REF|REF|https://URL -o SESSION.wt",
		Short: "Download a session from a registry (an OCI artifact) or a URL",
		Long: `Pull downloads a session: the artifact 'wtrace push' (or 'oras push' with
the same media types) put in a registry, or a session file at an HTTP(S)
URL (an object store, a presigned URL; #sha256=HEX at its end names the
digest the file must have). The file is streamed to -o, checked against its
digest and checked to be a session, and put in place only once complete: a
failed pull leaves what -o held. --max-size bounds what is written.

'wtrace replay' takes the same sources directly.`,
		Example: `  wtrace pull ghcr.io/me/sessions/controller:v1 -o controller.wt
  wtrace pull 'https://artifacts.example.com/s/controller.wt#sha256=9f2c…' -o controller.wt`,
		Args: exactArgs(1, "a registry reference or a URL"),
		RunE: func(c *cobra.Command, args []string) error {
			o.source = args[0]
			if o.out == "" || o.out == "-" {
				return &usageError{errors.New("-o is required: the session file to write\nSee 'wtrace pull --help'.")}
			}
			if _, err := units.ParseSize(o.maxSize); err != nil {
				return &usageError{fmt.Errorf("--max-size %q: %v", o.maxSize, err)}
			}
			if !artifact.IsRemote(o.source) {
				if _, err := artifact.ParseReference(o.source, artifact.Options{}); err != nil {
					return &usageError{fmt.Errorf("%v\nSee 'wtrace pull --help'.", err)}
				}
			}
			if runF != nil {
				return runF(o)
			}
			return runPull(o)
		},
	}
	c.Flags().StringVarP(&o.out, "out", "o", "", "session `file` to write (required)")
	c.Flags().BoolVar(&o.plainHTTP, "plain-http", false, "speak plain HTTP to the registry (loopback and private addresses do anyway)")
	c.Flags().StringVar(&o.maxSize, "max-size", "64GiB", "refuse a session larger than this `size`")
	return c
}

func runPull(o *pullOptions) error {
	max, _ := units.ParseSize(o.maxSize)
	src := o.source
	if !artifact.IsRemote(src) {
		src = artifact.SchemeOCI + src
	}
	start := time.Now()
	res, err := artifact.Fetch(context.Background(), src, o.out, artifact.Options{PlainHTTP: o.plainHTTP, MaxSize: max, UserAgent: "wtrace/" + toolVersion()})
	if err != nil {
		return withHint(err, "check the reference and your registry login (docker login, oras login)")
	}
	fmt.Fprintf(o.s.err, "Pulled %s into %s (%s, %s) in %s.\n", o.source, o.out, units.Bytes(res.Size), res.Digest, time.Since(start).Round(time.Millisecond))
	return nil
}

// fetchSession fetches a replay's session (oci://REF, https://URL) into a
// file of a temporary directory, removed by cleanup.
func fetchSession(ctx context.Context, source string, plainHTTP bool, log *slog.Logger, tell func(text, msg string, args ...any)) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "wtrace-session-")
	if err != nil {
		return "", nil, withHint(err, "set TMPDIR to a directory with room for the session")
	}
	cleanup = func() { os.RemoveAll(dir) }
	name := filepath.Base(strings.TrimSuffix(source, "/"))
	if i := strings.IndexAny(name, ":@#?"); i > 0 {
		name = name[:i]
	}
	path = filepath.Join(dir, name+".wt")
	start := time.Now()
	res, err := artifact.Fetch(ctx, source, path, artifact.Options{PlainHTTP: plainHTTP, UserAgent: "wtrace/" + toolVersion()})
	if err != nil {
		cleanup()
		return "", nil, withHint(fmt.Errorf("replay: %w", err), "check the source, your registry login (docker login; DOCKER_CONFIG in a pod) and TMPDIR's room")
	}
	took := time.Since(start).Round(time.Millisecond)
	tell(fmt.Sprintf("Fetched %s: %s (%s) in %s.", source, units.Bytes(res.Size), res.Digest, took),
		"replay: fetched the session", "source", source, "bytes", res.Size, "digest", res.Digest, "took", took.String())
	log.Debug("replay: session fetched into", "path", path)
	return path, cleanup, nil
}
