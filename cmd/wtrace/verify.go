package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
)

type verifyOptions struct {
	repair string
}

func newVerifyCmd(s streams) *cobra.Command {
	o := &verifyOptions{}
	c := &cobra.Command{
		Use:   "verify SESSION.wt",
		Short: "Check a session file block by block; optionally repair it",
		Long: `Verify reads every block of a session file, checks its checksums and
records, and says what is intact: how many blocks and records, whether the
file was closed cleanly (index, footer, summary), and where any damage is.
It exits 1 if anything is damaged or the file was not closed cleanly.

With --repair OUT, it writes a new, cleanly closed session file holding every
intact record, with a rebuilt index.`,
		Example: `  wtrace verify session.wt
  wtrace verify --repair fixed.wt session.wt`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			return runVerify(s, args[0], o)
		},
	}
	c.Flags().StringVar(&o.repair, "repair", "", "write the intact records to a new session `file`")
	return c
}

func runVerify(s streams, path string, o *verifyOptions) error {
	f, err := openSession(path)
	if err != nil {
		return err
	}
	defer f.Close()
	idx := f.Index()
	records := 0
	var damage []error
	for _, err := range f.Records().All() {
		var de *formats.DamageError
		if errors.As(err, &de) {
			damage = append(damage, err)
			continue
		}
		if err != nil {
			return err
		}
		records++
	}
	fmt.Fprintf(s.out, "%s: %d blocks, %d records intact\n", path, len(idx.Blocks), records)
	for _, p := range f.Problems() {
		// Damaged blocks are reported by the scan below, in file order.
		var de *formats.DamageError
		if !errors.As(p, &de) {
			fmt.Fprintf(s.out, "  problem: %v\n", p)
		}
	}
	for _, d := range damage {
		fmt.Fprintf(s.out, "  damaged: %v\n", d)
	}
	clean := f.Clean() && len(damage) == 0
	if clean {
		fmt.Fprintln(s.out, "  closed cleanly: index, footer and summary intact")
	}
	if o.repair != "" {
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.Create(o.repair)
		if err != nil {
			return withHint(err, "check that the directory of --repair exists and is writable")
		}
		_, err = formats.Recover(in, fi.Size(), out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("repair: %w", err)
		}
		fmt.Fprintf(s.out, "  repaired: wrote %s with the %d intact records and a rebuilt index\n", o.repair, records)
		return nil
	}
	if !clean {
		return &hintError{err: fmt.Errorf("%s is damaged or was not closed cleanly", path),
			hint: fmt.Sprintf("wtrace verify --repair repaired.wt %s", path)}
	}
	return nil
}
