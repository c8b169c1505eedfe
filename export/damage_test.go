package export

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// TestExportLostBlocks: a session none of whose blocks is intact (cut
// inside its first block, no index) loses everything it held: every
// format says so in its Result (the CLI then exits 1 naming the block), as
// JSONL always did — HAR and pcap used to say nothing, with an empty log.
func TestExportLostBlocks(t *testing.T) {
	src := record(t, scenarios(t)[0], false)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut.wt")
	if err := os.WriteFile(path, b[:200], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func(io.Writer, *formats.File) (Result, error)
	}{
		{"jsonl", func(w io.Writer, f *formats.File) (Result, error) { return JSONL(w, f, JSONLOptions{}) }},
		{"har", func(w io.Writer, f *formats.File) (Result, error) { return HAR(w, f, HAROptions{}) }},
		{"pcap", func(w io.Writer, f *formats.File) (Result, error) { return Pcap(w, f, PcapOptions{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := formats.Open(path, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := tc.run(&bytes.Buffer{}, f)
			if err != nil {
				t.Fatal(err)
			}
			var de *formats.DamageError
			if len(res.Damage) != 1 || !errors.As(res.Damage[0], &de) || de.Block != 0 {
				t.Fatalf("%s of a session with no intact block: Damage %v; want block 0", tc.name, res.Damage)
			}
		})
	}
}
