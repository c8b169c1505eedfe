package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/perturb/plan"
	"github.com/wtrace/wtrace/replay/perturb/runner"
)

// perturbKinds are the kinds --kind takes (completion too).
func perturbKinds() []string {
	out := make([]string, len(perturb.Kinds))
	for i, k := range perturb.Kinds {
		out[i] = string(k)
	}
	return out
}

func newPerturbCmd(s streams) *cobra.Command {
	c := &cobra.Command{
		Use:   "perturb",
		Short: "Plan perturbed replays of a recording, and run a controller under them",
		Long: `Perturb finds the points of a recording worth perturbing (plan) and runs the
controller under test under each, one perturbation a run, judging every run
against the recording by where it ends (run). A single perturbed replay is
'wtrace replay --perturb SPEC'; the spec grammar is in 'go doc
github.com/wtrace/wtrace/replay/perturb'.`,
		Example: `  wtrace perturb plan session.wt
  wtrace perturb run session.wt --plan --max 10 --exec 'my-controller --kubeconfig "$KUBECONFIG"'`,
		Args: exactArgs(0, "a subcommand (plan, run)"),
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	c.AddCommand(newPerturbPlanCmd(s, nil), newPerturbRunCmd(s, nil))
	return c
}

type perturbPlanOptions struct {
	s      streams
	path   string
	client string
	max    int
	kinds  []string
	output string
}

// planFlags binds the flags that choose a plan (plan and run share them).
func planFlags(c *cobra.Command, client *string, max *int, kinds *[]string) {
	f := c.Flags()
	f.StringVar(client, "client", "", "the client under test: a `regexp` on its User-Agent (default: the client that wrote most, by the User-Agent's program name)")
	f.IntVar(max, "max", plan.DefaultMax, "plan at most `N` specs, spread over the recording (-1: every point)")
	f.StringSliceVar(kinds, "kind", nil, "plan only these `kinds` (comma-separated, repeatable; default every kind)")
}

// checkPlanFlags checks what planFlags bound.
func checkPlanFlags(c *cobra.Command, max int, kinds []string) ([]perturb.Kind, error) {
	if max == 0 || max < -1 {
		return nil, &usageError{fmt.Errorf("--max %d: a number of specs, or -1 for every point\nSee '%s --help'.", max, c.CommandPath())}
	}
	var out []perturb.Kind
	for _, k := range kinds {
		if !slices.Contains(perturbKinds(), k) {
			return nil, &usageError{fmt.Errorf("--kind %q: want one of %s\nSee '%s --help'.", k, strings.Join(perturbKinds(), ", "), c.CommandPath())}
		}
		out = append(out, perturb.Kind(k))
	}
	return out, nil
}

func newPerturbPlanCmd(s streams, runF func(*perturbPlanOptions) error) *cobra.Command {
	o := &perturbPlanOptions{s: s}
	c := &cobra.Command{
		Use:   "plan SESSION.wt",
		Short: "List the points of a recording worth perturbing, one spec a line",
		Long: `Plan reads a recording and prints the perturbations worth a run of the
controller under test, one spec a line on stdout (what 'wtrace replay
--perturb' and 'wtrace perturb run --spec' take), as Sieve's learning stage
finds them: each point where the client wrote after observing a state (its
N-th write, an object's writes: restart, error when=before and when=after,
client-restart), each resource it watches (watch-close, gone, skip at its
K-th event), each it lists (stale, at the start and at each relist), each it
updates (conflict), and run-wide throttle (by seed) and delay.

The client under test is the one that wrote most, told by its User-Agent's
program name (every controller of kube-controller-manager is one client), or
the one whose User-Agent --client matches. A recording has many more points
than runs worth making: --max (default 40) bounds the plan, shared out among
the kinds and spread over the recording rather than its first points. The
same recording gives the same plan. What was found goes to stderr.

--output json prints one object: the client, the counts, the specs.`,
		Example: `  wtrace perturb plan session.wt
  wtrace perturb plan session.wt --max 10 --kind gone,restart
  wtrace perturb plan session.wt --client '^my-operator/' --max -1 | wc -l

  # one run a spec, by hand
  wtrace perturb plan session.wt | while read -r spec; do
    wtrace replay session.wt --pace quiet --exit-when-done --perturb "$spec" --out "run-$((n+=1)).wt" ...
  done`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path = args[0]
			if _, err := checkPlanFlags(c, o.max, o.kinds); err != nil {
				return err
			}
			if o.output != "" && o.output != "text" && o.output != "json" {
				return &usageError{fmt.Errorf("--output %q: want text or json\nSee 'wtrace perturb plan --help'.", o.output)}
			}
			if runF != nil {
				return runF(o)
			}
			return runPerturbPlan(c, o)
		},
	}
	planFlags(c, &o.client, &o.max, &o.kinds)
	c.Flags().StringVar(&o.output, "output", "text", "print as `format` text (one spec a line) or json")
	return c
}

// makePlan opens path and plans it.
func makePlan(c *cobra.Command, path, client string, max int, kinds []string) (*plan.Plan, error) {
	ks, err := checkPlanFlags(c, max, kinds)
	if err != nil {
		return nil, err
	}
	f, err := openSession(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := plan.New(f, plan.Options{Client: client, Max: max, Kinds: ks})
	if errors.Is(err, plan.ErrNoWrites) {
		if client != "" {
			return nil, withHint(fmt.Errorf("%s: no write of a client whose User-Agent matches %q", path, client), "wtrace inspect %s lists the requests; --client takes a regexp on the User-Agent", path)
		}
		return nil, withHint(fmt.Errorf("%s: no client wrote anything: there is no controller to perturb", path), "perturb a recording of a controller (wtrace record --proxy in front of its apiserver)")
	}
	return p, err
}

// planJSON is what perturb plan --output json prints.
type planJSON struct {
	Client     string   `json:"client"`
	UserAgent  string   `json:"userAgent"`
	Writes     int      `json:"writes"`
	Watches    int      `json:"watches"`
	Lists      int      `json:"lists"`
	Events     int      `json:"events"`
	Candidates int      `json:"candidates"`
	Specs      []string `json:"specs"`
}

func runPerturbPlan(c *cobra.Command, o *perturbPlanOptions) error {
	p, err := makePlan(c, o.path, o.client, o.max, o.kinds)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.s.err, "Planned %d of %d points of %s (%d writes, %d watches, %d watch events, %d lists).\n",
		len(p.Specs), p.Candidates, p.Client, p.Writes, p.Watches, p.Events, p.Lists)
	if o.output == "json" {
		enc := json.NewEncoder(o.s.out)
		enc.SetIndent("", "  ")
		return enc.Encode(planJSON{Client: p.Client, UserAgent: p.UserAgent, Writes: p.Writes, Watches: p.Watches, Lists: p.Lists,
			Events: p.Events, Candidates: p.Candidates, Specs: p.Strings()})
	}
	for _, s := range p.Strings() {
		if _, err := fmt.Fprintln(o.s.out, s); err != nil {
			return err
		}
	}
	return nil
}

type perturbRunOptions struct {
	s           streams
	path        string
	exec        string
	specs       []string
	usePlan     bool
	client      string
	max         int
	kinds       []string
	timeout     time.Duration
	quietWindow time.Duration
	keep        string
	output      string
	verbose     bool
	parsed      []perturb.Spec
}

func newPerturbRunCmd(s streams, runF func(*perturbRunOptions) error) *cobra.Command {
	o := &perturbRunOptions{s: s}
	c := &cobra.Command{
		Use:   "run SESSION.wt --exec CMD (--spec SPEC... | --plan)",
		Short: "Run a controller under perturbed replays of a recording, and judge each run",
		Long: `Run replays the recording once per perturbation (each --spec, or the specs
'wtrace perturb plan' prints with --plan, its --max, --kind and --client) to
the controller under test, and judges each run against the recording.

For each spec: a replay on 127.0.0.1 (a free port) that answers writes, at
--pace quiet; the command --exec (through sh -c, in a process group of its
own) with KUBECONFIG set to a kubeconfig for the replay and
WTRACE_REPLAY_URL to its URL; once the run settles (the environment played,
then the clients quiet for --quiet-window; --timeout at most) the command is
stopped (SIGTERM, SIGKILL 10 s later) and the run compared with the
recording by its end state (wtrace diff's perturbed verdict). A
client-restart spec stops the command and starts it again.

The table on stdout: each spec, same or differs, how long its run took, and
the first difference with the perturbation that preceded it (--output json:
one object per spec). Progress goes to stderr on a terminal; the command's
output too with -v, with the replay's log. --keep DIR keeps each run's
session file (NN-KIND.wt: 'wtrace diff SESSION DIR/NN-KIND.wt' says more)
and kubeconfig.

Exit status 1 when any run differs. The first Ctrl-C cuts the run in
progress short and stops, with the table of the runs done; the second exits
at once.`,
		Example: `  # the plan's 40 points, kube-controller-manager under test
  wtrace perturb run session.wt --plan \
    --exec 'kube-controller-manager --kubeconfig "$KUBECONFIG" --controllers=deployment,replicaset --leader-elect=false'

  # two specs of your own, the runs kept
  wtrace perturb run session.wt --exec './my-controller' \
    --spec gone:resource=pods,at=write:3 --spec client-restart:at=write:5 --keep runs/

  # 10 restarts spread over the recording, as JSON for a script
  wtrace perturb run session.wt --plan --kind restart --max 10 --exec ./my-controller --output json | jq '.[] | select(.same | not)'`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			usage := func(format string, a ...any) error {
				return &usageError{fmt.Errorf(format+"\nSee 'wtrace perturb run --help'.", a...)}
			}
			o.path = args[0]
			if strings.TrimSpace(o.exec) == "" {
				return usage("--exec is required: the command that runs the controller under test")
			}
			if len(o.specs) == 0 && !o.usePlan {
				return usage("give the perturbations: --spec SPEC (repeatable) or --plan")
			}
			if len(o.specs) > 0 && o.usePlan {
				return usage("--spec and --plan: give one")
			}
			specs, err := perturb.ParseAll(o.specs)
			if err != nil {
				return usage("--spec: %v", err)
			}
			o.parsed = specs
			if _, err := checkPlanFlags(c, o.max, o.kinds); err != nil {
				return err
			}
			if o.timeout <= 0 || o.quietWindow <= 0 {
				return usage("--timeout and --quiet-window: positive durations")
			}
			if o.output != "text" && o.output != "json" {
				return usage("--output %q: want text or json", o.output)
			}
			if runF != nil {
				return runF(o)
			}
			return runPerturbRun(c, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.exec, "exec", "", "the controller under test: a `command` run through sh -c, with KUBECONFIG (and WTRACE_REPLAY_URL) pointing at the replay")
	f.StringArrayVar(&o.specs, "spec", nil, "a perturbation, one run: `spec` KIND[:KEY=VALUE,...] as replay --perturb takes; repeatable")
	f.BoolVar(&o.usePlan, "plan", false, "run the specs 'wtrace perturb plan' prints (with --max, --kind, --client)")
	planFlags(c, &o.client, &o.max, &o.kinds)
	f.DurationVar(&o.timeout, "timeout", runner.DefaultTimeout, "bound each run: one not settled within this `duration` differs")
	f.DurationVar(&o.quietWindow, "quiet-window", runner.DefaultQuietWindow, "how long the clients must be quiet for a run to have settled, a `duration`")
	f.StringVar(&o.keep, "keep", "", "keep each run's session file and kubeconfig in `dir` (default: a temporary directory, removed)")
	f.StringVar(&o.output, "output", "text", "print as `format` text (a table) or json")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "show the replay's log and the command's output on stderr")
	return c
}

func runPerturbRun(c *cobra.Command, o *perturbRunOptions) error {
	s := o.s
	// The plan names the client under test (--client, or the one that
	// wrote most), so that the replay counts the writes the plan did.
	p, err := makePlan(c, o.path, o.client, o.max, o.kinds)
	if err != nil {
		return err
	}
	specs := o.parsed
	if o.usePlan {
		specs = p.Specs
	}
	clients, _, err := world.ParseClients([]string{p.Client})
	if err != nil {
		return withHint(fmt.Errorf("--client: %w", err), "give a regexp without commas")
	}
	opts := runner.Options{Clients: clients, Timeout: o.timeout, QuietWindow: o.quietWindow, Dir: o.keep}
	exe := runner.ExecOptions{}
	if o.verbose {
		opts.Logger = newLogger(s, "text", slog.LevelInfo)
		exe.Stdout, exe.Stderr = s.err, s.err
	}
	if isTerminal(s.err) {
		opts.Done = func(i int, r runner.Result) {
			fmt.Fprintf(s.err, "[%d/%d] %s: %s in %.1fs\n", i+1, len(specs), r.Text, r.Verdict, r.Seconds)
		}
		fmt.Fprintf(s.err, "Running %d perturbed replays of %s, client %s.\n", len(specs), o.path, p.Client)
	}
	var results []runner.Result
	err = interruptible(func() {
		fmt.Fprintln(s.err, "\nStopping: the run in progress is cut short (Ctrl-C again to exit at once)")
	}, func() { fmt.Fprintln(s.err, "Aborted.") }, func(ctx context.Context) error {
		var err error
		results, err = runner.Run(ctx, o.path, specs, runner.Exec(o.exec, exe), opts)
		return err
	})
	if errors.As(err, new(abortError)) {
		return err
	}
	if werr := writeResults(s.out, o.output, results); werr != nil {
		return werr
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(s.err, "Stopped after %d of %d runs.\n", len(results), len(specs))
		return silentError{}
	}
	if err != nil {
		return withHint(err, "check that --exec runs the controller (try it with -v)")
	}
	differ := 0
	for _, r := range results {
		if !r.Same {
			differ++
		}
	}
	fmt.Fprintf(s.err, "%d of %d runs ended as the recording did; %d differ.\n", len(results)-differ, len(results), differ)
	if differ > 0 {
		return silentError{}
	}
	return nil
}

// writeResults prints the runs' table (text) or their JSON array.
func writeResults(w io.Writer, format string, results []runner.Result) error {
	if format == "json" {
		if results == nil {
			results = []runner.Result{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SPEC\tVERDICT\tTOOK\tFIRST DIFFERENCE")
	for _, r := range results {
		first := r.First
		if r.Preceding != "" {
			first += " (after " + r.Preceding + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%s\n", r.Text, r.Verdict, r.Seconds, first)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}
