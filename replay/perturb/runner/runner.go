package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/record"
)

// DefaultTimeout bounds each run when Options.Timeout is 0: a run of
// rs-1.wt (a kcm recording of a 12 s scenario) settles in 10 s under each
// of TestRunKCM's specs; a run still busy after eighteen times that is
// one that will not settle.
const DefaultTimeout = 3 * time.Minute

// DefaultQuietWindow is how long the clients must be quiet, once the
// environment was played, for a run to have settled (and between the
// environment's changes, PaceQuiet) when Options.QuietWindow is 0: the
// one TestPerturbKCM settles kcm with (its resyncs and retries come
// within 1 s of the change that caused them).
const DefaultQuietWindow = 2 * time.Second

// Start starts the controller under test against a replay: url is the
// replay's address, kubeconfig the path of a kubeconfig file that points
// at it. It returns once the controller was started, and stop, which
// stops it and returns once it has stopped. ctx ends when the run does.
type Start func(ctx context.Context, url, kubeconfig string) (stop func(), err error)

// Options says how Run runs each spec. The zero value: the replay's
// clients under test (every client of a proxy recording), DefaultTimeout,
// DefaultQuietWindow, run files in a temporary directory, no log.
type Options struct {
	// Clients are the clients under test (replay.Options.Clients; a
	// plan's Client parsed by world.ParseClients): whose writes the
	// points count.
	Clients []world.Client
	// Timeout bounds each run: one that has not settled by then differs.
	Timeout time.Duration
	// QuietWindow: see DefaultQuietWindow.
	QuietWindow time.Duration
	// Dir keeps each run's session file (NN-KIND.wt) and kubeconfig;
	// "" puts them in a temporary directory removed when Run returns.
	Dir string
	// Logger gets the replays' logs (nil: none).
	Logger *slog.Logger
	// Done, if set, is called with each result as soon as it is known
	// (progress), on Run's goroutine.
	Done func(i int, r Result)
}

// Result is how one spec's run went.
type Result struct {
	Spec perturb.Spec `json:"-"`
	// Text is the spec as String writes it.
	Text string `json:"spec"`
	// Same says the run ended as the recording did (diff's end state)
	// and settled; Verdict is "same" or "differs".
	Same    bool   `json:"same"`
	Verdict string `json:"verdict"`
	// Settled says the run settled within Options.Timeout.
	Settled bool `json:"settled"`
	// Took is how long the run took, from the replay's start to its
	// verdict.
	Took time.Duration `json:"-"`
	// Seconds is Took in seconds (JSON).
	Seconds float64 `json:"seconds"`
	// Applied are the perturbations the replay applied (none when the
	// spec's point was never reached).
	Applied []string `json:"applied,omitempty"`
	// First is the first difference ("" when Same); Preceding the
	// perturbation applied before it, as diff names it.
	First     string `json:"first,omitempty"`
	Preceding string `json:"preceding,omitempty"`
	// Run is the run's session file ("" when Options.Dir is "").
	Run string `json:"run,omitempty"`
	// Report is diff's report of the run (nil when it did not settle).
	Report *diff.Report `json:"-"`
}

// Run replays session once per spec to the controller start starts, and
// judges each run (see the package doc). It returns the results in the
// order of specs; an error (the session does not open, the controller
// does not start, ctx ended) stops it, with the results so far.
func Run(ctx context.Context, session string, specs []perturb.Spec, start Start, opts Options) ([]Result, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.QuietWindow <= 0 {
		opts.QuietWindow = DefaultQuietWindow
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "wtrace-perturb-")
		if err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	var out []Result
	for i, sp := range specs {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("runner: %w", err)
		}
		base := filepath.Join(dir, fmt.Sprintf("%02d-%s", i+1, sp.Kind))
		r, err := runOne(ctx, session, sp, base, start, opts)
		if err != nil {
			return out, fmt.Errorf("runner: %s: %w", sp, err)
		}
		if opts.Dir != "" {
			r.Run = base + ".wt"
		}
		out = append(out, r)
		if opts.Done != nil {
			opts.Done(i, r)
		}
	}
	return out, nil
}

// controller is the controller under test of one run: started, stopped,
// restarted by a client-restart.
type controller struct {
	mu              sync.Mutex
	ctx             context.Context
	start           Start
	url, kubeconfig string
	stop            func()
}

func (c *controller) begin() error {
	stop, err := c.start(c.ctx, c.url, c.kubeconfig)
	if err != nil {
		return err
	}
	c.stop = stop
	return nil
}

func (c *controller) end() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
}

// restart is the replay's ClientRestart.
func (c *controller) restart(context.Context, perturb.Spec) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end()
	return c.begin()
}

// runOne runs sp: the replay, its run file base.wt, the controller, the
// verdict.
func runOne(ctx context.Context, session string, sp perturb.Spec, base string, start Start, opts Options) (Result, error) {
	began := time.Now()
	res := Result{Spec: sp, Text: sp.String()}
	runPath := base + ".wt"
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: runPath}, Tool: "wtrace perturb run",
		Description: "perturbed replay of " + filepath.Base(session), Labels: map[string]string{"session": filepath.Base(session), "perturb": sp.String()}})
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	ctl := &controller{ctx: runCtx, start: start}
	srv, err := replay.Open(session, replay.Options{Pace: replay.PaceQuiet, QuietWindow: opts.QuietWindow, Out: rec,
		Perturb: []perturb.Spec{sp}, Clients: opts.Clients, Logger: opts.Logger, ClientRestart: ctl.restart})
	if err != nil {
		rec.Close()
		return res, err
	}
	closed := false
	closeAll := func() error {
		if closed {
			return nil
		}
		closed = true
		srv.Close()
		_, err := rec.Close()
		return err
	}
	defer closeAll()
	if err := srv.Start(); err != nil {
		return res, err
	}
	ctl.url, ctl.kubeconfig = srv.URL, base+".kubeconfig"
	if err := os.WriteFile(ctl.kubeconfig, srv.Kubeconfig(), 0o600); err != nil {
		return res, err
	}
	ctl.mu.Lock()
	err = ctl.begin()
	ctl.mu.Unlock()
	if err != nil {
		return res, fmt.Errorf("starting the controller: %w", err)
	}
	res.Settled = srv.Settle(runCtx.Done(), opts.QuietWindow)
	applied := srv.Perturbations()
	for _, a := range applied {
		res.Applied = append(res.Applied, a.String())
	}
	ctl.mu.Lock()
	ctl.end()
	ctl.mu.Unlock()
	if err := closeAll(); err != nil {
		return res, fmt.Errorf("the run's file: %w", err)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if !res.Settled {
		res.First = fmt.Sprintf("the run did not settle within %v", opts.Timeout)
		if len(applied) > 0 {
			res.Preceding = applied[len(applied)-1].Spec
		}
		return res.finish(began), nil
	}
	rep, err := diff.Sessions(session, runPath, diff.Options{Verdict: []diff.Category{diff.CategoryState}})
	if err != nil {
		return res, err
	}
	res.Report, res.Same = rep, rep.Same
	if !rep.Same {
		res.First = firstDifference(rep)
		if rep.Preceding != nil {
			res.Preceding = rep.Preceding.Spec
		}
	}
	return res.finish(began), nil
}

// finish sets the verdict and the time taken since began.
func (r Result) finish(began time.Time) Result {
	r.Took = time.Since(began)
	r.Seconds = r.Took.Round(100 * time.Millisecond).Seconds()
	r.Verdict = "differs"
	if r.Same {
		r.Verdict = "same"
	}
	return r
}

// firstDifference says what made rep differ: a finding, else its first
// end-state difference.
func firstDifference(rep *diff.Report) string {
	if len(rep.Findings) > 0 {
		return rep.Findings[0]
	}
	for _, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Category == diff.CategoryState {
				return strings.TrimSpace(fmt.Sprintf("%s: %s %s", g.Subject, d.Kind, d.Detail))
			}
		}
	}
	return "the end states differ"
}
