package report_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wtrace/wtrace/report"
)

var update = flag.Bool("update", false, "rewrite the README's screenshots, docs/img/report-*.png")

// screenshot is the browser's viewport as PNG.
func screenshot(t *testing.T, b *browser) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.d)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG")
	}
	return png
}

// TestScreenshots takes the README's screenshots: the report of a real
// recording of kube-controller-manager (its watches and writes, an event
// clicked), and of its diff against kcm without the replicaset controller
// (a changed write clicked, its bodies side by side). With -update they
// are written to docs/img (go test ./report -run Screenshots -update).
func TestScreenshots(t *testing.T) {
	img := filepath.Join("..", "docs", "img")
	dir := t.TempDir()

	page := writeSession(t, filepath.Join(kcm, "rs-1.wt"), dir, report.Options{})
	b := newBrowser(t, 1500, 900, 30*time.Second)
	b.open(t, page)
	sel := `#marks .m[data-e]`
	b.do(t, "clicking an event", chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#detail #bytes`)))
	session := screenshot(t, b)
	b.noErrors(t)

	diffPage, rep := writeDiff(t, filepath.Join(kcm, "rs-1.wt"), filepath.Join(kcm, "deployment-only.wt"), dir)
	b.open(t, diffPage)
	first := 0
	for gi, g := range rep.Groups {
		for _, d := range g.Differences {
			if d.Diff != "" && d.Category == "write" {
				goto found
			}
			first++
		}
		_ = gi
	}
found:
	sel = `#difflist li.diff-item[data-d="` + itoa(int64(first)) + `"]`
	b.do(t, "clicking a difference", chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#detail .sbs`)))
	eval[any](t, b, `window.scrollTo(0, 0)`)
	b.settle(t)
	diffPNG := screenshot(t, b)
	b.noErrors(t)

	if !*update {
		return
	}
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, png := range map[string][]byte{"report-session.png": session, "report-diff.png": diffPNG} {
		if err := os.WriteFile(filepath.Join(img, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
