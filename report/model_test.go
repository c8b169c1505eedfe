package report_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/wtrace/wtrace/report"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// pageModel is what the tests read of a page's model.
type pageModel struct {
	Embedded, Left int64
	Sessions       []struct {
		Lanes []struct {
			Kind, Label        string
			Group              int
			Events, FirstEvent int
		}
		Groups []struct{ Resource, Title string }
		Events struct {
			N    int
			Cols map[string]string
		}
		Stats struct{ Caused, Events int }
	}
}

// model reads the model of a page.
func model(t *testing.T, page []byte) *pageModel {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="model">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("the page has no model")
	}
	var pm pageModel
	if err := json.Unmarshal(m[1], &pm); err != nil {
		t.Fatalf("the page's model: %v", err)
	}
	return &pm
}

// column decodes a column of varints.
func column(t *testing.T, b64 string, n int) []int64 {
	t.Helper()
	if b64 == "" {
		return make([]int64, n) // a column of zeros
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 {
			t.Fatal("a column holds a bad varint")
		}
		out = append(out, v)
		b = b[n:]
	}
	return out
}

// TestCaused: in a real recording of kube-controller-manager through the
// proxy (every client there is under test), the events its writes caused
// are told from the environment's — the scenario's kubectl-like writes,
// made against the apiserver directly: its 3 Deployments created, scaled,
// re-imaged and deleted are the environment, kcm's ReplicaSets and Pods
// and its status writes are its own.
func TestCaused(t *testing.T) {
	var page bytes.Buffer
	if err := report.Session(&page, wttest.OpenSession(t, filepath.Join(kcm, "rs-1.wt")), "rs-1.wt", report.Options{}); err != nil {
		t.Fatal(err)
	}
	s := model(t, page.Bytes()).Sessions[0]
	typ, flags := column(t, s.Events.Cols["type"], s.Events.N), column(t, s.Events.Cols["flags"], s.Events.N)
	caused := map[string][2]int{} // resource: caused, environment
	for _, l := range s.Lanes {
		for i := l.FirstEvent; l.FirstEvent >= 0 && i < l.FirstEvent+l.Events; i++ {
			c := caused[s.Groups[l.Group].Resource]
			if flags[i]&1 != 0 {
				c[0]++
			} else {
				c[1]++
				if r := s.Groups[l.Group].Resource; r != "deployments.apps" {
					t.Errorf("event %d (type %d) of %s is the environment's; kcm made every %s", i, typ[i], r, r)
				}
			}
			caused[s.Groups[l.Group].Resource] = c
		}
	}
	// deployments: 3 created, api scaled, web re-imaged, db deleted by the
	// scenario; the rest are kcm's status writes.
	if c := caused["deployments.apps"]; c[1] != 6 {
		t.Errorf("deployments: %d events of the environment, %d caused by kcm; want 6 of the environment", c[1], c[0])
	}
	if c := caused["pods"]; c[0] != 10 {
		t.Errorf("pods: %d events caused by kcm; want its 10 creates", c[0])
	}
	if s.Stats.Caused != 40 || s.Stats.Events != 46 {
		t.Errorf("stats: %d of %d events caused; want 40 of 46", s.Stats.Caused, s.Stats.Events)
	}
}

// TestBudget: past Options.MaxBodyBytes the page embeds no more than its
// budget (and the cut of one event), every event still has its mark, and
// each exchange keeps a share of its events.
func TestBudget(t *testing.T) {
	path := wttest.RecordCorpus(t, "multi-watch", false)
	var all, cut bytes.Buffer
	if err := report.Session(&all, wttest.OpenSession(t, path), "mw", report.Options{}); err != nil {
		t.Fatal(err)
	}
	const budget = 32 << 10
	if err := report.Session(&cut, wttest.OpenSession(t, path), "mw", report.Options{MaxBodyBytes: budget}); err != nil {
		t.Fatal(err)
	}
	ma, mc := model(t, all.Bytes()), model(t, cut.Bytes())
	if ma.Left != 0 || ma.Embedded == 0 {
		t.Fatalf("the default budget left %d bytes out of a small session (embedded %d)", ma.Left, ma.Embedded)
	}
	if mc.Embedded > budget+64<<10 || mc.Left == 0 || mc.Embedded+mc.Left < ma.Embedded {
		t.Errorf("with a budget of %d: %d embedded, %d left out (of %d)", budget, mc.Embedded, mc.Left, ma.Embedded)
	}
	s := mc.Sessions[0]
	if s.Events.N != ma.Sessions[0].Events.N {
		t.Errorf("with a budget: %d marks; want every event's %d", s.Events.N, ma.Sessions[0].Events.N)
	}
	item := column(t, s.Events.Cols["item"], s.Events.N)
	for _, l := range s.Lanes {
		kept := 0
		for i := l.FirstEvent; l.FirstEvent >= 0 && i < l.FirstEvent+l.Events; i++ {
			if item[i] > 0 {
				kept++
			}
		}
		if l.Events > 4 && kept == 0 {
			t.Errorf("lane %s kept none of its %d events' bytes", l.Label, l.Events)
		}
	}
}

// TestSelfContained: a report is one file that opens offline: no script,
// style sheet, image, font or frame it loads from elsewhere, nothing it
// fetches (the SVG namespace URI is a name, not a load).
func TestSelfContained(t *testing.T) {
	var page bytes.Buffer
	if err := report.Session(&page, wttest.OpenSession(t, wttest.RecordCorpus(t, "multi-watch", false)), "mw", report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<(script|img|iframe|source|video|audio|embed)\b[^>]*\bsrc\s*=`),
		regexp.MustCompile(`(?i)<link\b[^>]*\bhref\s*=`),
		regexp.MustCompile(`(?i)@import\b`),
		regexp.MustCompile(`(?i)url\(\s*['"]?\s*(https?:|//)`),
		regexp.MustCompile(`\b(fetch|importScripts)\s*\(|XMLHttpRequest|new\s+(WebSocket|EventSource|Worker)\b`),
	} {
		if loc := re.FindIndex(page.Bytes()); loc != nil {
			from := max(0, loc[0]-40)
			t.Errorf("the page loads from elsewhere (%s): …%s…", re, page.Bytes()[from:min(len(page.Bytes()), loc[1]+40)])
		}
	}
}
