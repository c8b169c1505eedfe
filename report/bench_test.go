package report_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/report"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// soakSession is the session of the benchmarks: $WTRACE_SOAK_SESSION (the
// 65 MB soak of docs/BENCHMARKS.md), or the multi-watch corpus session.
func soakSession(b *testing.B) string {
	if p := os.Getenv("WTRACE_SOAK_SESSION"); p != "" {
		return p
	}
	return wttest.RecordCorpus(b, "multi-watch", false)
}

// countWriter counts what the report writes.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkSession writes the report of a session (bytes: the session
// file's); page-MB is the page's size.
func BenchmarkSession(b *testing.B) {
	path := soakSession(b)
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	var w countWriter
	for b.Loop() {
		w.n = 0
		if err := report.Session(&w, f, filepath.Base(path), report.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.n)/1e6, "page-MB")
}

// BenchmarkOpen opens the report of a session in headless Chromium (from
// navigation to its first drawing: open-s), then zooms in 8 times by 2
// around the middle and out again, each until drawn (zoom-ms: the mean of
// one step), and pans by a quarter of the window 8 times (pan-ms).
// Skipped without chromium.
func BenchmarkOpen(b *testing.B) {
	path := soakSession(b)
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := filepath.Join(b.TempDir(), "soak.html")
	out, err := os.Create(page)
	if err != nil {
		b.Fatal(err)
	}
	if err := report.Session(out, f, filepath.Base(path), report.Options{}); err != nil {
		b.Fatal(err)
	}
	out.Close()
	br := newBrowser(b, 1600, 1000, 5*time.Minute)
	var open, zoom, pan time.Duration
	var zooms, pans int
	for b.Loop() {
		br.do(b, "about:blank", chromedp.Navigate("about:blank"))
		t0 := time.Now()
		br.open(b, page)
		open += time.Since(t0)
		for _, f := range []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 2, 2, 2, 2, 2, 2, 2, 2} {
			t0 := time.Now()
			eval[any](b, br, "wtraceReport.zoom("+ftoa(f)+"), wtraceReport.render()")
			br.settle(b)
			zoom += time.Since(t0)
			zooms++
		}
		for range 8 {
			t0 := time.Now()
			eval[any](b, br, "(() => { const v = wtraceReport.view(), d = (v.t1 - v.t0) / 4; wtraceReport.setView(v.t0 + d, v.t1 + d); wtraceReport.render(); })()")
			br.settle(b)
			pan += time.Since(t0)
			pans++
		}
	}
	b.ReportMetric(open.Seconds()/float64(b.N), "open-s")
	b.ReportMetric(float64(zoom.Milliseconds())/float64(zooms), "zoom-ms")
	b.ReportMetric(float64(pan.Milliseconds())/float64(pans), "pan-ms")
	br.noErrors(b)
	_ = io.Discard
}
