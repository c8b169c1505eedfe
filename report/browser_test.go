package report_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds Debian's chromium (or $WTRACE_CHROMIUM); the browser
// tests are skipped without one (.ci/run installs it).
func chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("WTRACE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Skip("no chromium: apt-get install chromium (or set WTRACE_CHROMIUM) to run the browser tests")
	return ""
}

// browser is a headless Chromium tab that keeps every console error and
// uncaught exception of the pages it opens.
type browser struct {
	ctx    context.Context
	d      time.Duration
	mu     sync.Mutex
	errors []string
}

// newBrowser starts headless Chromium, as the machine's notes say it runs
// here (no sandbox as root, no GPU, no background networking: the machine
// has no network), closed with the test. Every action has the deadline d.
func newBrowser(tb testing.TB, width, height int, d time.Duration) *browser {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(tb)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancelC(); cancelA() })
	b := &browser{ctx: ctx, d: d}
	// The first action starts the browser, on a context without deadline
	// (a deadline there would stop the browser).
	start := make(chan error, 1)
	go func() { start <- chromedp.Do(ctx, chromedp.Navigate("about:blank")) }()
	select {
	case err := <-start:
		if err != nil {
			tb.Fatalf("starting chromium: %v", err)
		}
	case <-time.After(d):
		tb.Fatalf("chromium did not start within %v", d)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// open loads a page from file:// and waits for its first drawing.
func (b *browser) open(tb testing.TB, path string) {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	b.do(tb, "opening "+path, chromedp.Navigate("file://"+abs), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
}

func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// do runs actions within the deadline, failing the test with what.
func (b *browser) do(tb testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.Fatalf("%s: %v (console errors: %q)", what, err, b.consoleErrors())
	}
}

// eval evaluates a script in the page (awaiting a promise it returns).
func eval[T any](tb testing.TB, b *browser, js string) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.d)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.Fatalf("evaluating %s: %v (console errors: %q)", js, err, b.consoleErrors())
	}
	return v
}

// noErrors fails the test if the page logged an error.
func (b *browser) noErrors(tb testing.TB) {
	tb.Helper()
	if errs := b.consoleErrors(); len(errs) > 0 {
		tb.Errorf("the page logged %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// settle waits until the page has drawn what it was asked to (two frames
// after a change of view).
func (b *browser) settle(tb testing.TB) {
	tb.Helper()
	eval[bool](tb, b, `new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
}
