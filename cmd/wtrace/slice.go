package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/edit"
	"github.com/wtrace/wtrace/formats"
)

type sliceOptions struct {
	s          streams
	in         string
	out        string
	from, to   string
	namespaces []string
	resources  []string
	exchanges  []int64
}

func newSliceCmd(s streams, runF func(*sliceOptions) error) *cobra.Command {
	o := &sliceOptions{s: s}
	c := &cobra.Command{
		Use:   "slice SESSION.wt -o OUT.wt [--from D|TIME] [--to D|TIME] [--namespace NS]… [--resource R]… [--exchange N]…",
		Short: "Cut a self-contained fixture out of a long session: a window, namespaces, resources",
		Long: `Slice writes the part of a session that a window and filters select, as a
session that stands alone: a client replayed from it syncs, and ends with what
it had at the end of the window in the whole session.

--from and --to are a duration after the session's start (90s, 42m) or an
RFC 3339 time. Exchanges that began inside the window are kept, those outside
dropped. A watch that was open at --from is cut there and starts from the
world as it was at that moment, rebuilt from the recorded LISTs and the events
before it: an informer's LIST + WATCH gets a LIST synthesized at the
resourceVersion of the watch's last event before the cut, and its watch
starts from it; a streaming list gets the ADDED events of that world and the
initial-events-end bookmark. The watch then goes on with its recorded bytes
and times. At --to the slice ends as a capture does: what is still open ends
truncated, watches of a replay stay open and quiet.

--namespace keeps requests of these namespaces, and from requests of every
namespace (a cluster-wide informer) the events and LIST items of these
namespaces. --resource keeps these resources (configmaps, deployments.apps).
--exchange keeps these exchanges (numbers as inspect shows them). Discovery
and /version are kept. The slice's Meta says where it came from
(labels sliced-from, slice-from, slice-to, slice-namespaces, …).`,
		Example: `  # the 30 seconds around an incident at minute 42, one namespace
  wtrace slice session.wt -o incident.wt --from 41m45s --to 42m15s --namespace shop

  # from a time on, deployments and pods only
  wtrace slice session.wt -o fixture.wt --from 2026-11-21T10:42:00Z --resource deployments.apps --resource pods

  # replay the slice to the controller under test
  wtrace replay incident.wt`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			if o.in = args[0]; o.out == "" {
				return &usageError{errors.New("-o is required: the slice's session file\nSee 'wtrace slice --help'.")}
			}
			if runF != nil {
				return runF(o)
			}
			return runSlice(o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.out, "out", "o", "", "slice session `file` to write (.wt); - for stdout (required)")
	f.StringVar(&o.from, "from", "", "start of the window: a `duration` after the session's start (42m) or an RFC 3339 time")
	f.StringVar(&o.to, "to", "", "end of the window: a `duration` after the session's start or an RFC 3339 time")
	f.StringArrayVar(&o.namespaces, "namespace", nil, "keep this `namespace` only (repeat for more)")
	f.StringArrayVar(&o.resources, "resource", nil, "keep this `resource` only: configmaps, deployments.apps (repeat for more)")
	f.Int64SliceVar(&o.exchanges, "exchange", nil, "keep this exchange `number` only (repeat for more)")
	return c
}

// sliceWindow reads --from and --to against the session's start.
func sliceWindow(idx *formats.Index, from, to string) (f, t int64, err error) {
	start := edit.Start(idx)
	if from != "" {
		if f, err = edit.ParseTime(from, start); err != nil {
			return 0, 0, &usageError{fmt.Errorf("--from: %w", err)}
		}
	}
	if to != "" {
		if t, err = edit.ParseTime(to, start); err != nil {
			return 0, 0, &usageError{fmt.Errorf("--to: %w", err)}
		}
	}
	if f != 0 && t != 0 && t < f {
		return 0, 0, &usageError{fmt.Errorf("--to %s is before --from %s", to, from)}
	}
	return f, t, nil
}

func runSlice(o *sliceOptions) error {
	if err := noOverwrite([]string{o.out}, o.in); err != nil {
		return err
	}
	f, err := openSession(o.in)
	if err != nil {
		return err
	}
	defer f.Close()
	from, to, err := sliceWindow(f.Index(), o.from, o.to)
	if err != nil {
		return err
	}
	var res edit.SliceResult
	err = interruptible(sayLine(o.s, func() {}, "Stopping: the slice is not written (Ctrl-C again to exit at once)"), sayLine(o.s, func() {}, "Aborted."),
		func(ctx context.Context) (err error) {
			res, err = edit.SliceFile(ctx, f, o.in, edit.SliceOptions{Output: sessionOutput(o.s, o.out, formats.WriterOptions{}), From: from, To: to,
				Namespaces: o.namespaces, Resources: o.resources, Exchanges: o.exchanges, Tool: "wtrace " + toolVersion()})
			return err
		})
	var oe *formats.OutputError
	if errors.As(err, &oe) || errors.Is(err, errStopped) {
		return outputError(err, "-o")
	}
	if err != nil {
		return withHint(err, "wtrace verify %s", o.in)
	}
	notes(o.s, res.Notes)
	fmt.Fprintf(o.s.err, "Sliced %s: %d exchanges (%d watches cut and started from the world at --from, %d LISTs synthesized), %d records. Session file: %s\n",
		o.in, res.Exchanges, res.Cut, res.Synthesized, res.Records, joinNames(res.Files))
	if len(res.Damage) > 0 {
		for _, d := range res.Damage {
			fmt.Fprintf(o.s.err, "Warning: %v\n", d)
		}
		return withHint(fmt.Errorf("%d damaged region(s) of %s could not be read; everything else was sliced", len(res.Damage), o.in),
			"wtrace verify --repair fixed.wt %s", o.in)
	}
	return nil
}

func joinNames(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprint(names)
}
