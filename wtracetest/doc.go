// Package wtracetest replays a recorded session for a Go test the way
// controller-runtime's envtest runs kube-apiserver: as a process — the
// wtrace binary — so that the test's module inherits none of wtrace's
// dependencies. It is a module of its own whose requirements are the
// standard library alone, and whose go line is the oldest a Kubernetes
// controller module builds with: adding it to a module pinned to client-go
// v0.33 and Go 1.24 raises neither (`go mod tidy` changes nothing but
// the new requirement).
//
//	func TestRegression(t *testing.T) {
//		r := wtracetest.Start(t, "testdata/controller.wt", wtracetest.Options{Pace: "quiet"})
//		cfg, _ := clientcmd.BuildConfigFromFlags("", r.Kubeconfig)
//		stop := startController(t, cfg) // your controller, as main starts it
//		if !r.Settle(time.Second, 2*time.Minute) {
//			t.Fatal("the run did not settle")
//		}
//		stop()
//		r.Same("testdata/controller.wt") // wtrace diff: the report on failure
//	}
//
// # Finding wtrace
//
// Options.Binary, else $WTRACE_BINARY, else wtrace on the PATH; install it
// with
//
//	go install github.com/wtrace/wtrace/cmd/wtrace@latest
//
// (or a release: the version of the binary, not of this module, decides
// what a replay does). Start fails the test when none is found.
//
// # What a Replay gives
//
// Start runs `wtrace replay SESSION --listen 127.0.0.1:0 --control
// --serving-file … --kubeconfig-out … --out …` in a temporary directory of
// the test and returns once the session is loaded and served: URL (the
// controller's API server), CAPEM (with TLS), Kubeconfig (a file for
// clientcmd), Run (the run's session file). The replay's controls are its
// control endpoint's (docs/CONTROL.md, version 1), over HTTP: Settle,
// EnvironmentDone, Environment, Requests, Writes, Stop. The test's end
// stops the replay if Stop was not called.
//
// Replay.Same and Diff judge a run with `wtrace diff`: the verdict of the
// README's regression suite, its report in the test's failure.
//
// A Replay is safe for concurrent use; its calls fail the test that
// started it (from that test's goroutine, or t.Error from others).
package wtracetest
