package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
)

type versionOptions struct {
	s      streams
	output string
}

// versionInfo is what `wtrace version --output json` prints: the schema
// is stable (fields are added, never renamed); fields that are unknown
// (a build without version control information) are left out.
type versionInfo struct {
	// Version is the release ("v0.4.0"), the module version of a
	// `go install …@version`, or "devel".
	Version string `json:"version"`
	// GoVersion and Platform are the toolchain and GOOS/GOARCH of the
	// build.
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Revision, RevisionTime and Modified are the version control
	// information Go stamps into a build of a checkout.
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revisionTime,omitempty"`
	Modified     *bool  `json:"modified,omitempty"`
	// SessionFormat is the version of the .wt format this build writes
	// (it reads every earlier one).
	SessionFormat int `json:"sessionFormat"`
}

func buildInfo() versionInfo {
	v := versionInfo{Version: toolVersion(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, SessionFormat: formats.Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.RevisionTime = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

func newVersionCmd(s streams, runF func(*versionOptions) error) *cobra.Command {
	o := &versionOptions{s: s}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version of wtrace, its build and the session format it writes",
		Long: `Version prints the version of wtrace (a release, the module version of a
go install, or devel), the Go toolchain and platform it was built with, the
version control revision of the build when Go recorded one, and the version
of the session file format it writes (it reads every earlier one).
--output json prints the same as one JSON object (version, goVersion,
platform, revision, revisionTime, modified, sessionFormat) for scripts.`,
		Example: `  wtrace version
  wtrace version --output json | jq -r .version`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if o.output != "" && o.output != "json" {
				return &usageError{fmt.Errorf("--output %q: want json (or nothing, for text)\nSee 'wtrace version --help'.", o.output)}
			}
			if runF != nil {
				return runF(o)
			}
			return runVersion(o)
		},
	}
	c.Flags().StringVar(&o.output, "output", "", "print as `format` json (default: text)")
	return c
}

func runVersion(o *versionOptions) error {
	v := buildInfo()
	if o.output == "json" {
		enc := json.NewEncoder(o.s.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := o.s.out
	fmt.Fprintf(w, "wtrace %s\n", v.Version)
	fmt.Fprintf(w, "  go              %s %s\n", v.GoVersion, v.Platform)
	if v.Revision != "" {
		mod := ""
		if v.Modified != nil && *v.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(w, "  revision        %s%s %s\n", v.Revision, mod, v.RevisionTime)
	}
	_, err := fmt.Fprintf(w, "  session format  %d\n", v.SessionFormat)
	return err
}
