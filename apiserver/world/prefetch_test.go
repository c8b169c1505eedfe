package world

import (
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestPrefetchSame: a store loaded with every body read ahead (and those
// Load passes over dropped) holds what one loaded reading each body in
// turn holds, version for version, read-only and Live; and either leaves
// the File's block cache empty.
func TestPrefetchSame(t *testing.T) {
	for _, sc := range []string{"basic-json", "protobuf", "multi-watch", "gone-410", "metadata-informer", "cbor-informer"} {
		for _, live := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/live=%v", sc, live), func(t *testing.T) {
				f := wttest.OpenSession(t, wttest.RecordCorpus(t, sc, false))
				load := func(min int64) string {
					old := prefetchMin
					prefetchMin = min
					defer func() { prefetchMin = old }()
					s, err := Load(f, Options{Live: live, Now: func() time.Time { return time.Unix(1, 0) }, NewUID: func() string { return "u" }})
					if err != nil {
						t.Fatal(err)
					}
					// The load reads through a cache of its own: the
					// File's is left to what a replay serves.
					if n := f.CacheBytes(); n != 0 {
						t.Errorf("after Load the File's block cache holds %d bytes; want 0", n)
					}
					return fingerprint(s)
				}
				serial, ahead := load(1<<62), load(0)
				if serial != ahead {
					t.Fatalf("read ahead:\n%s\nin turn:\n%s", ahead, serial)
				}
				if !strings.Contains(serial, "rv=") {
					t.Fatalf("the store holds nothing:\n%s", serial)
				}
			})
		}
	}
}

// fingerprint lists every version a store holds, by resource.
func fingerprint(s *Store) string {
	var b strings.Builder
	var rs []string
	for r := range s.res {
		rs = append(rs, r.String())
	}
	sort.Strings(rs)
	for _, name := range rs {
		for r, h := range s.res {
			if r.String() != name {
				continue
			}
			fmt.Fprintf(&b, "%s\n", name)
			for _, es := range [][]*entry{h.rec, h.syn} {
				for _, e := range es {
					fmt.Fprintf(&b, "  rv=%d synth=%v %s %v %d %08x\n", e.rv, e.synth, e.key, e.typ, len(e.obj.Raw), crc32.ChecksumIEEE(e.obj.Raw))
				}
			}
		}
	}
	fmt.Fprintf(&b, "last=%d oldest=%d\n", s.clk.last, s.oldest)
	return b.String()
}
