package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOutputsNeverDestroyInputs: every command that writes a file next to
// reading one refuses an output that is an input — the same path, ./x,
// ../dir/x, a symbolic link, a hard link — before it writes anything: exit
// 2, a message saying so, the input unchanged, no file left behind. It
// used to destroy the session in 10 of 12 such cases (slice exited 0
// leaving an empty session).
func TestOutputsNeverDestroyInputs(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	recordScenario(t, "basic-json", wt)
	want, err := os.ReadFile(wt)
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(dir, "c.pcap")
	pcapBytes, err := os.ReadFile(filepath.Join(corpus("basic-json"), "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pcap, pcapBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := os.Symlink("s.wt", filepath.Join(dir, "link.wt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(wt, filepath.Join(dir, "hard.wt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("c.pcap", filepath.Join(dir, "link.pcap")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	forms := map[string]string{
		"same path": wt,
		"dot":       filepath.Join(dir, ".", "s.wt"),
		"dot dot":   "../s.wt",
		"symlink":   filepath.Join(dir, "link.wt"),
		"hard link": filepath.Join(dir, "hard.wt"),
	}
	for form, out := range forms {
		for _, args := range [][]string{
			{"export", "--format", "jsonl", wt, "-o", out},
			{"export", "--format", "har", wt, "-o", out},
			{"verify", "--repair", out, wt},
			{"slice", wt, "-o", out},
			{"merge", wt, "-o", out},
			{"replay", wt, "--out", out, "--listen", "127.0.0.1:0"},
			{"replay", wt, "--kubeconfig-out", out, "--listen", "127.0.0.1:0"},
		} {
			t.Run(form+"/"+strings.Join(args[:2], " "), func(t *testing.T) {
				_, stderr, code := wtrace(t, args...)
				if code != 2 || !strings.Contains(stderr, "destroy what is being read") {
					t.Errorf("wtrace %s: exit %d, stderr %q; want exit 2 saying why", strings.Join(args, " "), code, stderr)
				}
				if got, _ := os.ReadFile(wt); !bytes.Equal(got, want) {
					t.Fatalf("wtrace %s changed the input", strings.Join(args, " "))
				}
			})
		}
	}
	for form, out := range map[string]string{"same path": pcap, "dot dot": "../c.pcap", "symlink": filepath.Join(dir, "link.pcap")} {
		t.Run(form+"/record", func(t *testing.T) {
			_, stderr, code := wtrace(t, "record", "--pcap", pcap, "-o", out)
			if code != 2 || !strings.Contains(stderr, "destroy what is being read") {
				t.Errorf("record -o %s: exit %d, stderr %q", out, code, stderr)
			}
			if got, _ := os.ReadFile(pcap); !bytes.Equal(got, pcapBytes) {
				t.Fatal("record changed its capture file")
			}
		})
	}
	if es, _ := os.ReadDir(dir); len(es) != 6 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v; want only the files the test made", dir, names)
	}
}

// TestFailedOutputKeepsOld: a command that fails leaves what its output
// path held, and no temporary file: a recording of a file that is no
// capture, an export of a file that is no session. (An edit that fails
// midway: edit's TestFailedEditKeepsOutput.)
func TestFailedOutputKeepsOld(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.wt")
	recordScenario(t, "basic-json", old)
	want, _ := os.ReadFile(old)
	notPcap := filepath.Join(dir, "notes.txt")
	os.WriteFile(notPcap, []byte("not a capture at all, but long enough to be read as one"), 0o644)
	if _, _, code := wtrace(t, "record", "--pcap", notPcap, "-o", old); code != 1 {
		t.Errorf("record of a file that is no capture: exit %d; want 1", code)
	}
	if got, _ := os.ReadFile(old); !bytes.Equal(got, want) {
		t.Error("a failed record changed what -o held")
	}
	if _, _, code := wtrace(t, "export", "--format", "har", notPcap, "-o", old); code != 1 {
		t.Errorf("export of a file that is no session: exit %d; want 1", code)
	}
	if got, _ := os.ReadFile(old); !bytes.Equal(got, want) {
		t.Error("a failed export changed what -o held")
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("files left behind: %v", es)
	}
}

// TestExportKeptSecrets: exporting a session recorded with --keep-secrets
// warns on stderr (it said nothing); a redacted one does not.
func TestExportKeptSecrets(t *testing.T) {
	dir := t.TempDir()
	for _, keep := range []bool{false, true} {
		wt := filepath.Join(dir, "s.wt")
		var more []string
		if keep {
			more = []string{"--keep-secrets"}
		}
		recordScenario(t, "basic-json", wt, more...)
		for _, format := range []string{"jsonl", "har", "pcap"} {
			_, stderr, code := wtrace(t, "export", "--format", format, wt, "-o", filepath.Join(dir, "out."+format))
			if code != 0 || strings.Contains(stderr, "--keep-secrets") != keep {
				t.Errorf("keep %v: export --format %s: exit %d, stderr %q", keep, format, code, stderr)
			}
		}
	}
}

// TestExportLostBlocksCLI: an export of a session none of whose blocks is
// intact exits 1 naming the lost block, in every format (HAR and pcap
// exited 0 with an empty output).
func TestExportLostBlocksCLI(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	recordScenario(t, "basic-json", wt)
	b, _ := os.ReadFile(wt)
	cut := filepath.Join(dir, "cut.wt")
	os.WriteFile(cut, b[:200], 0o644)
	for _, format := range []string{"jsonl", "har", "pcap"} {
		_, stderr, code := wtrace(t, "export", "--format", format, cut, "-o", filepath.Join(dir, "out."+format))
		if code != 1 || !strings.Contains(stderr, "block 0") {
			t.Errorf("export --format %s of a session with no intact block: exit %d, stderr %q; want 1 naming block 0", format, code, stderr)
		}
	}
}

// TestInterruptible: the first signal cancels the context handed to the
// work, which finishes; a second one returns at once, without waiting for
// it, an abort (exit 1) — from the command, not from a goroutine calling
// os.Exit.
func TestInterruptible(t *testing.T) {
	var said []string
	saying := func(w string) func() { return func() { said = append(said, w) } }
	err := interruptible(saying("stopping"), saying("aborted"), func(ctx context.Context) error {
		syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, errStopped) || fmt.Sprint(said) != "[stopping]" {
		t.Fatalf("first signal: %v, said %q; want errStopped after \"stopping\"", err, said)
	}
	said = nil
	stuck := make(chan struct{})
	defer close(stuck)
	err = interruptible(saying("stopping"), saying("aborted"), func(ctx context.Context) error {
		syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
		<-ctx.Done()
		syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		<-stuck // never finishes on its own
		return nil
	})
	if !errors.As(err, new(abortError)) || fmt.Sprint(said) != "[stopping aborted]" {
		t.Fatalf("second signal: %v, said %q; want an abort", err, said)
	}
	if code := run([]string{"--version"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("run --version: %d", code)
	}
}
