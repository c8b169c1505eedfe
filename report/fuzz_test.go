package report_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/report"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// FuzzSession: the report of any file formats opens — cut, bit-flipped,
// its records odd — is written or fails with an error, never a panic, and
// within its bounds. Seeds: corpus sessions (JSON and protobuf watches,
// ERROR events, a LIST), whole and cut.
func FuzzSession(f *testing.F) {
	for _, sc := range []string{"gone-410", "protobuf"} {
		b, err := os.ReadFile(wttest.RecordCorpus(f, sc, false))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := formats.OpenReaderAt(bytes.NewReader(data), int64(len(data)), formats.ReaderOptions{})
		if err != nil {
			return
		}
		defer s.Close()
		_ = report.Session(io.Discard, s, "fuzz", report.Options{MaxBodyBytes: 1 << 20})
	})
}
