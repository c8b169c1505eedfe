package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module version, or "devel".
var version = ""

func toolVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// streams are the command's standard streams: what every command's
// constructor is given, as cli/cli's NewCmdX(f, runF) is given its
// Factory. Each constructor binds the flags to an options struct and runs
// runF with it (nil: the command itself), so that a test parses a command
// line without running it.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// isTerminal reports whether w is a terminal (progress is shown only there).
// A character device is not enough: /dev/null is one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// usageError is a mistake in how the command was called: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// hintError carries a suggestion of what to do next, printed as "Try: …".
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, format string, a ...any) error {
	return &hintError{err: err, hint: fmt.Sprintf(format, a...)}
}

// silentError has already been reported on stderr; only the exit status
// remains to be set.
type silentError struct{}

func (silentError) Error() string { return "" }

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "wtrace",
		Short: "Record and replay Kubernetes watch streams, byte for byte",
		Long: `wtrace records what a Kubernetes apiserver sent its watch clients — from a
packet capture — into a session file (.wt), shows what it holds, and serves it
back to real clients with the original timing.`,
		Example: `  wtrace record --pcap capture.pcap -o session.wt
  wtrace inspect session.wt
  wtrace events session.wt | jq .`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       toolVersion(),
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath())}
	})
	root.AddCommand(
		newRecordCmd(s, nil),
		newInspectCmd(s, nil),
		newEventsCmd(s, nil),
		newVerifyCmd(s, nil),
		newReplayCmd(s, nil),
		newDiffCmd(s, nil),
		newExportCmd(s, nil),
		newMergeCmd(s, nil),
		newSliceCmd(s, nil),
		newReportCmd(s, nil),
		newVersionCmd(s, nil),
		newPushCmd(s, nil),
		newPullCmd(s, nil),
		newPerturbCmd(s),
	)
	// --version without a short flag: -v is --verbose where a command has
	// one (replay), one meaning per short flag.
	root.Flags().Bool("version", false, "print the version (wtrace version says more)")
	registerCompletions(root)
	return root
}

// run executes the command line and returns the exit status: 0 success,
// 1 failure, 2 usage error.
func run(args []string, in io.Reader, out, errw io.Writer) int {
	root := newRootCmd(streams{in: in, out: out, err: errw})
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var se silentError
	var de diffError
	if errors.As(err, &se) || errors.As(err, &de) {
		return 1
	}
	if errors.As(err, new(abortError)) {
		return 1
	}
	if errors.Is(err, syscall.EPIPE) {
		return 0 // the reader of stdout went away (… | head)
	}
	fmt.Fprintf(errw, "Error: %v\n", err)
	var he *hintError
	var lh interface{ Hint() string } // a library's error that says what to try (formats.OpenError)
	switch {
	case errors.As(err, &he) && he.hint != "":
		fmt.Fprintf(errw, "Try: %s\n", he.hint)
	case errors.As(err, &lh) && lh.Hint() != "":
		fmt.Fprintf(errw, "Try: %s\n", lh.Hint())
	}
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.code
	}
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return 2
	}
	return 1
}

// isCobraUsage recognises cobra's own usage errors (unknown command,
// wrong number of arguments).
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand flag", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// exactArgs is cobra.ExactArgs with a usage error that names the argument.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return &usageError{fmt.Errorf("%s expects %s (got %d arguments)\nSee '%s --help'.", c.CommandPath(), what, len(args), c.CommandPath())}
		}
		return nil
	}
}
