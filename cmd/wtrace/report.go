package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/internal/units"
	"github.com/wtrace/wtrace/report"
)

type reportOptions struct {
	s         streams
	paths     []string
	out       string
	clients   []string
	maxBodies string
	stall     time.Duration
	title     string
}

func newReportCmd(s streams, runF func(*reportOptions) error) *cobra.Command {
	o := &reportOptions{s: s}
	c := &cobra.Command{
		Use:   "report SESSION.wt [B.wt]",
		Short: "Write a session, or the diff of two, as one HTML page: a timeline to look at in a browser",
		Long: `Report writes one self-contained HTML file (no network, no external script
or font: it opens from a CI artifact or file://) that shows a session as a
timeline: a lane per watch and per client's other requests, grouped by
resource and namespace; each event a mark at its capture time, coloured by
type; the writes of the client under test (filled) told apart from the
environment's (hollow), and the events they caused outlined; anomalies
(lost bytes, resyncs, cut streams, 410s, stalls) marked where they
happened. Wheel to zoom, drag to pan, filter by resource, namespace, name
and client; a click on a mark shows the event's bytes or the exchange's
headers and bodies. Below: connections, exchanges by verb and status,
events per resource, the busiest seconds, every anomaly.

With two sessions it writes the diff (wtrace diff's verdict, default
options): both runs on one time axis, each from its own start, every
difference marked on both and listed, a click showing the bodies side by
side; the verdict and its counts at the top. 'wtrace diff --html FILE'
writes the same page when the sessions differ, with diff's options.

Marks past what a screen shows are drawn as aggregates with their count,
detail on zoom; at most --max-body-bytes of events and bodies are embedded
(each exchange keeps its share), each cut at 64 KiB. Credentials were never
recorded, and Secret values stay the placeholders the session holds.
The output defaults to the session's path with .html for .wt.`,
		Example: `  wtrace report session.wt                       # session.html
  wtrace report session.wt -o /tmp/s.html --client user-agent=my-operator
  wtrace report recorded.wt run.wt -o diff.html   # the diff of a regression run
  wtrace diff recorded.wt run.wt --html diff.html # the same, only when they differ`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return &usageError{fmt.Errorf("%s expects one session file, or two to diff (got %d arguments)\nSee '%s --help'.", c.CommandPath(), len(args), c.CommandPath())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.paths = args
			if runF != nil {
				return runF(o)
			}
			return runReport(o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.out, "out", "o", "", "write the page to `file` (- for stdout; default: the last session's path with .html)")
	f.StringArrayVar(&o.clients, "client", nil, "the client under test: `selector` user-agent=REGEXP, addr=IP[:PORT], both (comma), all or none; repeatable (default: every client of a proxy or replay recording, none of a capture)")
	f.StringVar(&o.maxBodies, "max-body-bytes", "16MiB", "embed at most `size` of events and bodies (each exchange keeps its share)")
	f.DurationVar(&o.stall, "stall", report.DefaultStallAfter, "mark a watch silent this long as stalled (0: never)")
	f.StringVar(&o.title, "title", "", "the page's title (default: the session's name)")
	return c
}

// reportOpts turns the flags into report.Options.
func (o *reportOptions) options() (report.Options, error) {
	opts := report.Options{Title: o.title, Tool: "wtrace " + toolVersion(), StallAfter: o.stall}
	if o.stall == 0 {
		opts.StallAfter = -1
	}
	n, err := units.ParseSize(o.maxBodies)
	if err != nil || n < 0 {
		return opts, &usageError{fmt.Errorf("--max-body-bytes %q: want a size such as 16MiB", o.maxBodies)}
	}
	opts.MaxBodyBytes = max(n, 1)
	if len(o.clients) > 0 {
		cs, none, err := world.ParseClients(o.clients)
		if err != nil {
			return opts, &usageError{err}
		}
		opts.TestedRule = strings.Join(o.clients, "; ")
		opts.Tested = func(ua, addr string) bool {
			if none {
				return false
			}
			for _, c := range cs {
				if c.Matches(ua, addr) {
					return true
				}
			}
			return false
		}
	}
	return opts, nil
}

func runReport(o *reportOptions) error {
	opts, err := o.options()
	if err != nil {
		return err
	}
	out := o.out
	if out == "" {
		out = strings.TrimSuffix(o.paths[len(o.paths)-1], ".wt") + ".html"
	}
	if err := noOverwrite([]string{out}, o.paths...); err != nil {
		return err
	}
	if len(o.paths) == 1 {
		f, err := openSession(o.paths[0])
		if err != nil {
			return err
		}
		defer f.Close()
		return writeReport(o.s, out, func(w io.Writer) error { return report.Session(w, f, o.paths[0], opts) })
	}
	for _, p := range o.paths {
		f, err := openSession(p)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		f.Close()
	}
	rep, err := diff.Sessions(o.paths[0], o.paths[1], diff.Options{})
	if err != nil {
		return err
	}
	return writeReport(o.s, out, func(w io.Writer) error { return report.DiffFiles(w, rep, opts) })
}

// writeDiffReport writes the page of a diff (wtrace diff --html).
func writeDiffReport(s streams, path string, rep *diff.Report) error {
	opts := report.Options{Tool: "wtrace " + toolVersion()}
	return writeReport(s, path, func(w io.Writer) error { return report.DiffFiles(w, rep, opts) })
}

// writeReport writes a page to path (- for stdout), put in place once
// complete, and says where on stderr.
func writeReport(s streams, path string, write func(io.Writer) error) error {
	w, commit, abort, err := createOutput(s, path, "-o")
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		abort()
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if path != "-" {
		fmt.Fprintf(s.err, "wrote %s\n", path)
	}
	return nil
}
