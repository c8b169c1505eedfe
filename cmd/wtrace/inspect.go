package main

import (
	"bufio"
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/export"
)

type inspectOptions struct {
	s         streams
	path      string
	json      bool
	anomalies int
}

func newInspectCmd(s streams, runF func(*inspectOptions) error) *cobra.Command {
	o := &inspectOptions{s: s}
	c := &cobra.Command{
		Use:   "inspect SESSION.wt",
		Short: "Summarise a session: connections, exchanges, events, anomalies",
		Long: `Inspect prints what a session holds: where it was recorded from, each
connection (addresses, protocol, TLS, how it ended) and each exchange on it
(method, path, status, duration, bytes, watch events by type; for a watch,
its ERROR events and its longest silence), and every anomaly: bytes the
capture lost, streams captured from their middle, bodies the capture cut,
malformed framing. --json says the same (docs/SCHEMA.md). It reads the index
and, once, the events of the watches.`,
		Example: `  wtrace inspect session.wt
  wtrace inspect --json session.wt | jq '.exchanges[] | select(.events > 0) | .request.target'`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path = args[0]
			if runF != nil {
				return runF(o)
			}
			return runInspect(o)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print the session index as JSON instead (the schema of docs/SCHEMA.md)")
	c.Flags().IntVar(&o.anomalies, "anomalies", 50, "show at most `n` anomalies (0: all)")
	return c
}

func runInspect(o *inspectOptions) error {
	f, err := openSession(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(o.s.out)
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(export.NewSession(f))
	} else {
		err = export.Text(w, f, export.TextOptions{Name: o.path, Anomalies: o.anomalies})
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}
