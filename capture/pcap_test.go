package capture_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
)

// TestRecordPcap: RecordPcap writes a whole session file — Meta, records,
// Summary — for a capture read to its end, cut short, or stopped; it
// refuses what is not a capture before creating anything.
func TestRecordPcap(t *testing.T) {
	pcap, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "basic-json", "capture.pcap"))
	if err != nil {
		t.Skip(err)
	}
	sum := sha256.Sum256(pcap)
	// What xxhsum (XXH64, its default) prints for this file: the
	// Summary's capture identity must be that tool's.
	const xxhsum = "3672aefa3346a6e3"
	stopped, stop := context.WithCancelCause(context.Background())
	stop(errors.New("stopped by the test"))
	for _, tc := range []struct {
		name     string
		in       []byte
		ctx      context.Context
		keep     bool
		wantNote string
		sha      bool // CaptureSHA256
		wantXXH  string
		wantSHA  string
		events   int64
	}{
		{"whole", pcap, context.Background(), false, "", false, xxhsum, "", 200},
		{"sha256", pcap, context.Background(), false, "", true, xxhsum, hex.EncodeToString(sum[:]), 200},
		{"keep-secrets", pcap, context.Background(), true, "", false, xxhsum, "", 200},
		{"cut", pcap[:len(pcap)/2], context.Background(), false, "capture file damaged: ", true, "", "", -1},
		{"stopped", pcap, stopped, false, "stopped by the test before the end of the capture", false, "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.wt")
			res, err := capture.RecordPcap(tc.ctx, bytes.NewReader(tc.in), capture.PcapOptions{
				Options: capture.Options{KeepSecrets: tc.keep}, Tool: "wtrace test", Name: "dir/capture.pcap",
				Output: formats.FileSinkOptions{Path: path}, CaptureSHA256: tc.sha,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != 1 || res.Files[0] != path || res.Read != int64(len(tc.in)) && tc.name != "stopped" {
				t.Errorf("result %+v", res)
			}
			if (res.ReadErr != nil) != (tc.name == "cut") {
				t.Errorf("ReadErr = %v", res.ReadErr)
			}
			f, err := formats.Open(path, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			idx := f.Index()
			redaction := formats.RedactionDefault
			if tc.keep {
				redaction = formats.RedactionHeadersOnly
			}
			host, _ := os.Hostname()
			if m := idx.Meta; m == nil || m.Tool != "wtrace test" || m.Source != formats.SourcePcap || m.Description != "pcap capture.pcap" ||
				m.CaptureFile != "capture.pcap" || m.Redaction != redaction || m.Host != host || m.Recorded == 0 {
				t.Errorf("Meta = %+v", idx.Meta)
			}
			s := idx.Summary
			if !f.Clean() || s == nil {
				t.Fatalf("not closed cleanly: %v", f.Problems())
			}
			if !strings.HasPrefix(s.Note, tc.wantNote) || tc.wantNote == "" && s.Note != "" || s.CaptureSHA256 != tc.wantSHA || s.CaptureXXH64 != tc.wantXXH ||
				res.SHA256 != tc.wantSHA || res.XXH64 != tc.wantXXH ||
				s.Packets != res.Packets || s.Bytes != res.Read || s.Time != res.Last ||
				s.Conns != res.Conns || s.Exchanges != res.Exchanges || s.Events != res.Events || s.Anomalies != res.Anomalies {
				t.Errorf("Summary = %+v; result %+v", s, res)
			}
			if tc.events >= 0 && s.Events != tc.events {
				t.Errorf("%d events; want %d", s.Events, tc.events)
			}
		})
	}
}

func TestRecordPcapErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.wt")
	_, err := capture.RecordPcap(context.Background(), strings.NewReader("not a capture at all"), capture.PcapOptions{Output: formats.FileSinkOptions{Path: path}})
	if !errors.Is(err, pcapfile.ErrNotCapture) {
		t.Errorf("RecordPcap(not a capture) = %v; want ErrNotCapture", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s was created for input that is not a capture", path)
	}
	pcap, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "basic-json", "capture.pcap"))
	if err != nil {
		t.Skip(err)
	}
	var oe *formats.OutputError
	_, err = capture.RecordPcap(context.Background(), bytes.NewReader(pcap), capture.PcapOptions{Output: formats.FileSinkOptions{Path: filepath.Join(dir, "no", "such", "s.wt")}})
	if !errors.As(err, &oe) || oe.Created {
		t.Errorf("RecordPcap into a missing directory = %v; want an *OutputError, not created", err)
	}
	_, err = capture.RecordPcap(context.Background(), bytes.NewReader(pcap), capture.PcapOptions{Output: formats.FileSinkOptions{Out: failAfter{n: 1}}})
	if !errors.As(err, &oe) || oe.Path != "-" {
		t.Errorf("RecordPcap into a failing stream = %v; want an *OutputError for -", err)
	}
	_, err = capture.RecordPcap(context.Background(), bytes.NewReader(pcap), capture.PcapOptions{Output: formats.FileSinkOptions{Path: path, MaxDuration: time.Hour}})
	if err == nil {
		t.Error("RecordPcap with MaxDuration: no error")
	}
}

// failAfter is a writer that fails after n writes.
type failAfter struct{ n int }

func (w failAfter) Write(p []byte) (int, error) {
	return 0, errors.New("disk full")
}
