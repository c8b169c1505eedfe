// Package runner runs a controller under perturbed replays of a
// recording, one perturbation a run, and judges each run against the
// recording: the campaign of a plan (package replay/perturb/plan), from
// a test or from wtrace perturb run.
//
// Each spec gets a replay of its own (package replay, answering writes
// at PaceQuiet, recorded with package replay/record) on 127.0.0.1, a free
// port; the controller is started against it (Start: the replay's URL
// and a kubeconfig file for it), the run goes on until it settles (the
// environment played, then the clients quiet for Options.QuietWindow;
// Options.Timeout at most), the controller is stopped, and package diff
// compares the run with the recording by its end state (diff's
// CategoryState, the perturbed verdict): same, or differs with the first
// difference and the perturbation that preceded it. A client-restart
// spec stops the controller and starts it again (Start once more).
//
// From a test, with a controller in the test's process:
//
//	func TestPerturbed(t *testing.T) {
//		f, _ := formats.Open("testdata/session.wt", formats.ReaderOptions{})
//		p, _ := plan.New(f, plan.Options{Max: 4})
//		f.Close()
//		clients, _, _ := world.ParseClients([]string{p.Client})
//		res, err := runner.Run(context.Background(), "testdata/session.wt", p.Specs,
//			func(ctx context.Context, url, kubeconfig string) (func(), error) {
//				ctx, cancel := context.WithCancel(ctx)
//				go myController(ctx, &rest.Config{Host: url})
//				return cancel, nil
//			}, runner.Options{Clients: clients})
//		if err != nil {
//			t.Fatal(err)
//		}
//		for _, r := range res {
//			if !r.Same {
//				t.Errorf("%s: %s (after %s)", r.Spec, r.First, r.Preceding)
//			}
//		}
//	}
//
// or with a controller that is a program, Exec("my-controller
// --kubeconfig $KUBECONFIG", …) as Start.
//
// Run runs the specs one after the other (a controller and a replay at a
// time: their timing is what the points count on); it is safe to call
// from several goroutines, each run its own. Run files go to
// Options.Dir, or a temporary directory removed when Run returns.
package runner
