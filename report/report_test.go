package report_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/record"
	"github.com/wtrace/wtrace/report"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// kcm holds real recordings of kube-controller-manager and of a client-go
// controller (diff/testdata/kcm/README.md).
var kcm = filepath.Join("..", "diff", "testdata", "kcm")

// writeSession writes the report of session path into dir.
func writeSession(t *testing.T, path, dir string, opts report.Options) string {
	t.Helper()
	f := wttest.OpenSession(t, path)
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".wt")+".html")
	var buf bytes.Buffer
	if err := report.Session(&buf, f, filepath.Base(path), opts); err != nil {
		t.Fatalf("Session(%s): %v", path, err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeDiff writes the report of the diff of a and b into dir.
func writeDiff(t *testing.T, a, b, dir string) (string, *diff.Report) {
	t.Helper()
	rep, err := diff.Sessions(a, b, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "diff.html")
	var buf bytes.Buffer
	if err := report.DiffFiles(&buf, rep, report.Options{}); err != nil {
		t.Fatalf("DiffFiles: %v", err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, rep
}

// watches are the exchanges of f that are watches: split into events, or
// a watch request.
func watches(f *formats.File) []int64 {
	var ids []int64
	for _, x := range f.Index().Exchanges {
		if x.Frames > 0 || (x.Response != nil && x.Response.Events != 0) || (!x.Request.Missing && apipath.IsWatch(x.Request.Method, x.Request.Target)) {
			ids = append(ids, x.Request.Exchange)
		}
	}
	return ids
}

// frames are the watch events of f, in file order.
func frames(t *testing.T, f *formats.File) []*formats.Frame {
	t.Helper()
	var out []*formats.Frame
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		if fr, ok := r.(*formats.Frame); ok {
			out = append(out, fr)
		}
	}
	return out
}

// TestSessionInBrowser renders the report of corpus sessions in headless
// Chromium and checks it as a person would read it: no error, a lane for
// every watch, as many marks (or aggregates counting them) as events at
// every zoom, a click on a mark showing that event's exact bytes, a click
// on a request its headers, the anomalies marked.
func TestSessionInBrowser(t *testing.T) {
	for _, sc := range []string{"multi-watch", "gone-410", "protobuf"} {
		t.Run(sc, func(t *testing.T) {
			path := wttest.RecordCorpus(t, sc, false)
			dir := t.TempDir()
			page := writeSession(t, path, dir, report.Options{})
			f := wttest.OpenSession(t, path)
			frs := frames(t, f)
			b := newBrowser(t, 1400, 1200, 30*time.Second)
			b.open(t, page)

			lanes := eval[[]int64](t, b, `[...document.querySelectorAll('#labels .row.lane[data-kind="watch"]')].map((e) => +e.dataset.exchange)`)
			slices.Sort(lanes)
			if want := watches(f); !slices.Equal(lanes, want) {
				t.Errorf("watch lanes %v; want one for every watch %v", lanes, want)
			}

			drawn := eval[int](t, b, `wtraceReport.drawn()`)
			if drawn != len(frs) {
				t.Errorf("marks and aggregates count %d events; the session has %d", drawn, len(frs))
			}
			start := eval[string](t, b, `wtraceReport.model.sessions[0].start`)
			t0, err := time.Parse(time.RFC3339Nano, start)
			if err != nil {
				t.Fatalf("the page's start %q: %v", start, err)
			}
			us := func(fr *formats.Frame) float64 { return float64((fr.Time - t0.UnixNano()) / 1e3) }

			// Zoomed in twice around the middle: the marks drawn are the
			// events in the window.
			b.do(t, "zooming in", chromedp.Click(chromedp.CSS("#z-in")), chromedp.Click(chromedp.CSS("#z-in")))
			b.settle(t)
			v := eval[struct{ T0, T1 float64 }](t, b, `(() => { const v = wtraceReport.view(); return {T0: v.t0, T1: v.t1}; })()`)
			in := 0
			for _, fr := range frs {
				if u := us(fr); u >= v.T0 && u < v.T1+1 {
					in++
				}
			}
			drawn = eval[int](t, b, `wtraceReport.drawn()`)
			if drawn != in {
				t.Errorf("zoomed to [%.0f, %.0f] µs: marks count %d events; %d are in the window", v.T0, v.T1, drawn, in)
			}

			// A click on a mark shows the event's bytes. Events that one
			// packet completed share a time, and so a mark at any zoom:
			// those with a time of their own are clicked.
			same := map[[2]int64]int{}
			for _, fr := range frs {
				same[[2]int64{fr.Exchange, fr.Time}]++
			}
			var pick []*formats.Frame
			for i := 0; i < len(frs) && len(pick) < 4; i += max(1, len(frs)/4) {
				for j := i; j < len(frs); j++ {
					if same[[2]int64{frs[j].Exchange, frs[j].Time}] == 1 {
						pick = append(pick, frs[j])
						break
					}
				}
			}
			if len(pick) == 0 {
				t.Fatal("no event with a time of its own to click")
			}
			for _, fr := range pick {
				u := us(fr)
				idx := eval[int](t, b, "wtraceReport.find(0, "+itoa(fr.Exchange)+", "+itoa(fr.Seq)+")")
				if idx < 0 {
					t.Fatalf("event %d of exchange %d is not in the page", fr.Seq, fr.Exchange)
				}
				eval[any](t, b, "wtraceReport.setView("+ftoa(u-10)+", "+ftoa(u+10)+")")
				b.settle(t)
				sel := `#marks .m[data-s="0"][data-e="` + itoa(int64(idx)) + `"]`
				b.do(t, "clicking "+sel,
					chromedp.ScrollIntoView(chromedp.CSS(sel)),
					chromedp.Click(chromedp.CSS(sel)),
					chromedp.WaitVisible(chromedp.CSS(`#detail #bytes`)))
				shown := eval[string](t, b, `document.querySelector('#detail #bytes').textContent`)
				ex := eval[string](t, b, `document.getElementById('detail').dataset.exchange`)
				seq := eval[string](t, b, `document.getElementById('detail').dataset.seq`)
				if ex != itoa(fr.Exchange) || seq != itoa(fr.Seq) {
					t.Errorf("a click on event %d of exchange %d showed event %s of exchange %s", fr.Seq, fr.Exchange, seq, ex)
				}
				want := string(fr.Data)
				if f.Exchange(fr.Exchange).Response.Events != 1 { // not JSON: a hex dump
					want = hexdump(fr.Data)
				}
				if shown != want {
					t.Errorf("a click on event %d of exchange %d showed %d bytes %.80q…; want its %d bytes %.80q…", fr.Seq, fr.Exchange, len(shown), shown, len(want), want)
				}
			}

			// A request: its headers.
			b.do(t, "fit", chromedp.Click(chromedp.CSS("#z-fit")))
			b.settle(t)
			if reqs := eval[int](t, b, `document.querySelectorAll('#marks [data-r]').length`); reqs > 0 {
				b.do(t, "clicking a request",
					chromedp.Click(chromedp.CSS(`#marks [data-r]`)),
					chromedp.WaitVisible(chromedp.CSS(`#detail h3`)))
				txt := eval[string](t, b, `document.getElementById('detail').textContent`)
				if !strings.Contains(txt, "request headers") || !strings.Contains(txt, "User-Agent") {
					t.Errorf("a click on a request showed %.300q; want its headers", txt)
				}
			}
			// The type filter: without ADDED, the marks count the others.
			added := 0
			for _, fr := range frs {
				if m, err := frame.Peek(f.Exchange(fr.Exchange).Response.Events, fr.Data); err == nil && m.Type == "ADDED" {
					added++
				}
			}
			b.do(t, "unchecking ADDED", chromedp.Click(chromedp.CSS(`#f-types input[data-type="0"]`)))
			b.settle(t)
			if n := eval[int](t, b, `wtraceReport.drawn()`); n != len(frs)-added {
				t.Errorf("without ADDED the marks count %d events; want %d of %d", n, len(frs)-added, len(frs))
			}
			b.do(t, "checking ADDED", chromedp.Click(chromedp.CSS(`#f-types input[data-type="0"]`)))
			if sc == "gone-410" {
				if n := eval[int](t, b, `document.querySelectorAll('#marks .a.k-410').length`); n == 0 {
					t.Errorf("gone-410: no 410 marked on the timeline")
				}
			}
			b.noErrors(t)
		})
	}
}

// TestDiffInBrowser renders the report of failing diffs of real
// recordings (a controller build that writes another annotation value;
// kube-controller-manager without its replicaset controller): the
// verdict, every difference listed, a lane for every watch of both runs,
// a click on a changed write showing the bodies side by side.
func TestDiffInBrowser(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"ctl-seen.wt", "ctl-changed.wt"}, {"rs-1.wt", "deployment-only.wt"}} {
		t.Run(c.b, func(t *testing.T) {
			a, bpath := filepath.Join(kcm, c.a), filepath.Join(kcm, c.b)
			page, rep := writeDiff(t, a, bpath, t.TempDir())
			if rep.Same {
				t.Fatalf("%s and %s are the same; the test wants a failing diff", c.a, c.b)
			}
			b := newBrowser(t, 1400, 1200, 30*time.Second)
			b.open(t, page)
			verdict := eval[string](t, b, `document.getElementById('verdict').textContent`)
			if !strings.Contains(verdict, "differ ✗") {
				t.Errorf("verdict %q; want it to say they differ", verdict)
			}
			listed := eval[[]string](t, b, `[...document.querySelectorAll('#difflist li.diff-item')].map((e) => e.textContent)`)
			var want []diff.Difference
			for _, g := range rep.Groups {
				want = append(want, g.Differences...)
			}
			if len(listed) != len(want) {
				t.Fatalf("%d differences listed; the report has %d", len(listed), len(want))
			}
			for i, d := range want {
				w := string(d.Category) + " " + d.What
				if d.Category == diff.CategoryState {
					w = "end state"
				}
				if !strings.Contains(listed[i], strings.TrimSpace(w)) || !strings.Contains(listed[i], string(d.Kind)) {
					t.Errorf("difference %d listed as %q; want %s %s", i, listed[i], w, d.Kind)
				}
			}
			for si, p := range []string{a, bpath} {
				f := wttest.OpenSession(t, p)
				lanes := eval[[]int64](t, b, `[...document.querySelectorAll('#labels .row.lane.s`+itoa(int64(si))+`[data-kind="watch"]')].map((e) => +e.dataset.exchange)`)
				slices.Sort(lanes)
				if w := watches(f); !slices.Equal(lanes, w) {
					t.Errorf("%s: watch lanes %v; want one for every watch %v", p, lanes, w)
				}
			}
			if marks := eval[int](t, b, `document.querySelectorAll('#marks .d').length`); marks == 0 {
				t.Errorf("no difference marked on the timeline")
			}
			first := -1
			for i, d := range want {
				if d.Diff != "" && d.Kind == diff.KindChanged {
					first = i
					break
				}
			}
			if first < 0 {
				t.Fatal("the report has no changed document to show side by side")
			}
			sel := `#difflist li.diff-item[data-d="` + itoa(int64(first)) + `"]`
			b.do(t, "clicking "+sel, chromedp.ScrollIntoView(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#detail .sbs`)))
			del := eval[int](t, b, `document.querySelectorAll('#detail .sbs .del').length`)
			add := eval[int](t, b, `document.querySelectorAll('#detail .sbs .add').length`)
			if del+add == 0 {
				t.Errorf("the side-by-side diff of difference %d marks no line removed or added", first)
			}
			b.noErrors(t)
		})
	}
}

func itoa(v int64) string { return strconvI(v) }

// TestDamagedInBrowser: the report of a session cut in the middle (a
// recorder killed) shows what the file holds intact, the problem found
// opening it, and marks every event that survived.
func TestDamagedInBrowser(t *testing.T) {
	path := wttest.RecordCorpus(t, "multi-watch", false)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.wt")
	if err := os.WriteFile(cut, whole[:len(whole)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	f := wttest.OpenSession(t, cut)
	if f.Clean() {
		t.Fatal("the cut file opened clean")
	}
	n := 0
	for r, err := range f.Records().Intact(nil) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*formats.Frame); ok {
			n++
		}
	}
	page := writeSession(t, cut, t.TempDir(), report.Options{})
	b := newBrowser(t, 1400, 1000, 30*time.Second)
	b.open(t, page)
	if drawn := eval[int](t, b, `wtraceReport.drawn()`); drawn != n {
		t.Errorf("marks count %d events; the cut file holds %d intact", drawn, n)
	}
	if txt := eval[string](t, b, `document.getElementById('summary').textContent`); !strings.Contains(txt, "problems") {
		t.Errorf("the summary does not say what opening the cut file found: %.300q", txt)
	}
	b.noErrors(t)
}

// TestRunInBrowser: the report of a replay's run file (replay --out) says
// for each exchange how the replay answered it (the response End's
// formats.ReplayAnswer note), in the details a click on its lane shows.
func TestRunInBrowser(t *testing.T) {
	session := wttest.RecordCorpus(t, "basic-json", false)
	run := filepath.Join(t.TempDir(), "run.wt")
	rec, err := record.New(record.Options{Output: formats.FileSinkOptions{Path: run}, Description: "replay of basic-json"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := replay.Open(session, replay.Options{Out: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/api/v1/namespaces/corpus-basic/configmaps", "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=1"} {
		resp, err := srv.Client().Get(srv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	srv.Close()
	if _, err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f := wttest.OpenSession(t, run)
	w := watches(f)
	if len(w) != 1 {
		t.Fatalf("the run has watches %v; want one", w)
	}
	x := f.Exchange(w[0])
	if x.End == nil || !strings.HasPrefix(x.End.Note, formats.ReplayAnswer) {
		t.Fatalf("the run's watch ends %+v; want a note saying how the replay answered it", x.End)
	}
	how := strings.TrimPrefix(x.End.Note, formats.ReplayAnswer)

	page := writeSession(t, run, t.TempDir(), report.Options{})
	b := newBrowser(t, 1400, 1200, 30*time.Second)
	b.open(t, page)
	sel := `#labels .row.lane[data-kind="watch"]`
	b.do(t, "clicking the watch's lane", chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#detail h3`)))
	txt := eval[string](t, b, `document.getElementById('detail').textContent`)
	if !strings.Contains(txt, "answered"+how) {
		t.Errorf("the watch's details %.400q; want them to say it was answered %q", txt, how)
	}
	b.noErrors(t)
}
