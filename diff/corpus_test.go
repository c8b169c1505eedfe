package diff_test

import (
	"strings"
	"testing"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/diff/difftest"
	"github.com/wtrace/wtrace/internal/wttest"
)

// TestCorpusSame: every real capture recorded twice gives two sessions
// that are the same.
func TestCorpusSame(t *testing.T) {
	for _, sc := range []string{"basic-json", "gone-410", "multi-watch", "protobuf", "tls-h2"} {
		t.Run(sc, func(t *testing.T) {
			a := wttest.RecordCorpus(t, sc, false)
			b := wttest.RecordCorpus(t, sc, false)
			rep := difftest.Same(t, a, b, diff.Options{})
			if rep.Summary.Events.Compared == 0 || rep.Summary.Streams.Compared == 0 {
				t.Errorf("%s: summary %+v; want events and streams compared", sc, rep.Summary)
			}
		})
	}
}

// TestCorpusBasicVsGone: two different scenarios differ, and the report
// names what: the watch stream of one, the streams and LISTs of the
// other.
func TestCorpusBasicVsGone(t *testing.T) {
	a := wttest.RecordCorpus(t, "basic-json", false)
	b := wttest.RecordCorpus(t, "gone-410", false)
	rep, err := diff.Sessions(a, b, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatal("basic-json and gone-410 are the same")
	}
	s := rep.Summary
	if s.Streams.Missing != 1 || s.Streams.Extra != 4 || s.Exchanges.Missing != 1 || s.Exchanges.Extra != 2 {
		t.Errorf("summary %+v; want 1 stream missing, 4 extra, 1 LIST missing, 2 extra", s)
	}
	var text strings.Builder
	rep.WriteText(&text, diff.TextOptions{})
	for _, want := range []string{
		"watch configmaps -n corpus-basic\n  stream missing in " + b + ": 200 events",
		"watch podtemplates -n corpus-gone\n  stream extra in " + b + ": 12 events",
		"watch configmaps -n corpus-gone\n  stream extra in " + b + ": 81 events",
		"configmaps corpus-basic (collection)\n  exchange GET missing in " + b,
		"podtemplates corpus-gone (collection)\n  exchange GET extra in " + b,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, text.String())
		}
	}
}
