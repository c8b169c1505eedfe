// Package proxytest records through the recording proxy in tests, the way
// `wtrace record --proxy` does: one call starts proxy.Record in front of
// an apiserver (a real one, testkit/k8stest, or a replay) on a free port
// of 127.0.0.1, one more stops it and waits for the session file. It is a
// package of its own, above capture/proxy, so that capture/proxy's own
// tests can keep using testkit/wttest and testkit/k8stest.
package proxytest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/proxy"
)

// Recording is a proxy.Record running for a test.
type Recording struct {
	// URL is the proxy's address: point clients here.
	URL string
	// Tee is what the proxy records into (its Stats count the events).
	Tee *capture.Tee

	t       testing.TB
	stop    context.CancelCauseFunc
	done    chan error
	stopped bool // proxy.Record has returned
}

// Record starts proxy.Record in front of the apiserver of the kubeconfig
// file at kubeconfig, recording with opts (opts.Output.Path is the session
// file; opts.Tool defaults to "wtrace test"; opts.OnStart, if set, is
// called before Record returns). It returns once the proxy serves, and
// fails t if it does not within a minute. Call Stop to end the recording;
// if the test ends first, the recording is stopped then (its error
// ignored).
func Record(t testing.TB, kubeconfig string, opts proxy.RecordOptions) *Recording {
	t.Helper()
	cl, err := proxy.LoadConfig(kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Tool == "" {
		opts.Tool = "wtrace test"
	}
	ctx, stop := context.WithCancelCause(context.Background())
	r := &Recording{t: t, stop: stop, done: make(chan error, 1)}
	started := make(chan struct{})
	onStart := opts.OnStart
	opts.OnStart = func(p *proxy.Proxy, tee *capture.Tee) {
		r.URL, r.Tee = p.URL, tee
		if onStart != nil {
			onStart(p, tee)
		}
		close(started)
	}
	go func() {
		_, err := proxy.Record(ctx, cl, ln, opts)
		r.done <- err
	}()
	t.Cleanup(func() {
		if !r.stopped {
			stop(errors.New("the test ended"))
			select {
			case <-r.done:
			case <-time.After(time.Minute):
			}
		}
	})
	select {
	case <-started:
	case err := <-r.done:
		r.stopped = true
		t.Fatalf("proxy.Record: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the proxy did not start within a minute")
	}
	return r
}

// Stop stops the recording and waits for proxy.Record to return (the
// session file closed); it fails t if that returns an error or takes more
// than a minute.
func (r *Recording) Stop() {
	r.t.Helper()
	if r.stopped {
		return
	}
	r.stop(errors.New("the test has its recording"))
	select {
	case err := <-r.done:
		r.stopped = true
		if err != nil {
			r.t.Fatalf("proxy.Record: %v", err)
		}
	case <-time.After(time.Minute):
		r.t.Fatal("proxy.Record did not return within a minute of the stop")
	}
}
