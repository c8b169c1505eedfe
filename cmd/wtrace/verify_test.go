package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// TestVerifyRepairOrder: a real session with a byte range written twice is
// repaired into one holding every event once, and a session whose file
// magic lost a bit is read and repaired whole, both reported as damaged.
func TestVerifyRepairOrder(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	whole, blocks := recordBlocks(t, "basic-json", wt)
	if len(blocks) < 8 {
		t.Fatalf("session has %d blocks; want several", len(blocks))
	}
	// From the middle of block 2 to the middle of block 7, written again
	// after itself.
	a := blocks[2].Offset + blocks[2].Size/2
	b := blocks[7].Offset + blocks[7].Size/2
	dup := append(append(append([]byte(nil), whole[:b]...), whole[a:b]...), whole[b:]...)
	magic := append([]byte(nil), whole...)
	magic[3] ^= 0x04

	for _, tc := range []struct {
		name, damage string
		data         []byte
	}{
		{"repeated range", "repeated: a copy of block", dup},
		{"flipped magic", "file magic damaged", magic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".wt")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr, code := wtrace(t, "verify", p)
			if code != 1 || !strings.Contains(out, tc.damage) || strings.Contains(out, "  closed cleanly:") {
				t.Errorf("verify: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, stderr, tc.damage)
			}
			fixed := filepath.Join(dir, "fixed-"+filepath.Base(p))
			if out, stderr, code := wtrace(t, "verify", "--repair", fixed, p); code != 0 {
				t.Fatalf("verify --repair: exit %d\n%s%s", code, out, stderr)
			}
			if out, _, code := wtrace(t, "verify", fixed); code != 0 {
				t.Errorf("verify of the repaired file: exit %d\n%s", code, out)
			}
			out, stderr, code = wtrace(t, "events", fixed)
			evs := parseEvents(t, out)
			seen := map[string]bool{}
			for _, e := range evs {
				if seen[e.SHA256] {
					t.Errorf("repaired file: event %d (%s %s rv %s) twice", e.Seq, e.Type, e.Name, e.ResourceVersion)
				}
				seen[e.SHA256] = true
			}
			if code != 0 || len(evs) != 200 {
				t.Errorf("repaired file: exit %d, %d events (%d distinct); want the 200 recorded\n%s", code, len(evs), len(seen), stderr)
			}
		})
	}
}

// TestVerifySessionDict: a session long enough for the session dictionary
// (format version 2) verifies clean; cut short, as a killed recorder
// leaves it, it verifies as damaged and repairs into a session holding
// every event of its complete blocks.
func TestVerifySessionDict(t *testing.T) {
	dir := t.TempDir()
	var pcaps [][]byte
	for _, name := range []string{"protobuf", "basic-json"} {
		raw, err := os.ReadFile(filepath.Join(corpus(name), "capture.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		pcaps = append(pcaps, pcaptest.Nanosecond(raw))
	}
	var buf bytes.Buffer
	if _, err := pcaptest.Overlap(&buf, pcaps, 6<<20, 4, 8001); err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(dir, "long.pcap")
	if err := os.WriteFile(pcap, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(dir, "long.wt")
	// Blocks smaller than a capture file's default (as a live recording
	// cuts them) are what the dictionary is for.
	if _, stderr, code := wtrace(t, "record", "--keep-secrets", "--block-size", "256KiB", "--pcap", pcap, "-o", wt); code != 0 {
		t.Fatal(stderr)
	}
	whole, err := os.ReadFile(wt)
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 or later, and most blocks compressed with the dictionary
	// (codec 2, FORMAT.md §4): walk the block headers.
	if v := binary.LittleEndian.Uint16(whole[8:]); v != formats.Version || v < 2 {
		t.Fatalf("session file version %d; want %d", v, formats.Version)
	}
	dict := 0
	var first []int // offsets of the data blocks before the first copy
	copyAt := -1    // offset of the first dictionary block (type 3)
	for off := 16; off+48 <= len(whole)-32; {
		size := int(binary.LittleEndian.Uint16(whole[off+6:])) + int(binary.LittleEndian.Uint32(whole[off+12:]))
		switch {
		case whole[off+5] == 2:
			dict++
		case whole[off+4] == 3 && copyAt < 0:
			copyAt = off
		case (whole[off+4] == 1 || whole[off+4] == 4) && copyAt < 0: // data (type 4: version 3)
			first = append(first, off)
		}
		off += size
	}
	if dict < 10 || copyAt < 0 || len(first) < 2 {
		t.Fatalf("%d blocks use the session dictionary, %d before it, first copy at %d; want most, several, one", dict, len(first), copyAt)
	}
	if out, stderr, code := wtrace(t, "verify", wt); code != 0 || !strings.Contains(out, "closed cleanly") {
		t.Fatalf("verify: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	all, _, _ := wtrace(t, "events", wt)

	cut := filepath.Join(dir, "cut.wt")
	if err := os.WriteFile(cut, whole[:len(whole)*3/4], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := wtrace(t, "verify", cut); code != 1 {
		t.Errorf("verify of a cut session: exit %d, stdout %q, stderr %q; want exit 1", code, out, stderr)
	}
	fixed := filepath.Join(dir, "fixed.wt")
	if out, stderr, code := wtrace(t, "verify", "--repair", fixed, cut); code != 0 {
		t.Fatalf("verify --repair: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := wtrace(t, "verify", fixed); code != 0 {
		t.Errorf("verify of the repaired session: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	got, _, _ := wtrace(t, "events", fixed)
	if got == "" || !strings.HasPrefix(all, got) || len(got) < len(all)/2 {
		t.Errorf("repaired session: %d bytes of events, not a prefix of the whole session's %d, or fewer than half", len(got), len(all))
	}

	// Damage to one of the blocks the dictionary is taken from, or to all
	// of them (the copy that follows them intact): verify names only the
	// damaged blocks (the later ones, compressed with the dictionary,
	// read), inspect works, the repaired file is clean and the events of
	// both are the others. (Damage to the copy too is covered by
	// formats.TestSessionDictDamage: this session is too short for a
	// second copy.)
	// An event's identity: what its own Frame record says (the conn and
	// format come from records a damaged block may have held).
	eventKey := func(line string) string {
		var e struct {
			Exchange, Seq, Size int64
			Time, SHA256        string
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		return fmt.Sprint(e.Exchange, e.Seq, e.Time, e.Size, e.SHA256)
	}
	var allLines []string
	for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
		allLines = append(allLines, eventKey(l))
	}
	for name, hurt := range map[string]func(b []byte){
		"flip":   func(b []byte) { b[first[1]+60] ^= 0x10 },
		"zeroed": func(b []byte) { clear(b[16:copyAt]) },
	} {
		damaged := bytes.Clone(whole)
		hurt(damaged)
		path := filepath.Join(dir, name+".wt")
		if err := os.WriteFile(path, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := wtrace(t, "verify", path)
		n := strings.Count(out, "damaged:")
		if code != 1 || n == 0 || strings.Contains(out, "dictionary unavailable") {
			t.Errorf("%s: verify: exit %d, stdout %q, stderr %q; want exit 1 and damage without a lost dictionary", name, code, out, stderr)
		}
		if name == "flip" && n != 1 {
			t.Errorf("flip: verify names %d damaged blocks; want 1:\n%s", n, out)
		}
		if name == "zeroed" && n > len(first) {
			t.Errorf("zeroed: verify names %d damaged blocks; want at most the %d before the copy:\n%s", n, len(first), out)
		}
		if out, stderr, code := wtrace(t, "inspect", path); code != 0 || out == "" {
			t.Errorf("%s: inspect: exit %d, stderr %q", name, code, stderr)
		}
		fixed := filepath.Join(dir, name+"-fixed.wt")
		if out, stderr, code := wtrace(t, "verify", "--repair", fixed, path); code != 0 {
			t.Fatalf("%s: verify --repair: exit %d\n%s%s", name, code, out, stderr)
		}
		if out, stderr, code := wtrace(t, "verify", fixed); code != 0 {
			t.Errorf("%s: verify of the repaired session: exit %d, stdout %q, stderr %q", name, code, out, stderr)
		}
		for _, p := range []string{path, fixed} {
			evs, _, _ := wtrace(t, "events", p)
			lines := strings.Split(strings.TrimSpace(evs), "\n")
			// Every event read is one of the session's, in order; what is
			// missing is at most what the damaged blocks held (the first
			// blocks: the first megabyte of 6 MB of records).
			i := 0
			for _, l := range lines {
				l = eventKey(l)
				for i < len(allLines) && allLines[i] != l {
					i++
				}
				if i == len(allLines) {
					t.Fatalf("%s: event %q not among the whole session's, in order", p, l)
				}
			}
			if len(lines) < len(allLines)*3/4 {
				t.Errorf("%s: %d events of %d; want all but those of the damaged blocks", p, len(lines), len(allLines))
			}
		}
	}
}
