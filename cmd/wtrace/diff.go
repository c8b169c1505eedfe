package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
)

type diffOptions struct {
	s         streams
	a, b      string
	ignore    []string
	compareRV bool
	repeats   bool
	tolerance time.Duration
	only      []string
	json      bool
	max       int
}

func newDiffCmd(s streams, runF func(*diffOptions) error) *cobra.Command {
	o := &diffOptions{s: s}
	c := &cobra.Command{
		Use:   "diff A.wt B.wt",
		Short: "Compare two sessions: the writes, watch events, statuses and timing; exit 1 if they differ",
		Long: `Diff compares session B (a replay run's session, or a later recording) with
session A (the reference) and says what a controller author cares about:

  writes     POST, PUT, PATCH, DELETE, paired per object (resource, namespace,
             name, subresource) in order and by verb; bodies compared as
             normalized JSON (protobuf decoded), a changed one shown as a
             unified diff; missing, extra, reordered writes; statuses
  events     watch events of each stream (resource, namespace, selectors),
             paired by type and object; missing, extra, reordered, changed
             objects; resourceVersions with --compare-rv; timing: events
             whose time since their stream's start moved by more than
             --time-tolerance
  streams    watch streams found in one session only; their HTTP statuses
  exchanges  everything else (LIST, GET, discovery): status and body

Normalization leaves out what always differs between runs: resourceVersion,
uid, generation, managedFields, and the values of timestamp fields
(creationTimestamp, lastTransitionTime, …); --ignore leaves out more.
--collapse-repeats compares each object's distinct writes: a level-triggered
controller repeats its idempotent writes as often as events wake it, which
depends on timing.

The report starts with the counts per category, then lists the differences
grouped by object. --json prints the report as one JSON object (the schema
is in 'go doc github.com/wtrace/wtrace/diff'). Exit status: 0 the sessions are
the same, 1 they differ, 2 an error (a file that cannot be read, a bad flag).`,
		Example: `  wtrace diff recorded.wt run.wt
  wtrace diff recorded.wt run.wt --ignore .metadata.annotations.build-id --ignore /status
  wtrace diff before.wt after.wt --compare-rv --time-tolerance 500ms
  wtrace diff recorded.wt run.wt --only write --collapse-repeats
  wtrace diff recorded.wt run.wt --only write --json | jq '.groups[].differences[]'`,
		Args: exactArgs(2, "two session files"),
		RunE: func(c *cobra.Command, args []string) error {
			o.a, o.b = args[0], args[1]
			if runF != nil {
				return runF(o)
			}
			return runDiff(o)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.ignore, "ignore", nil, "leave `PATH` out of every document compared: a JSON pointer (/metadata/labels/x) or .metadata.labels.x (repeatable)")
	f.BoolVar(&o.compareRV, "compare-rv", false, "report events whose resourceVersion differs")
	f.BoolVar(&o.repeats, "collapse-repeats", false, "compare each object's distinct writes: leave out a write that repeats an earlier one (verb, body, status), as a controller's idempotent writes do as often as timing wakes it")
	f.DurationVar(&o.tolerance, "time-tolerance", diff.DefaultTimeTolerance, "how far an event may move in its stream's time before it is a difference; 0 leaves timing out")
	f.StringSliceVar(&o.only, "only", nil, "compare only these `categories`: write, event, stream, exchange")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.IntVar(&o.max, "max", diff.DefaultMaxDifferences, "list at most `N` differences (all are counted; 0 lists none)")
	return c
}

// diffError is the exit status 1 of sessions that differ, the report
// already printed.
type diffError struct{}

func (diffError) Error() string { return "" }

func runDiff(o *diffOptions) error {
	s, a, b := o.s, o.a, o.b
	opts := diff.Options{Ignore: o.ignore, CompareRV: o.compareRV, CollapseRepeats: o.repeats, TimeTolerance: o.tolerance, MaxDifferences: o.max}
	if o.tolerance == 0 {
		opts.TimeTolerance = -1
	}
	if o.max == 0 {
		opts.MaxDifferences = -1
	}
	for _, c := range o.only {
		opts.Only = append(opts.Only, diff.Category(c))
	}
	for _, p := range []string{a, b} {
		f, err := openSession(p) // the helpful errors of a path that is no session
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		f.Close()
	}
	rep, err := diff.Sessions(a, b, opts)
	if err != nil {
		code := 2
		if errors.Is(err, diff.ErrIgnorePath) {
			err = withHint(err, "use a JSON pointer (/metadata/labels/x) or the dot form (.metadata.labels.x, .metadata.annotations[\"a.b/c\"])")
		}
		var fe *formats.DamageError
		if errors.As(err, &fe) {
			err = withHint(err, "wtrace verify %s", a)
		}
		return &exitError{code: code, err: err}
	}
	out := bufio.NewWriter(s.out)
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(out, diff.TextOptions{Color: isTerminal(s.out)})
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if !rep.Same {
		return diffError{}
	}
	return nil
}

// exitError sets the exit status of an error explicitly.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
