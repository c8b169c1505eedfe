package edit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// corpusPcaps returns the corpus captures of testdata/corpus and, when
// present, ../shared/corpus.
func corpusPcaps(t testing.TB) map[string]string {
	t.Helper()
	root, err := wttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, dir := range []string{filepath.Join(root, "..", "shared", "corpus"), filepath.Join(root, "testdata", "corpus")} {
		pcaps, _ := filepath.Glob(filepath.Join(dir, "*", "capture.pcap"))
		for _, p := range pcaps {
			out[filepath.Base(filepath.Dir(p))] = p
		}
	}
	if len(out) == 0 {
		t.Skip("no corpus captures")
	}
	return out
}

// recordRotated records a capture once into two FileSinks, as one Tee
// feeds a recording's sink: an unrotated session and one rotated every
// maxSize bytes. It returns the session and the parts.
func recordRotated(t testing.TB, pcap, dir string, maxSize int64) (string, []string) {
	t.Helper()
	keys, err := wttest.KeyLogFor(pcap)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	pc, err := capture.NewPcap(in, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	meta := formats.NewMeta("wtrace test", formats.SourcePcap, "pcap "+filepath.Base(pcap), false)
	whole := filepath.Join(dir, "whole.wt")
	a, err := formats.NewFileSink(formats.FileSinkOptions{Path: whole, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	b, err := formats.NewFileSink(formats.FileSinkOptions{Path: filepath.Join(dir, "rot.wt"), Meta: meta, MaxSize: maxSize, Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pc.Record(context.Background(), both{a, b}, capture.Options{KeyLog: keys}, nil)
	if err != nil {
		t.Fatal(err)
	}
	end := formats.Ending{Note: res.Note, CaptureSHA256: res.SHA256}
	if err := a.Close(end); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(end); err != nil {
		t.Fatal(err)
	}
	return whole, b.Names()
}

// both writes each record to two sinks.
type both [2]*formats.FileSink

func (s both) Write(r formats.Record) error {
	if err := s[0].Write(r); err != nil {
		return err
	}
	return s[1].Write(r)
}

// eventLines is what `wtrace events` prints for a session.
func eventLines(t *testing.T, path string) []string {
	t.Helper()
	f := wttest.OpenSession(t, path)
	var b bytes.Buffer
	enc := formats.NewEventEncoder(&b, true)
	for ev, err := range f.Events() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		enc.Encode(ev)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// described is what the index says of a session, but for its blocks: the
// schema's connections, exchanges (without their blocks), anomalies and
// summary.
func described(t *testing.T, path string) string {
	t.Helper()
	s := export.SessionOf(wttest.OpenSession(t, path).Index())
	for i := range s.Exchanges {
		s.Exchanges[i].Blocks = nil
	}
	b, err := json.MarshalIndent(struct {
		Conns     []export.Conn
		Exchanges []export.Exchange
		Anomalies []export.Anomaly
		Summary   *export.Summary
	}{s.Conns, s.Exchanges, s.Anomalies, s.Summary}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMergeRotated: merging the parts of a rotated recording gives what an
// unrotated recording of the same traffic holds — the same `wtrace events`
// output, byte for byte, and the same connections, exchanges, anomalies
// and totals — whatever the order the parts are given in.
func TestMergeRotated(t *testing.T) {
	for name, pcap := range corpusPcaps(t) {
		t.Run(name, func(t *testing.T) {
			// 8 KiB parts; a small capture (the repository's own
			// table-watch, metadata-informer) is cut smaller.
			var dir, whole string
			var files []string
			for size := int64(8 << 10); ; size /= 2 {
				dir = t.TempDir()
				whole, files = recordRotated(t, pcap, dir, size)
				if len(files) >= 3 || size <= 1<<10 {
					break
				}
			}
			if len(files) < 3 {
				t.Fatalf("the rotated recording has %d parts; the test wants several", len(files))
			}
			parts := slices.Clone(files)
			slices.Reverse(parts) // Merge puts them in order
			merged := filepath.Join(dir, "merged.wt")
			mres, err := Merge(context.Background(), parts, MergeOptions{Output: formats.FileSinkOptions{Path: merged}, Tool: "wtrace test"})
			if err != nil {
				t.Fatal(err)
			}
			if len(mres.Recordings) != 1 || mres.Renumbered || len(mres.Damage) > 0 || len(mres.Notes) > 0 {
				t.Errorf("merge result %+v; want one recording", mres)
			}
			if mres.Announced == 0 {
				t.Errorf("no record announced again was dropped across %d parts", len(parts))
			}
			want, got := eventLines(t, whole), eventLines(t, merged)
			if len(want) != len(got) {
				t.Fatalf("%d events; the unrotated recording has %d", len(got), len(want))
			}
			for i := range want {
				if want[i] != got[i] {
					t.Fatalf("event line %d:\n got %.300s\nwant %.300s", i, got[i], want[i])
				}
			}
			if w, g := described(t, whole), described(t, merged); w != g {
				t.Errorf("the merged session's index differs from the unrotated recording's:\n%s", firstDiff(w, g))
			}
			m := wttest.OpenSession(t, merged).Index().Meta
			if m.Labels["part"] != "" || m.Labels["previous"] != "" || !strings.Contains(m.Labels["merged"], "rot-0001.wt") {
				t.Errorf("merged labels %v", m.Labels)
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			lo := max(i-3, 0)
			return "want:\n" + strings.Join(al[lo:min(i+3, len(al))], "\n") + "\ngot:\n" + strings.Join(bl[lo:min(i+3, len(bl))], "\n")
		}
	}
	return "(lengths differ)"
}

// TestMergeCompatRotated: the two parts of a proxy recording rotated by
// wtrace 9936756 (testdata/compat) are one session again: the watch the
// second part announced again is one exchange, its events those of both
// parts.
func TestMergeCompatRotated(t *testing.T) {
	root, err := wttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "compat", "9936756")
	// The parts were named rot-0001.wt, rot-0002.wt when recorded: copy
	// them under those names, as a user would have them.
	tmp := t.TempDir()
	var parts []string
	for i, n := range []string{"proxy-rotated-0001.wt", "proxy-rotated-0002.wt"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, formats.PartName("rot.wt", i+1))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	merged := filepath.Join(tmp, "merged.wt")
	res, err := Merge(context.Background(), parts, MergeOptions{Output: formats.FileSinkOptions{Path: merged}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Recordings) != 1 {
		t.Fatalf("recordings %v; want the two parts as one", res.Recordings)
	}
	want := append(eventLines(t, parts[0]), eventLines(t, parts[1])...)
	got := eventLines(t, merged)
	if !slices.Equal(got, want) {
		t.Errorf("merged events differ from the parts' (%d and %d lines)", len(got), len(want))
	}
	f := wttest.OpenSession(t, merged)
	p1, p2 := wttest.OpenSession(t, parts[0]).Index(), wttest.OpenSession(t, parts[1]).Index()
	ids := map[int64]bool{}
	for _, x := range append(slices.Clone(p1.Exchanges), p2.Exchanges...) {
		ids[x.Request.Exchange] = true
	}
	if n := len(f.Index().Exchanges); n != len(ids) {
		t.Errorf("%d exchanges; the parts hold %d distinct ones", n, len(ids))
	}
	for _, x := range f.Index().Exchanges {
		if x.Request.Missing {
			t.Errorf("exchange %d lost its request", x.Request.Exchange)
		}
	}
	if s := f.Index().Summary; s.Events != int64(len(want)) || s.Exchanges != int64(len(ids)) {
		t.Errorf("summary %+v", s)
	}
}

// TestMergeRecordings: two recordings (here: two captures, and the same
// capture recorded twice, as two apiservers behind the same addresses
// would look) keep their connections apart: every connection, exchange
// and event of each is in the merge, renumbered, each recording's events
// in their order, interleaved by capture time.
func TestMergeRecordings(t *testing.T) {
	pcaps := corpusPcaps(t)
	for _, pair := range [][2]string{{"basic-json", "protobuf"}, {"multi-watch", "multi-watch"}, {"gone-410", "tls-h2"}} {
		t.Run(pair[0]+"+"+pair[1], func(t *testing.T) {
			dir := t.TempDir()
			var ins []string
			for i, name := range pair {
				p := filepath.Join(dir, name+string(rune('a'+i))+".wt")
				if _, err := wttest.RecordPcap(pcaps[name], p, capture.Options{}); err != nil {
					t.Fatalf("recording %s: %v", pcaps[name], err)
				}
				ins = append(ins, p)
			}
			merged := filepath.Join(dir, "merged.wt")
			res, err := Merge(context.Background(), ins, MergeOptions{Output: formats.FileSinkOptions{Path: merged}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Recordings) != 2 || !res.Renumbered {
				t.Fatalf("result %+v; want two recordings, renumbered", res)
			}
			a, b, m := wttest.OpenSession(t, ins[0]).Index(), wttest.OpenSession(t, ins[1]).Index(), wttest.OpenSession(t, merged).Index()
			if len(m.Conns) != len(a.Conns)+len(b.Conns) || len(m.Exchanges) != len(a.Exchanges)+len(b.Exchanges) || len(m.Anomalies) != len(a.Anomalies)+len(b.Anomalies) {
				t.Errorf("merged %d conns, %d exchanges, %d anomalies; want %d, %d, %d", len(m.Conns), len(m.Exchanges), len(m.Anomalies),
					len(a.Conns)+len(b.Conns), len(a.Exchanges)+len(b.Exchanges), len(a.Anomalies)+len(b.Anomalies))
			}
			for i, c := range m.Conns {
				if c.Conn.ID != uint64(i) {
					t.Errorf("connection %d numbered %d", i, c.Conn.ID)
				}
			}
			if s := m.Summary; s.Events != a.Summary.Events+b.Summary.Events || s.Packets != a.Summary.Packets+b.Summary.Packets {
				t.Errorf("summary %+v", s)
			}
			if !strings.HasPrefix(m.Meta.Description, "merge of ") {
				t.Errorf("description %q", m.Meta.Description)
			}
			// Each recording's events, in their order: an event is known by
			// what it says and its bytes, not its exchange number.
			key := func(l string) string {
				var e formats.EventLine
				json.Unmarshal([]byte(l), &e)
				return e.Conn + " " + e.Request + " " + e.Time + " " + e.SHA256
			}
			var wantA, wantB, got []string
			for _, l := range eventLines(t, ins[0]) {
				wantA = append(wantA, key(l))
			}
			for _, l := range eventLines(t, ins[1]) {
				wantB = append(wantB, key(l))
			}
			for _, l := range eventLines(t, merged) {
				got = append(got, key(l))
			}
			if !isInterleaving(got, wantA, wantB) {
				t.Errorf("the merged events are not the two recordings' events, each in order")
			}
		})
	}
}

// isInterleaving reports whether got is a merge of a and b keeping the
// order of each.
func isInterleaving(got, a, b []string) bool {
	if len(got) != len(a)+len(b) {
		return false
	}
	// Greedy with lookahead is enough when a and b share no element;
	// otherwise fall back to counting (two recordings of one capture).
	count := map[string]int{}
	for _, s := range got {
		count[s]++
	}
	for _, s := range append(slices.Clone(a), b...) {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	inA := map[string]bool{}
	for _, s := range a {
		inA[s] = true
	}
	var ga, gb []string
	for _, s := range got {
		if inA[s] && !slices.Contains(b, s) {
			ga = append(ga, s)
		} else if !inA[s] {
			gb = append(gb, s)
		}
	}
	var fa, fb []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			fa = append(fa, s)
		}
	}
	for _, s := range b {
		if !inA[s] {
			fb = append(fb, s)
		}
	}
	return slices.Equal(ga, fa) && slices.Equal(gb, fb)
}

// TestMergeMissingPart: a part whose predecessor is not among the inputs
// is merged as a recording of its own, and the result says so.
func TestMergeMissingPart(t *testing.T) {
	pcap := corpusPcaps(t)["basic-json"]
	dir := t.TempDir()
	_, files := recordRotated(t, pcap, dir, 8<<10)
	if len(files) < 3 {
		t.Fatalf("%d parts", len(files))
	}
	ins := []string{files[0], files[2]}
	mres, err := Merge(context.Background(), ins, MergeOptions{Output: formats.FileSinkOptions{Path: filepath.Join(dir, "m.wt")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mres.Recordings) != 2 || len(mres.Notes) != 1 || !strings.Contains(mres.Notes[0], "not among the inputs") {
		t.Errorf("result %+v", mres)
	}
}

// TestMergeDamage: a damaged part is merged up to its damage and after it;
// the damage is reported.
func TestMergeDamage(t *testing.T) {
	pcap := corpusPcaps(t)["basic-json"]
	dir := t.TempDir()
	_, files := recordRotated(t, pcap, dir, 8<<10)
	b, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(files[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(dir, "m.wt")
	mres, err := Merge(context.Background(), files, MergeOptions{Output: formats.FileSinkOptions{Path: merged}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mres.Damage) == 0 {
		t.Errorf("no damage reported")
	}
	if f := wttest.OpenSession(t, merged); !f.Clean() || f.Index().Summary.Events == 0 {
		t.Errorf("merged file clean %v, %+v", f.Clean(), f.Index().Summary)
	}
}

// TestMergeCycle: parts whose "previous" labels name each other in a
// circle are an error naming the circle — alone (it panicked in
// mergedMeta) or beside a normal recording (the pair was dropped without a
// word, exit 0) — and nothing is written.
func TestMergeCycle(t *testing.T) {
	dir := t.TempDir()
	part := func(name, previous string) string {
		path := filepath.Join(dir, name)
		meta := formats.Meta{Tool: "test", Labels: map[string]string{"previous": previous}}
		if previous == "" {
			meta.Labels = nil
		}
		fs, err := formats.NewFileSink(formats.FileSinkOptions{Path: path, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		fs.Write(&formats.Conn{ID: 1, Time: 1e9, Client: "127.0.0.1:1", Server: "127.0.0.1:2"})
		fs.Write(&formats.Request{Conn: 1, Exchange: 0, Time: 1e9, Method: "GET", Target: "/api", Proto: "HTTP/1.1"})
		if err := fs.Close(formats.Ending{}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := part("a.wt", "b.wt")
	b := part("b.wt", "a.wt")
	c := part("c.wt", "")
	for _, tc := range []struct {
		name string
		ins  []string
	}{
		{"alone", []string{a, b}},
		{"beside a recording", []string{c, a, b}},
		{"self", []string{part("s.wt", "s.wt")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "m-"+strings.ReplaceAll(tc.name, " ", "-")+".wt")
			res, err := Merge(context.Background(), tc.ins, MergeOptions{Output: formats.FileSinkOptions{Path: out}})
			if err == nil || !strings.Contains(err.Error(), "→") {
				t.Fatalf("Merge(%v) = %+v, %v; want an error naming the circle", tc.ins, res, err)
			}
			for _, in := range tc.ins {
				if in != c && !strings.Contains(err.Error(), in) {
					t.Errorf("the error does not name %s: %v", in, err)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// TestFailedEditKeepsOutput: a slice or merge that fails midway (here,
// stopped by its context) leaves what the output path held, and no
// temporary file — it used to close the partial output over it, with a
// note.
func TestFailedEditKeepsOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wt")
	if _, err := wttest.RecordPcap(corpusPcaps(t)["basic-json"], in, capture.Options{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.wt")
	old := []byte("what the output path held")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("stopped by the test"))
	for _, run := range []func() error{
		func() error {
			_, err := Slice(ctx, in, SliceOptions{Output: formats.FileSinkOptions{Path: out}})
			return err
		},
		func() error {
			_, err := Merge(ctx, []string{in}, MergeOptions{Output: formats.FileSinkOptions{Path: out}})
			return err
		},
	} {
		if err := os.WriteFile(out, old, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := run(); err == nil || err.Error() != "stopped by the test" {
			t.Errorf("err = %v; want the context's cause", err)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, old) {
			t.Errorf("the output path holds %d bytes; want what it held", len(got))
		}
		if es, _ := os.ReadDir(dir); len(es) != 2 {
			t.Errorf("files left: %v", es)
		}
	}
}
