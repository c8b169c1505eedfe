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
	ignoreRes []string
	ignoreVrb []string
	verdict   []string
	strict    bool
	leases    bool
	compareRV bool
	repeats   bool
	tolerance time.Duration
	only      []string
	json      bool
	max       int
	html      string
}

func newDiffCmd(s streams, runF func(*diffOptions) error) *cobra.Command {
	o := &diffOptions{s: s}
	c := &cobra.Command{
		Use:   "diff A.wt B.wt",
		Short: "Compare two sessions: the writes, watch events, statuses and timing; exit 1 if they differ",
		Long: `Diff compares session B (a replay run's session, or a later recording) with
session A (the reference) and says what a controller author cares about:

  end state  every object the clients wrote (created, changed, deleted), as
             the apiserver answered its last successful write — listed first,
             the most robust verdict; an Event by what it says and how often
  writes     POST, PUT, PATCH, DELETE per object (resource, namespace, name,
             subresource): its successful writes in order, aligned so that
             one missing write is one difference; bodies compared as
             normalized JSON (protobuf decoded), a changed one shown as a
             unified diff. A write answered anything but 2xx (409, 429, 5xx,
             a 403 of a terminating namespace; or not at all) is a failed
             attempt: left out, and named only where the object's
             successful writes differ; a write that repeats the one before
             it changes nothing and is left out too
  events     watch events of each stream (resource, namespace, selectors),
             paired by type and object; missing, extra, reordered, changed;
             resourceVersions with --compare-rv; timing: events whose time
             since their stream's start moved by more than --time-tolerance
  streams    watch streams found in one session only; their HTTP statuses
  exchanges  everything else (LIST, GET, discovery): status and body

Objects whose name the apiserver generated (metadata.generateName) are
paired by how they were made: their generateName, their owner and their
order ("web-796cf5c97c-#1" is the first Pod created as "web-796cf5c97c-"),
and that name replaces the server's wherever diff reads one (paths, Event
messages, names built on it). Events are compared by type, reason, the
object they are about, message and reporting component, and their count.
Normalization leaves out what always differs between runs: resourceVersion,
uid, generation, managedFields, the values of timestamp fields, the token
volume name the apiserver gives a Pod; --ignore leaves out more fields,
--ignore-resource and --ignore-verb whole resources and verbs.

The verdict: when either session holds writes, the end state and the writes
decide (a controller's behaviour); events, streams and exchanges, which
depend on timing, are listed as information. Without writes, everything
decides. --verdict names the categories that decide; --strict makes all of
them decide. --json prints the report as one JSON object, with the end
states and the generated names paired (schema: 'go doc
github.com/wtrace/wtrace/diff'). Exit status: 0 the sessions are the same,
1 they differ, 2 an error (a file that cannot be read, a bad flag).`,
		Example: `  wtrace diff recorded.wt run.wt
  wtrace diff recorded.wt run.wt --ignore .metadata.annotations.build-id --ignore /status
  wtrace diff recorded.wt run.wt --ignore-resource events --ignore-resource leases.coordination.k8s.io
  wtrace diff before.wt after.wt --strict --compare-rv --time-tolerance 500ms
  wtrace diff recorded.wt run.wt --only write --collapse-repeats
  wtrace diff recorded.wt run.wt --json | jq '.pairing[], .groups[].differences[]'
  wtrace diff recorded.wt run.wt --html diff.html   # when they differ, the report to look at`,
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
	f.BoolVar(&o.repeats, "collapse-repeats", false, "compare each object's distinct writes: leave out a write that repeats any earlier one of its object (verb, body, status), as a controller's idempotent writes do as often as timing wakes it; the creates of two objects are never repeats")
	f.DurationVar(&o.tolerance, "time-tolerance", diff.DefaultTimeTolerance, "how far an event may move in its stream's time before it is a difference; 0 leaves timing out")
	f.StringSliceVar(&o.only, "only", nil, "compare only these `categories`: state, write, event, stream, exchange")
	f.StringSliceVar(&o.verdict, "verdict", nil, "the `categories` whose differences make the sessions differ (default: state,write when there are writes, else all)")
	f.BoolVar(&o.strict, "strict", false, "every category compared decides the verdict (events and their timing too)")
	f.BoolVar(&o.leases, "leases", false, "compare leader election Leases too (left out by default: renewed on a timer, their writes count how long a run lasted)")
	f.StringArrayVar(&o.ignoreRes, "ignore-resource", nil, "leave out every exchange of `RESOURCE`: events (in every API group) or events.events.k8s.io (resource.group) (repeatable)")
	f.StringArrayVar(&o.ignoreVrb, "ignore-verb", nil, "leave out the writes of `METHOD` (PATCH, DELETE, …; repeatable)")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.IntVar(&o.max, "max", diff.DefaultMaxDifferences, "list at most `N` differences (all are counted; 0 lists none)")
	f.StringVar(&o.html, "html", "", "when the sessions differ, also write the report as one HTML page to `file` (wtrace report's timeline of both runs, every difference marked)")
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
	for _, c := range o.verdict {
		opts.Verdict = append(opts.Verdict, diff.Category(c))
	}
	if o.strict {
		if len(o.verdict) > 0 {
			return &exitError{code: 2, err: withHint(errors.New("--strict and --verdict both name the verdict"), "use one of them")}
		}
		opts.Verdict = diff.AllCategories
	}
	opts.IgnoreResources, opts.IgnoreVerbs, opts.Leases = o.ignoreRes, o.ignoreVrb, o.leases
	if o.html != "" {
		if err := noOverwrite([]string{o.html}, a, b); err != nil {
			return err
		}
	}
	rep, err := diff.Sessions(a, b, opts)
	if err != nil {
		code := 2
		if errors.Is(err, diff.ErrCategory) {
			err = withHint(err, "name categories among state, write, event, stream, exchange")
		}
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
		if o.html != "" {
			if err := writeDiffReport(s, o.html, rep); err != nil {
				return &exitError{code: 2, err: err}
			}
		}
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
