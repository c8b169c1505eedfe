package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// wtrace runs the CLI in-process and returns stdout, stderr and the exit
// status.
func wtrace(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func corpus(name string) string { return filepath.Join("..", "..", "testdata", "corpus", name) }

// recordScenario records the corpus capture of scenario into the session
// file out with `wtrace record --pcap` and the flags in more.
func recordScenario(t *testing.T, scenario, out string, more ...string) {
	t.Helper()
	args := append([]string{"record", "--pcap", filepath.Join(corpus(scenario), "capture.pcap"), "-o", out}, more...)
	if _, stderr, code := wtrace(t, args...); code != 0 {
		t.Fatalf("wtrace record --pcap %s: exit %d: %s", scenario, code, stderr)
	}
}

// smallBlocks is the --block-size of sessions that tests damage: a
// corpus capture fits one block of the default size, and damage costs a
// block.
const smallBlocks = "16KiB"

// recordBlocks records scenario into out in blocks of smallBlocks and
// returns the file's bytes and its blocks, for tests that damage a real
// session.
func recordBlocks(t *testing.T, scenario, out string) ([]byte, []formats.BlockInfo) {
	t.Helper()
	recordScenario(t, scenario, out, "--block-size", smallBlocks)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := formats.Open(out, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return data, f.Index().Blocks
}

type line struct {
	Conn, Request, Type, Kind, Namespace, Name, ResourceVersion, SHA256, Time, Format string
	Exchange, Seq                                                                     int
	Size                                                                              int
	Code                                                                              int
}

func parseEvents(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("events: not JSON: %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

func TestRecordInspectEvents(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	stdout, stderr, code := wtrace(t, "record", "--pcap", filepath.Join(corpus("basic-json"), "capture.pcap"), "-o", wt)
	if code != 0 || stdout != "" {
		t.Fatalf("record: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "200 watch events") {
		t.Errorf("record summary: %q", stderr)
	}
	wttest.CheckNoSecrets(t, wt)
	stdout, stderr, code = wtrace(t, "events", wt)
	if code != 0 || stderr != "" {
		t.Fatalf("events: exit %d, stderr %q", code, stderr)
	}
	evs := parseEvents(t, stdout)
	if len(evs) != 200 {
		t.Fatalf("%d events; want 200", len(evs))
	}
	e := evs[0]
	if e.Conn != "127.0.0.1:34988->127.0.0.1:8001" || e.Exchange != 1 || e.Seq != 0 || e.Type != "DELETED" ||
		e.Name != "cm-0004" || e.ResourceVersion != "206" || e.Size != 1210 ||
		e.SHA256 != "b3aed36a9568ee64fcfce935d21467e3d7760b44b4e5250629c5fbd950dd20c4" ||
		!strings.HasPrefix(e.Request, "GET /api/v1/namespaces/corpus-basic/configmaps?watch=true") ||
		e.Time != "2026-11-21T12:03:27.373737000Z" {
		t.Errorf("first event = %+v", e)
	}
	stdout, _, _ = wtrace(t, "events", wt, "--type", "ADDED,DELETED", "--name", "cm-0004")
	for _, l := range parseEvents(t, stdout) {
		if l.Name != "cm-0004" || (l.Type != "ADDED" && l.Type != "DELETED") {
			t.Errorf("filter let through %+v", l)
		}
	}
	stdout, _, code = wtrace(t, "inspect", wt)
	for _, want := range []string{"closed cleanly", "1 connection, 2 exchanges, 200 watch events", "GET /api/v1/namespaces/corpus-basic/configmaps", "200 events (ADDED 63 DELETED 49 MODIFIED 88)", "longest silence"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 {
		t.Errorf("inspect exit %d", code)
	}
	if _, _, code := wtrace(t, "verify", wt); code != 0 {
		t.Errorf("verify of a clean file: exit %d", code)
	}
}

// TestRecordCaptureDigest: a session names its capture by the XXH64 that
// xxhsum prints for it, and by its SHA-256 too (what sha256sum prints)
// only with --capture-sha256; inspect shows them, and inspect --json.
func TestRecordCaptureDigest(t *testing.T) {
	const (
		xxh = "3672aefa3346a6e3" // xxhsum testdata/corpus/basic-json/capture.pcap
		sha = "3e8f8be975ecc81504669db56c705ab03e21795cd420959825023c4c54f147ef"
	)
	for _, tc := range []struct {
		flags   []string
		wantSHA string
	}{{nil, ""}, {[]string{"--capture-sha256"}, sha}} {
		wt := filepath.Join(t.TempDir(), "s.wt")
		args := append([]string{"record", "--pcap", filepath.Join(corpus("basic-json"), "capture.pcap"), "-o", wt}, tc.flags...)
		if _, stderr, code := wtrace(t, args...); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		text, _, _ := wtrace(t, "inspect", wt)
		if !strings.Contains(text, "capture xxh64 "+xxh) || strings.Contains(text, "capture sha256") != (tc.wantSHA != "") {
			t.Errorf("%v: inspect says\n%s", tc.flags, text)
		}
		js, _, _ := wtrace(t, "inspect", "--json", wt)
		var doc struct {
			Summary struct {
				CaptureXXH64  string `json:"captureXXH64"`
				CaptureSHA256 string `json:"captureSHA256"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.Summary.CaptureXXH64 != xxh || doc.Summary.CaptureSHA256 != tc.wantSHA {
			t.Errorf("%v: inspect --json summary %+v, %v; want xxh64 %s, sha256 %q", tc.flags, doc.Summary, err, xxh, tc.wantSHA)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"record"},
		{"record", "--pcap", "x.pcap"},
		{"record", "--bogus"},
		{"record", "--pcap", "x.pcap", "-o", "x.wt", "--compression", "max"},
		{"events"},
		{"events", "a.wt", "b.wt"},
		{"nosuchcommand"},
	} {
		_, stderr, code := wtrace(t, args...)
		if code != 2 || !strings.Contains(stderr, "Error: ") {
			t.Errorf("wtrace %q: exit %d, stderr %q; want exit 2 with an error", args, code, stderr)
		}
	}
	for _, c := range []string{"record", "inspect", "events", "verify"} {
		stdout, _, code := wtrace(t, c, "--help")
		if code != 0 || !strings.Contains(stdout, "Examples:") {
			t.Errorf("wtrace %s --help: exit %d, no example:\n%s", c, code, stdout)
		}
	}
}

// TestRecordCompression: every --compression level writes a session that
// reads the same events; the higher levels, no larger files.
func TestRecordCompression(t *testing.T) {
	dir := t.TempDir()
	var want string
	var sizes []int64
	for _, level := range []string{"fastest", "default", "better"} {
		wt := filepath.Join(dir, level+".wt")
		if _, stderr, code := wtrace(t, "record", "--keep-secrets", "--compression", level, "--pcap", filepath.Join(corpus("multi-watch"), "capture.pcap"), "-o", wt); code != 0 {
			t.Fatalf("record --compression %s: exit %d, %s", level, code, stderr)
		}
		stdout, stderr, code := wtrace(t, "events", wt)
		if code != 0 || stderr != "" || stdout == "" {
			t.Fatalf("events of --compression %s: exit %d, %s", level, code, stderr)
		}
		if want == "" {
			want = stdout
		} else if stdout != want {
			t.Errorf("--compression %s: events differ from --compression fastest", level)
		}
		st, err := os.Stat(wt)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
	}
	if sizes[1] > sizes[0] || sizes[2] > sizes[0] {
		t.Errorf("sizes fastest, default, better = %v; want the higher levels no larger", sizes)
	}
}

// TestHostileInput: broken input gives a clear error or a recorded
// anomaly, never a panic.
func TestHostileInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pcap, err := os.ReadFile(filepath.Join(corpus("basic-json"), "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("not a capture", func(t *testing.T) {
		p := write("notes.txt", []byte("these are not packets\n"))
		_, stderr, code := wtrace(t, "record", "--pcap", p, "-o", filepath.Join(dir, "x.wt"))
		if code != 1 || !strings.Contains(stderr, "is not a packet capture") || !strings.Contains(stderr, "Try: ") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("truncated pcap", func(t *testing.T) {
		p := write("cut.pcap", pcap[:len(pcap)*2/3+5])
		wt := filepath.Join(dir, "cut.wt")
		_, stderr, code := wtrace(t, "record", "--pcap", p, "-o", wt)
		if code != 0 || !strings.Contains(stderr, "file ends inside a packet") || !strings.Contains(stderr, "offset") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		out, _, _ := wtrace(t, "events", wt)
		if n := len(parseEvents(t, out)); n == 0 || n >= 200 {
			t.Errorf("%d events salvaged from two thirds of the capture", n)
		}
	})

	t.Run("chunk size ffffffffffffffffff", func(t *testing.T) {
		b := pcaptest.New()
		c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
		c.Send(pcaptest.ToServer, []byte("GET /api/v1/pods?watch=1 HTTP/1.1\r\n\r\n"))
		c.Send(pcaptest.ToClient, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"1c\r\n{\"type\":\"ADDED\",\"object\":{}}\r\nffffffffffffffffff\r\nxxxx"))
		wt := filepath.Join(dir, "huge-chunk.wt")
		if _, stderr, code := wtrace(t, "record", "--pcap", write("huge-chunk.pcap", b.Pcap()), "-o", wt); code != 0 {
			t.Fatalf("record: exit %d: %s", code, stderr)
		}
		out, _, _ := wtrace(t, "events", wt)
		if n := len(parseEvents(t, out)); n != 1 {
			t.Errorf("%d events; want the 1 before the bad chunk", n)
		}
		out, _, _ = wtrace(t, "inspect", wt)
		if !strings.Contains(out, "chunk size too large") {
			t.Errorf("inspect does not show the bad chunk size:\n%s", out)
		}
	})

	t.Run("20 MiB event", func(t *testing.T) {
		big := `{"type":"ADDED","object":{"kind":"ConfigMap","data":{"k":"` + strings.Repeat("a", 20<<20) + `"}}}` + "\n"
		small := `{"type":"DELETED","object":{"kind":"ConfigMap","metadata":{"name":"after"}}}` + "\n"
		body := fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", len(big), big, len(small), small)
		b := pcaptest.New()
		c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
		c.Send(pcaptest.ToServer, []byte("GET /api/v1/configmaps?watch=1 HTTP/1.1\r\n\r\n"))
		c.Send(pcaptest.ToClient, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+body))
		c.FIN(pcaptest.ToClient)
		wt := filepath.Join(dir, "big.wt")
		if _, stderr, code := wtrace(t, "record", "--pcap", write("big.pcap", b.Pcap()), "-o", wt); code != 0 {
			t.Fatalf("record: exit %d: %s", code, stderr)
		}
		out, _, _ := wtrace(t, "events", wt)
		evs := parseEvents(t, out)
		if len(evs) != 1 || evs[0].Name != "after" {
			t.Errorf("events = %+v; want only the event after the oversized one", evs)
		}
		out, _, _ = wtrace(t, "inspect", wt)
		if !strings.Contains(out, "too large") {
			t.Errorf("inspect does not report the oversized event:\n%s", out)
		}
	})

	t.Run("session cut and bit-flipped", func(t *testing.T) {
		wt := filepath.Join(dir, "whole.wt")
		recordScenario(t, "multi-watch", wt, "--block-size", smallBlocks)
		whole, _ := os.ReadFile(wt)
		all, _, _ := wtrace(t, "events", wt)
		n := len(parseEvents(t, all))
		cut := write("cut.wt", whole[:len(whole)/2])
		out, stderr, code := wtrace(t, "events", cut)
		got := len(parseEvents(t, out))
		if code != 1 || got == 0 || got >= n || !strings.Contains(stderr, "offset") {
			t.Errorf("cut file: exit %d, %d of %d events, stderr %q", code, got, n, stderr)
		}
		flipped := bytes.Clone(whole)
		flipped[len(flipped)/3] ^= 0x10
		out, stderr, code = wtrace(t, "events", write("flip.wt", flipped))
		got = len(parseEvents(t, out))
		if code != 1 || got == 0 || got >= n || !strings.Contains(stderr, "checksum") {
			t.Errorf("flipped file: exit %d, %d of %d events, stderr %q", code, got, n, stderr)
		}
		repaired := filepath.Join(dir, "repaired.wt")
		if _, _, code := wtrace(t, "verify", "--repair", repaired, cut); code != 0 {
			t.Errorf("verify --repair: exit %d", code)
		}
		if out, _, code := wtrace(t, "verify", repaired); code != 0 {
			t.Errorf("verify of the repaired file: exit %d\n%s", code, out)
		}
	})
}

// TestInspectGone: an SRE's question — was there a 410? — answered by
// inspect, with where the streams ended and how.
func TestInspectGone(t *testing.T) {
	wt := filepath.Join(t.TempDir(), "gone.wt")
	recordScenario(t, "gone-410", wt)
	out, _, code := wtrace(t, "inspect", wt)
	for _, want := range []string{
		"ERROR 410 Expired: The resourceVersion for the provided watch is too old.",
		"ERROR 410 Expired: too old resource version: 890 (907)",
		"ended rst", "reset (connection reset)", "closed (connection closed before the body was complete)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestIsTerminal: progress goes only to terminals; /dev/null is a character
// device but not a terminal.
func TestIsTerminal(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct {
		name string
		w    io.Writer
	}{{"dev-null", devnull}, {"pipe", pw}, {"file", file}, {"buffer", &bytes.Buffer{}}} {
		if isTerminal(tc.w) {
			t.Errorf("%s: isTerminal = true", tc.name)
		}
	}
}
