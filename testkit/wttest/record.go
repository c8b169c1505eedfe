package wttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// KeyLogFor returns the key log next to a capture (keylog.txt in its
// directory), or an empty one.
func KeyLogFor(pcap string) (*tlsdec.KeyLog, error) {
	f, err := os.Open(filepath.Join(filepath.Dir(pcap), "keylog.txt"))
	if err != nil {
		return tlsdec.ParseKeyLog(strings.NewReader(""))
	}
	defer f.Close()
	return tlsdec.ParseKeyLog(f)
}

// RecordPcap records the capture file pcap into the session file out with
// capture.RecordPcap, as `wtrace record --pcap` does, with the key log next
// to the capture, if any (opts.KeyLog is set from it).
func RecordPcap(pcap, out string, opts capture.Options) (capture.Result, error) {
	return RecordPcapBlocks(pcap, out, opts, formats.WriterOptions{})
}

// LiveBlocks are the Writer options of a live or proxy recording: blocks
// of 256 KiB, cut every second of capture time, the session dictionary.
// A corpus capture recorded with them has many blocks, as it would have
// had recorded live, instead of the one block of a capture file's
// default (capture.PcapWriterOptions).
var LiveBlocks = formats.WriterOptions{BlockSize: formats.DefaultBlockSize, BlockInterval: formats.DefaultBlockInterval, Level: int(zstd.SpeedFastest)}

// RecordPcapBlocks is RecordPcap with the session file's Writer options
// (zero fields: capture.PcapWriterOptions).
func RecordPcapBlocks(pcap, out string, opts capture.Options, w formats.WriterOptions) (capture.Result, error) {
	keys, err := KeyLogFor(pcap)
	if err != nil {
		return capture.Result{}, err
	}
	opts.KeyLog = keys
	in, err := os.Open(pcap)
	if err != nil {
		return capture.Result{}, err
	}
	defer in.Close()
	return capture.RecordPcap(context.Background(), in, capture.PcapOptions{
		Options: opts, Tool: "wtrace test", Name: pcap, Output: formats.FileSinkOptions{Path: out, Writer: w},
	})
}

// RecordCorpus records testdata/corpus/<scenario>/capture.pcap of the
// repository into a session file in a temporary directory of t and returns
// its path; it skips t when the capture is absent. keep keeps Secret values.
// Unless keep, the session is checked with CheckNoSecrets.
func RecordCorpus(t testing.TB, scenario string, keep bool) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(root, "testdata", "corpus", scenario, "capture.pcap")
	if _, err := os.Stat(pcap); err != nil {
		t.Skipf("corpus capture %s: %v", scenario, err)
	}
	out := filepath.Join(t.TempDir(), scenario+".wt")
	if _, err := RecordPcap(pcap, out, capture.Options{KeepSecrets: keep}); err != nil {
		t.Fatalf("recording %s: %v", pcap, err)
	}
	if !keep {
		CheckNoSecrets(t, out)
	}
	return out
}
