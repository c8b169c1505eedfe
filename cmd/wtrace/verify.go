package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
)

type verifyOptions struct {
	s      streams
	path   string
	repair string
}

func newVerifyCmd(s streams, runF func(*verifyOptions) error) *cobra.Command {
	o := &verifyOptions{s: s}
	c := &cobra.Command{
		Use:   "verify SESSION.wt",
		Short: "Check a session file block by block; optionally repair it",
		Long: `Verify reads every block of a session file, checks its checksums and
records, and says what is intact: how many blocks and records, whether the
file was closed cleanly (index, footer, summary), and where any damage is.
It exits 1 if anything is damaged or the file was not closed cleanly.

With --repair OUT, it writes a new, cleanly closed session file holding every
intact record, with a rebuilt index (never over the file it repairs; OUT is
replaced only once it is complete).`,
		Example: `  wtrace verify session.wt
  wtrace verify --repair fixed.wt session.wt`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path = args[0]
			if o.repair == "-" {
				return &usageError{fmt.Errorf("--repair needs a file: it writes a session file\nSee 'wtrace verify --help'.")}
			}
			if runF != nil {
				return runF(o)
			}
			return runVerify(o)
		},
	}
	c.Flags().StringVar(&o.repair, "repair", "", "write the intact records to a new session `file`")
	return c
}

func runVerify(o *verifyOptions) error {
	if err := noOverwrite([]string{o.repair}, o.path); err != nil {
		return err
	}
	f, err := openSession(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	v, err := f.Verify()
	if err != nil {
		return err
	}
	w := o.s.out
	fmt.Fprintf(w, "%s: %d blocks, %d records intact\n", o.path, v.Blocks, v.Records)
	for _, p := range v.Problems {
		fmt.Fprintf(w, "  problem: %v\n", p)
	}
	for _, d := range v.Damage {
		fmt.Fprintf(w, "  damaged: %v\n", d)
	}
	if v.Clean {
		fmt.Fprintln(w, "  closed cleanly: index, footer and summary intact")
	}
	if o.repair == "" {
		if !v.Clean {
			return withHint(fmt.Errorf("%s is damaged or was not closed cleanly", o.path), "wtrace verify --repair repaired.wt %s", o.path)
		}
		return nil
	}
	in, err := os.Open(o.path)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, commit, abort, err := createOutput(o.s, o.repair, "--repair")
	if err != nil {
		return err
	}
	defer abort()
	if _, err := formats.Recover(in, fi.Size(), out); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	if err := commit(); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	fmt.Fprintf(w, "  repaired: wrote %s with the %d intact records and a rebuilt index\n", o.repair, v.Records)
	return nil
}
