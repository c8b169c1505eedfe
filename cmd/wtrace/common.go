package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/outfile"
)

// errStopped is why a command stops at the first Ctrl-C (or SIGTERM).
var errStopped = errors.New("stopped by the user")

// abortError ends a command at a second Ctrl-C: exit status 1, what it
// means already said.
type abortError struct{}

func (abortError) Error() string { return "aborted" }

// interruptible runs fn with a context that the first SIGINT or SIGTERM
// cancels (cause errStopped), after stop() says what stopping means: fn
// then finishes cleanly (a recording closes its file, a replay ends its
// streams) and its error is returned. A second signal calls abort() and
// returns an abortError at once, without waiting for fn (its goroutine
// ends with the process): the outputs still being written are removed (a
// live recording's file, in place since its first flush, stays readable
// up to its last block), and main exits 1. As litestream's: the library
// gets a context; the command's one exit is main's. It is the one place
// the CLI handles signals.
func interruptible(stop, abort func(), fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	for stopped := false; ; {
		select {
		case err := <-done:
			return err
		case <-sig:
			if stopped {
				abort()
				outfile.RemovePending()
				return abortError{}
			}
			stopped = true
			stop()
			cancel(errStopped)
		}
	}
}

// sayLine returns a func printing line on stderr after clear().
func sayLine(s streams, clear func(), line string) func() {
	return func() {
		clear()
		fmt.Fprintln(s.err, line)
	}
}

// noOverwrite refuses, before anything is written, outputs that would
// destroy what the command reads: an output that is one of ins (by path
// or file identity: ./x, ../dir/x, a symlink, a hard link), or another of
// the outputs. "" and "-" are not files.
func noOverwrite(outs []string, ins ...string) error {
	for i, o := range outs {
		if err := outfile.Check(o, append(ins[:len(ins):len(ins)], outs[:i]...)...); err != nil {
			return withHint(&usageError{err}, "write to another file")
		}
	}
	return nil
}

// outputError explains an error of the session file a command writes
// (-o, --out): flag names it.
func outputError(err error, flag string) error {
	var oe *formats.OutputError
	switch {
	case errors.Is(err, outfile.ErrInput):
		return withHint(&usageError{err}, "write to another file")
	case errors.As(err, &oe) && !oe.Created:
		return withHint(oe.Err, "check that the directory of %s exists and is writable", flag)
	case errors.As(err, &oe):
		return fmt.Errorf("writing %s: %w", oe.Path, oe.Err)
	}
	return err
}

// sessionOutput is where a command sends a session file: path, or stdout
// for "-", never over one of ins (checked again for every file written).
func sessionOutput(s streams, path string, w formats.WriterOptions, ins ...string) formats.FileSinkOptions {
	if path == "-" {
		return formats.FileSinkOptions{Out: s.out, Writer: w}
	}
	return formats.FileSinkOptions{Path: path, Writer: w, Inputs: ins}
}

// createOutput opens the output of a command that writes one file that is
// not a session (export, verify --repair): stdout for "-", else a file
// written beside path and put in place by commit only (abort, or a
// failure before, leaves what path held).
func createOutput(s streams, path, flag string) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "-" {
		return s.out, func() error { return nil }, func() {}, nil
	}
	f, err := outfile.Create(path)
	if err != nil {
		return nil, nil, nil, withHint(err, "check that the directory of %s exists and is writable", flag)
	}
	return f, f.Commit, f.Abort, nil
}

// openSession opens a session file; its error (a *formats.OpenError)
// carries the hint run prints.
func openSession(path string) (*formats.File, error) {
	return formats.Open(path, formats.ReaderOptions{})
}

// reportDamage prints what a damaged or unclosed file lost, after the data
// it could read. It fails the command if blocks were damaged.
func reportDamage(s streams, path string, f *formats.File, damage []error) error {
	var probs []error
	for _, p := range f.Problems() {
		var de *formats.DamageError
		if !errors.As(p, &de) { // damage is reported by the scan, in order
			probs = append(probs, p)
		}
	}
	seen := map[string]bool{}
	for _, e := range append(probs, damage...) {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			fmt.Fprintf(s.err, "Warning: %s: %v\n", path, e)
		}
	}
	if len(damage) > 0 {
		return withHint(fmt.Errorf("%s is damaged: %d region(s) could not be read; everything else was written", path, len(damage)),
			"wtrace verify --repair %s.repaired.wt %s", strings.TrimSuffix(path, ".wt"), path)
	}
	return nil
}

// notes prints a library's notes on stderr, one "Note:" line each.
func notes(s streams, ns []string) {
	for _, n := range ns {
		fmt.Fprintf(s.err, "Note: %s\n", n)
	}
}
