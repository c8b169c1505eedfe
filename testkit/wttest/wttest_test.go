package wttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// recordCorpus records a corpus capture into a session file (without
// RecordCorpus's own check, which these tests exercise).
func recordCorpus(t *testing.T, scenario string, keep bool) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(root, "testdata", "corpus", scenario, "capture.pcap")
	if _, err := os.Stat(pcap); err != nil {
		t.Skipf("corpus capture: %v", err)
	}
	out := filepath.Join(t.TempDir(), scenario+".wt")
	if _, err := RecordPcap(pcap, out, capture.Options{KeepSecrets: keep}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCorpusNeedles(t *testing.T) {
	ns, err := CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]int{}
	for _, n := range ns {
		from[strings.SplitN(n.From, ":", 2)[0]]++
		if len(n.Value) < MinNeedle {
			t.Errorf("needle %q (%s) shorter than %d", n.Value, n.From, MinNeedle)
		}
	}
	t.Logf("%d needles: %v", len(ns), from)
	// The token, and Secret values from both scenarios.
	if from["corpus bearer token"] != 1 || from["multi-watch"] < 10 || from["tls-h2"] < 10 {
		t.Errorf("CorpusNeedles() sources = %v; want the token and ≥ 10 values from multi-watch and tls-h2", from)
	}
}

func TestFind(t *testing.T) {
	needles, err := CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scenario string
		keep     bool
		want     bool
	}{
		{"multi-watch", true, true},
		{"multi-watch", false, false},
		{"tls-h2", true, true},
		{"tls-h2", false, false},
		{"basic-json", true, false},
	} {
		name := tc.scenario
		if tc.keep {
			name += "/keep-secrets"
		}
		t.Run(name, func(t *testing.T) {
			path := recordCorpus(t, tc.scenario, tc.keep)
			found, err := Find(path, needles)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(found) > 0; got != tc.want {
				t.Errorf("Find(%s) = %d findings (first: %v); want findings: %v", name, len(found), found[:min(1, len(found))], tc.want)
			}
			if !tc.want {
				CheckNoSecrets(t, path)
			}
		})
	}
}

// TestFindExtra: values a test adds are found anywhere, here in a header.
func TestFindExtra(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.wt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := formats.NewWriter(f, formats.WriterOptions{})
	w.Write(&formats.Meta{Tool: "wttest"})
	w.Write(&formats.Request{Exchange: 0, Method: "GET", Target: "/", Header: []formats.Header{{Name: "X-Leak", Value: "sekrit-value-1234"}}})
	w.Write(&formats.Summary{})
	w.Close()
	f.Close()
	found, err := Find(path, []Needle{{Value: []byte("sekrit-value-1234"), From: "test"}})
	if err != nil || len(found) != 1 || !strings.Contains(found[0].Where, "header X-Leak") {
		t.Errorf("Find = %v, %v; want one finding in header X-Leak", found, err)
	}
}
