package wttest

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	wtcapture "github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// SoakEnv names a session file to use as the soak session instead of
// recording it (what a benchmark run reuses).
const SoakEnv = "WTRACE_SOAK_SESSION"

// SoakSession returns the 65 MB soak session of docs/BENCHMARKS.md: the
// repository's real 8-minute long soak (testdata/soak/long-soak), 21
// copies overlapping to 500 MiB of capture (tools/pcapcat -overlap 21),
// recorded — 62.6 MB, 675 exchanges, 408,425 watch events. The capture is
// streamed into the recording, never written (about 7 s on two cores); the
// session is in a temporary directory of t, or at $WTRACE_SOAK_SESSION.
func SoakSession(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(SoakEnv); p != "" {
		return p
	}
	return RecordSoak(t, 500<<20)
}

// RecordSoak records the long soak's copies overlapping into a session, as
// SoakSession does, with capture bytes of capture (500 MiB: the 62.6 MB
// session; 530 MiB: 66 MB).
func RecordSoak(t testing.TB, capture int64) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	zst, err := os.ReadFile(filepath.Join(root, "testdata", "soak", "long-soak", "capture.pcap.zst"))
	if err != nil {
		t.Skipf("the long soak capture: %v", err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dec.DecodeAll(zst, nil)
	dec.Close()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		_, err := pcaptest.Overlap(bw, [][]byte{pcaptest.Nanosecond(raw)}, capture, 21, 8001)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	out := filepath.Join(t.TempDir(), "soak.wt")
	_, err = wtcapture.RecordPcap(context.Background(), pr, wtcapture.PcapOptions{Tool: "wtrace test", Name: "soak500.pcap",
		Output: formats.FileSinkOptions{Path: out}})
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		t.Fatalf("recording the soak: %v", err)
	}
	return out
}
