package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
)

// TestReplayBannerDamage: the banner of a replay of a damaged real session
// says how many events were lost, in which exchange, after which event,
// and where in the file.
func TestReplayBannerDamage(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "s.wt")
	data, blocks := recordBlocks(t, "basic-json", wt)
	blk := blocks[len(blocks)*2/3]
	data[blk.Offset+blk.Size/2] ^= 0x40
	damaged := filepath.Join(dir, "damaged.wt")
	if err := os.WriteFile(damaged, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := formats.Open(damaged, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv, err := replay.New(f, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ls := srv.Losses()
	if len(ls) != 1 || ls[0].Events <= 0 {
		t.Fatalf("Losses() = %v; want one loss of events", ls)
	}
	var b bytes.Buffer
	srv.WriteBanner(&b, replay.BannerOptions{Session: damaged})
	banner := b.String()
	for _, want := range []string{
		fmt.Sprintf("200 watch events over 30.005s; %d of them lost to damage", ls[0].Events),
		fmt.Sprintf("Warning: %s is damaged", damaged),
		fmt.Sprintf("exchange 1 GET /api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=30: %d events lost after event %d", ls[0].Events, ls[0].After),
		fmt.Sprintf("at offset %d: payload checksum mismatch", blk.Offset),
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner does not say %q:\n%s", want, banner)
		}
	}
}
