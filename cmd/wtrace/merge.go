package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/edit"
	"github.com/wtrace/wtrace/formats"
)

type mergeOptions struct {
	s      streams
	inputs []string
	out    string
}

func newMergeCmd(s streams, runF func(*mergeOptions) error) *cobra.Command {
	o := &mergeOptions{s: s}
	c := &cobra.Command{
		Use:   "merge SESSION.wt… -o OUT.wt",
		Short: "Join rotated parts and recordings of several apiservers into one session",
		Long: `Merge writes one session file from several, streaming.

Parts of a rotated recording (record --rotate writes s-0001.wt, s-0002.wt, …;
each names the part before it) are joined in order, whatever order they are
given in: what a part announces again of the one before it (its open
connections and watches) is dropped, so the merged session is what one
unrotated recording would hold, numbers included.

Separate recordings (of several apiservers, or of several proxies) are
interleaved by capture time; their connections stay apart and are numbered
anew in the order they appear.

The summary on stderr says how the inputs were grouped.`,
		Example: `  wtrace merge s-0001.wt s-0002.wt s-0003.wt -o s.wt
  wtrace merge s-*.wt -o s.wt
  wtrace merge apiserver-a.wt apiserver-b.wt -o both.wt`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{fmt.Errorf("%s expects session files to merge\nSee '%s --help'.", c.CommandPath(), c.CommandPath())}
			}
			if o.out == "" {
				return &usageError{errors.New("-o is required: the merged session file\nSee 'wtrace merge --help'.")}
			}
			o.inputs = args
			if runF != nil {
				return runF(o)
			}
			return runMerge(o)
		},
	}
	c.Flags().StringVarP(&o.out, "out", "o", "", "merged session `file` to write (.wt); - for stdout (required)")
	return c
}

func runMerge(o *mergeOptions) error {
	if err := noOverwrite([]string{o.out}, o.inputs...); err != nil {
		return err
	}
	var res edit.MergeResult
	err := interruptible(sayLine(o.s, func() {}, "Stopping: the merged file is not written (Ctrl-C again to exit at once)"), sayLine(o.s, func() {}, "Aborted."),
		func(ctx context.Context) (err error) {
			res, err = edit.Merge(ctx, o.inputs, edit.MergeOptions{Output: sessionOutput(o.s, o.out, formats.WriterOptions{}), Tool: "wtrace " + toolVersion()})
			return err
		})
	if err != nil {
		return outputError(err, "-o")
	}
	notes(o.s, res.Notes)
	var groups []string
	for _, r := range res.Recordings {
		if len(r) == 1 {
			groups = append(groups, r[0])
		} else {
			groups = append(groups, fmt.Sprintf("%s … %s (%d parts)", r[0], r[len(r)-1], len(r)))
		}
	}
	what := "1 recording"
	if len(res.Recordings) > 1 {
		what = fmt.Sprintf("%d recordings, interleaved by capture time, connections renumbered", len(res.Recordings))
	}
	fmt.Fprintf(o.s.err, "Merged %s: %s\n%d records written", what, strings.Join(groups, "; "), res.Records)
	if res.Announced > 0 {
		fmt.Fprintf(o.s.err, ", %d announced again by later parts dropped", res.Announced)
	}
	fmt.Fprintf(o.s.err, ". Session file: %s\n", strings.Join(res.Files, ", "))
	if len(res.Damage) > 0 {
		for _, d := range res.Damage {
			fmt.Fprintf(o.s.err, "Warning: %v\n", d)
		}
		return withHint(fmt.Errorf("%d damaged region(s) of the inputs could not be read; everything else was merged", len(res.Damage)),
			"wtrace verify each input; wtrace verify --repair fixed.wt damaged.wt")
	}
	return nil
}
