package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestRecordPcapNoSecrets records every corpus capture with the CLI's
// defaults (tls-h2 decrypted with its key log, so its bearer token and
// Secret values are in the clear on the wire) and greps the sessions for
// the token and the Secret values; with --keep-secrets the Secret values
// must be there (the grep works).
func TestRecordPcapNoSecrets(t *testing.T) {
	dirs, _ := filepath.Glob(corpus("*"))
	if len(dirs) == 0 {
		t.Skip("no corpus captures")
	}
	needles, err := wttest.CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "capture.pcap")); err != nil {
			continue
		}
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			args := []string{"record", "--pcap", filepath.Join(dir, "capture.pcap")}
			if _, err := os.Stat(filepath.Join(dir, "keylog.txt")); err == nil {
				args = append(args, "--keylog", filepath.Join(dir, "keylog.txt"))
			}
			out := filepath.Join(t.TempDir(), name+".wt")
			if _, stderr, code := wtrace(t, append(args, "-o", out)...); code != 0 {
				t.Fatalf("record: exit %d: %s", code, stderr)
			}
			wttest.CheckNoSecrets(t, out)
			if name != "multi-watch" && name != "tls-h2" {
				return
			}
			kept := filepath.Join(t.TempDir(), name+"-kept.wt")
			if _, stderr, code := wtrace(t, append(args, "--keep-secrets", "-o", kept)...); code != 0 {
				t.Fatalf("record --keep-secrets: exit %d: %s", code, stderr)
			}
			found, err := wttest.Find(kept, needles)
			if err != nil || len(found) == 0 {
				t.Errorf("--keep-secrets session: %d secrets found, %v; want the Secret values", len(found), err)
			}
		})
	}
}
