package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportCLI: wtrace export writes each format to stdout or -o, and
// says what to do on a mistake (exit 2).
func TestExportCLI(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	recordScenario(t, "basic-json", wt)

	out, stderr, code := wtrace(t, "export", "--format", "jsonl", wt)
	if code != 0 || stderr != "" {
		t.Fatalf("export jsonl: exit %d, stderr %q", code, stderr)
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct{ Record string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		counts[l.Record]++
	}
	if counts["meta"] != 1 || counts["conn"] != 1 || counts["exchange"] != 2 || counts["event"] != 200 || counts["summary"] != 1 {
		t.Errorf("jsonl lines: %v", counts)
	}

	har := filepath.Join(dir, "s.har")
	if out, stderr, code := wtrace(t, "export", "--format", "har", wt, "-o", har); code != 0 || out != "" {
		t.Fatalf("export har: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	var h struct {
		Log struct {
			Entries []json.RawMessage `json:"entries"`
		} `json:"log"`
	}
	if b, err := os.ReadFile(har); err != nil || json.Unmarshal(b, &h) != nil || len(h.Log.Entries) != 2 {
		t.Errorf("the HAR: %v, %d entries", err, len(h.Log.Entries))
	}

	out, _, code = wtrace(t, "export", "--format", "pcap", wt)
	if code != 0 || !strings.HasPrefix(out, "\x4d\x3c\xb2\xa1") {
		t.Errorf("export pcap to stdout: exit %d, %d bytes starting %q", code, len(out), out[:min(len(out), 4)])
	}

	out, _, code = wtrace(t, "inspect", "--json", wt)
	var s struct {
		APIVersion string `json:"apiVersion"`
		Exchanges  []struct {
			Events int `json:"events"`
		} `json:"exchanges"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.APIVersion != "wtrace/v1" || len(s.Exchanges) != 2 || s.Exchanges[1].Events != 200 {
		t.Errorf("inspect --json: exit %d, %+v", code, s)
	}

	for _, args := range [][]string{
		{"export", wt},
		{"export", "--format", "csv", wt},
		{"export", "--format", "har", "--data", wt},
		{"export", "--format", "jsonl"},
	} {
		_, stderr, code := wtrace(t, args...)
		if code != 2 || !strings.Contains(stderr, "Error:") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and an error", args, code, stderr)
		}
	}
	if _, stderr, code := wtrace(t, "export", "--format", "jsonl", filepath.Join(dir, "missing.wt")); code != 1 || !strings.Contains(stderr, "Try:") {
		t.Errorf("a missing session: exit %d, stderr %q", code, stderr)
	}
	if out, _, _ := wtrace(t, "export", "--help"); !strings.Contains(out, "Examples:") {
		t.Errorf("export --help has no example:\n%s", out)
	}
}
