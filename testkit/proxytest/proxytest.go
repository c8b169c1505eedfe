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
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
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
	seen    *requestLog
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
	r := &Recording{t: t, stop: stop, done: make(chan error, 1), seen: &requestLog{}}
	var next slog.Handler = slog.DiscardHandler
	if opts.Proxy.Logger != nil {
		next = opts.Proxy.Logger.Handler()
	}
	opts.Proxy.Logger = slog.New(&requestHandler{log: r.seen, next: next})
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

// WaitWatching waits until the proxy's clients have asked for a watch of
// each of paths (request paths, "/api/v1/pods": any namespace and
// parameters) and then made no new request for quiet — an informer's
// watch follows its LIST, so its cache is synced by then, and a component
// that waits for its caches (kube-scheduler logs nothing when they are)
// has begun its work —; it fails the test after d.
func (r *Recording) WaitWatching(d, quiet time.Duration, paths ...string) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		missing, last := r.seen.missing(paths)
		if len(missing) == 0 && time.Since(last) >= quiet {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after %v: no watch of %s through the proxy (or no quiet of %v)", d, strings.Join(missing, ", "), quiet)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requestLog notes the requests the proxy logs: the paths watched, and
// when the last request came.
type requestLog struct {
	mu      sync.Mutex
	watched map[string]bool
	last    time.Time
}

func (l *requestLog) note(target string) {
	u, err := url.ParseRequestURI(target)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = time.Now()
	if err != nil {
		return
	}
	if w := u.Query().Get("watch"); w == "true" || w == "1" {
		if l.watched == nil {
			l.watched = map[string]bool{}
		}
		l.watched[u.Path] = true
	}
}

// missing returns the paths no watch has been asked of (a namespaced
// watch of /api/v1/namespaces/NS/pods counts for /api/v1/pods), and when
// the last request came.
func (l *requestLog) missing(paths []string) ([]string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range paths {
		found := l.watched[p]
		if i := strings.LastIndexByte(p, '/'); i >= 0 && !found {
			for w := range l.watched {
				if strings.HasPrefix(w, p[:i]+"/namespaces/") && strings.HasSuffix(w, p[i:]) {
					found = true
					break
				}
			}
		}
		if !found {
			out = append(out, p)
		}
	}
	return out, l.last
}

// requestHandler passes the proxy's log on to next, noting every
// request line in log.
type requestHandler struct {
	log  *requestLog
	next slog.Handler
}

func (h *requestHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv == slog.LevelDebug || h.next.Enabled(ctx, lv)
}

func (h *requestHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Message == "request" {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "target" {
				h.log.note(a.Value.String())
				return false
			}
			return true
		})
	}
	if h.next.Enabled(ctx, rec.Level) {
		return h.next.Handle(ctx, rec)
	}
	return nil
}

func (h *requestHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &requestHandler{log: h.log, next: h.next.WithAttrs(as)}
}

func (h *requestHandler) WithGroup(name string) slog.Handler {
	return &requestHandler{log: h.log, next: h.next.WithGroup(name)}
}
