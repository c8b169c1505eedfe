package runner_test

import (
	"context"
	"fmt"
	"log"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/perturb/plan"
	"github.com/wtrace/wtrace/replay/perturb/runner"
)

// A recording's plan, each spec a run of a controller that is a program:
// the results say which runs ended unlike the recording, and after which
// perturbation.
func ExampleRun() {
	f, err := formats.Open("session.wt", formats.ReaderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := plan.New(f, plan.Options{Max: 4})
	f.Close()
	if err != nil {
		log.Fatal(err)
	}
	clients, _, err := world.ParseClients([]string{p.Client})
	if err != nil {
		log.Fatal(err)
	}
	start := runner.Exec(`my-controller --kubeconfig "$KUBECONFIG"`, runner.ExecOptions{})
	res, err := runner.Run(context.Background(), "session.wt", p.Specs, start, runner.Options{Clients: clients})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Printf("%s: %s in %.1fs %s (after %s)\n", r.Text, r.Verdict, r.Seconds, r.First, r.Preceding)
	}
}
